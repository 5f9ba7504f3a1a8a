"""Calling user functions that may be sync or async."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; await its answer when it is awaitable."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


__all__ = ["call"]
