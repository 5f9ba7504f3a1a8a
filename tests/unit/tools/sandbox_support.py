"""Helpers of the sandboxed-tool tests: the layout, and calling a tool as the interpreter would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import Denied, ToolError
from helikon.ids import CallId, RunId
from helikon.protocols import Tool

SECRET = "TOP SECRET: outside the sandbox"


def tool_context() -> ToolContext[None]:
    return ToolContext(
        None,
        SessionState(),
        Actions(),
        CancellationToken(),
        TracerHandle(),
        CallId("c1"),
        RunId("r1"),
        "tester",
    )


def invoke(tool: Tool, **args: Any) -> Any:
    """Call ``tool`` with JSON ``args`` the way an interpreter does."""
    return anyio.run(tool.invoke, tool_context(), args)


def refused(tool: Tool, **args: Any) -> str:
    """Call ``tool`` and return the ``denied: ...`` text the model would read (fails if not denied)."""
    with pytest.raises(ToolError) as caught:
        invoke(tool, **args)
    assert isinstance(caught.value.failure, Denied), f"expected a refusal, got: {caught.value}"
    assert str(caught.value).startswith("denied: ")
    return str(caught.value)


@attrs.frozen
class Layout:
    """``root/`` is the sandbox; ``outside/secret.txt`` must never be read or written through it."""

    root: Path
    outside: Path

    @property
    def secret(self) -> Path:
        return self.outside / "secret.txt"
