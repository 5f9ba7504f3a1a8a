"""Snapshots of a run's state: suspend anywhere, resume anywhere.

``dump_state(state)`` turns a :class:`~helikon.loop.RunState` into versioned
JSON bytes; ``load_state(data)`` gives it back. Because the pending effect
is a function of the state (:func:`helikon.loop.resume`), a state saved at
any effect boundary — say while a tool call waits for a human — is all it
takes to continue the run later, in another process, with
``agent.resume(ctx, state)``.
"""

from __future__ import annotations

from typing import Final

import msgspec

from helikon import codec
from helikon.errors import HelikonError
from helikon.loop import RunState

FORMAT: Final = "helikon-state"
VERSION: Final = 1


class StateFormatError(HelikonError):
    """The bytes are not a helikon state snapshot this version can read."""


def dump_state(state: RunState) -> bytes:
    """``state`` as versioned, byte-stable JSON."""
    envelope = {"format": FORMAT, "version": VERSION, "state": codec.unstructure(state)}
    return msgspec.json.encode(envelope, order="sorted")


def load_state(data: bytes | str) -> RunState:
    """The :class:`RunState` that :func:`dump_state` wrote.

    Raises:
        StateFormatError: not a snapshot, an unknown version, or malformed.
    """
    try:
        envelope = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise StateFormatError(f"not a state snapshot: {exc}") from None
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise StateFormatError("not a helikon state snapshot")
    if envelope.get("version") != VERSION:
        version = envelope.get("version")
        raise StateFormatError(
            f"state snapshot version {version!r} is not supported (this helikon reads {VERSION})"
        )
    try:
        state: RunState = codec.structure(envelope["state"], RunState)
    except Exception as exc:
        raise StateFormatError(f"malformed state snapshot: {exc}") from exc
    return state


__all__ = ["FORMAT", "VERSION", "StateFormatError", "dump_state", "load_state"]
