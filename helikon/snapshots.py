"""Snapshots of a run's state: suspend anywhere, resume anywhere.

``dump_state(state)`` turns a :class:`~helikon.loop.RunState` into versioned
JSON bytes; ``load_state(data)`` gives it back. Because the pending effect
is a function of the state (:func:`helikon.loop.resume`), a state saved at
any effect boundary — say while a tool call waits for a human — is all it
takes to continue the run later, in another process, with
``agent.resume(ctx, state)``.

A state says where each tool call's permission pipeline stands, so whoever
can edit a snapshot can steer the run. An unsigned snapshot is trusted
input: keep it where only you can write, or sign it —
``dump_state(state, key=k)`` adds an HMAC-SHA256 over the bytes and
``load_state(data, key=k)`` refuses a snapshot whose signature is missing or
does not match.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Final

import msgspec

from helikon import codec
from helikon._normal import require_normal
from helikon.agents import TreeState
from helikon.errors import HelikonError, NormalFormError
from helikon.loop import RunState

FORMAT: Final = "helikon-state"
#: The snapshot version this helikon writes and reads (2: tool calls carry
#: their pipeline's position).
VERSION: Final = 2


class StateFormatError(HelikonError):
    """The bytes are not a helikon state snapshot this version can read (a
    value of the wrong type is named by its field path: decoding never
    coerces), or their signature does not check out; or, from
    :func:`dump_state`, the state cannot be written so that it reads back
    equal."""


def _key(key: bytes | str) -> bytes:
    raw = key.encode() if isinstance(key, str) else key
    if len(raw) < 16:
        raise ValueError("a snapshot signing key needs at least 16 bytes")
    return raw


def _signature(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


#: A run's state: one agent loop's, or an agent tree's (handoffs, workflows).
State = RunState | TreeState


def dump_state(state: State, *, key: bytes | str | None = None) -> bytes:
    """``state`` as versioned, byte-stable JSON; signed when ``key`` is given.

    What is written reads back as an equal state, or is not written: a state
    holding a value that is not JSON data in normal form (NaN, a non-string
    dict key, a tuple where JSON has a list: a state built by hand, never
    one a run reached) is refused.

    Raises:
        StateFormatError: the state cannot be written so that it reads back
            equal; the message names the field path.
        ValueError: ``key`` is shorter than 16 bytes.
    """
    machine = "tree" if isinstance(state, TreeState) else "loop"
    data = codec.unstructure(state)
    try:
        require_normal(data, "state")
    except NormalFormError as exc:
        raise StateFormatError(f"the state cannot be written as a snapshot: {exc}") from None
    try:
        back = codec.structure(data, TreeState if machine == "tree" else RunState)
    except Exception as exc:
        raise StateFormatError(
            f"the state cannot be written as a snapshot: {codec.structure_error(exc, 'state')}"
        ) from None
    if back != state:
        raise StateFormatError(
            "the state cannot be written as a snapshot: it would not read back equal "
            "(a field holds a value of another type than its declared one)"
        )
    envelope: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "machine": machine,
        "state": data,
    }
    if key is None:
        return msgspec.json.encode(envelope, order="sorted")
    secret = _key(key)
    body = msgspec.json.encode(envelope, order="sorted")
    envelope["signature"] = _signature(secret, body)
    return msgspec.json.encode(envelope, order="sorted")


def load_state(data: bytes | str, *, key: bytes | str | None = None) -> Any:
    """The state (a :class:`RunState`, or a :class:`~helikon.agents.TreeState`)
    that :func:`dump_state` wrote.

    With ``key``, the snapshot must carry a valid signature made with it.

    Raises:
        StateFormatError: not a snapshot, an unknown version, malformed, or
            (with ``key``) unsigned or tampered with.
    """
    try:
        envelope = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise StateFormatError(f"not a state snapshot: {exc}") from None
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise StateFormatError("not a helikon state snapshot")
    signature = envelope.pop("signature", None)
    if key is not None:
        if not isinstance(signature, str):
            raise StateFormatError("the snapshot is not signed, and a signing key was given")
        expected = _signature(_key(key), msgspec.json.encode(envelope, order="sorted"))
        if not hmac.compare_digest(signature, expected):
            raise StateFormatError(
                "the snapshot's signature does not match: it was changed, or signed with another key"
            )
    if envelope.get("version") != VERSION:
        version = envelope.get("version")
        raise StateFormatError(
            f"state snapshot version {version!r} is not supported (this helikon reads {VERSION})"
        )
    kind = TreeState if envelope.get("machine") == "tree" else RunState
    if "state" not in envelope:
        raise StateFormatError("malformed state snapshot: it has no state")
    try:
        state: State = codec.structure(envelope["state"], kind)
    except Exception as exc:
        raise StateFormatError(f"malformed state snapshot: {codec.structure_error(exc, 'state')}") from exc
    return state


__all__ = ["FORMAT", "VERSION", "State", "StateFormatError", "dump_state", "load_state"]
