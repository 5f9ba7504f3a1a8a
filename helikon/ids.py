"""Identifiers. Ids are ``NewType``s over ``str`` so they cannot be mixed up.

The core never mints an id from randomness: the run id comes from the
interpreter, provider call ids are kept, and missing call ids are derived from
``(run id, turn, index)`` by :func:`derive_call_id`.
"""

from __future__ import annotations

from typing import NewType

RunId = NewType("RunId", str)
CallId = NewType("CallId", str)


def derive_call_id(run_id: RunId, turn: int, index: int) -> CallId:
    """Return the deterministic id for a tool call a provider left unnamed.

    >>> derive_call_id(RunId("r1"), 2, 0)
    'call_r1_2_0'
    """
    return CallId(f"call_{run_id}_{turn}_{index}")


__all__ = ["CallId", "RunId", "derive_call_id"]
