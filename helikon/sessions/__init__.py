"""Sessions: conversation persistence as an append-only event log.

- :class:`Session`, the protocol every backend implements, with
  :class:`SessionError` and :data:`SequenceId`.
- :data:`SessionEvent`, the log's entries, and their tagged JSON.
- :func:`project`, the pure fold from a log to a provider-valid conversation.
- Backends: :class:`MemorySession`, :class:`SqliteSession` (stdlib),
  :class:`PostgresSession` (the ``postgres`` extra) and :class:`RedisSession`
  (the ``redis`` extra). Backends and compaction are imported on first use,
  so this package loads fast and without the drivers.
- :class:`CompactingSession`, which summarises a log grown past a token
  threshold, with :class:`HeuristicTokenCounter`.
- :class:`SessionRecorder`, :func:`load_history` and :func:`persist_run`:
  what a runner does around a run.
- :mod:`helikon.sessions.testkit` (import it explicitly): the conformance
  suite a backend must pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helikon.sessions._events import (
    AssistantMessageEvent,
    Compacted,
    EventDecodeError,
    HandoffOccurred,
    SequenceId,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
    decode_event,
    encode_event,
    event_from_json,
    event_to_json,
)
from helikon.sessions._lifecycle import load_history, now_ms, persist_run
from helikon.sessions._memory import MemorySession
from helikon.sessions._project import INTERRUPTED_RESULT, conversation_problems, project
from helikon.sessions._protocol import Session, SessionError, SessionErrorKind
from helikon.sessions._recorder import SessionRecorder

if TYPE_CHECKING:
    from helikon.sessions._compacting import CompactingSession
    from helikon.sessions._compaction import DEFAULT_PROMPT, HeuristicTokenCounter, TokenCounter
    from helikon.sessions._postgres import PostgresSession
    from helikon.sessions._redis import RedisSession
    from helikon.sessions._sqlite import SqliteSession

#: Loaded on first use: the backends import their drivers (and anyio), and the
#: compaction machine's two dozen attrs classes cost more import time than
#: the rest of the package.
_LAZY = {
    "CompactingSession": ("helikon.sessions._compacting", None),
    "DEFAULT_PROMPT": ("helikon.sessions._compaction", None),
    "HeuristicTokenCounter": ("helikon.sessions._compaction", None),
    "TokenCounter": ("helikon.sessions._compaction", None),
    "SqliteSession": ("helikon.sessions._sqlite", None),
    "PostgresSession": ("helikon.sessions._postgres", "postgres"),
    "RedisSession": ("helikon.sessions._redis", "redis"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'helikon.sessions' has no attribute {name!r}")
    import importlib

    module, extra = _LAZY[name]
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if extra is None:
            raise
        raise ImportError(
            f"{name} needs the {extra!r} extra: pip install 'paigasus-helikon[{extra}]'"
        ) from exc
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_PROMPT",
    "INTERRUPTED_RESULT",
    "AssistantMessageEvent",
    "CompactingSession",
    "Compacted",
    "EventDecodeError",
    "HandoffOccurred",
    "HeuristicTokenCounter",
    "MemorySession",
    "PostgresSession",
    "RedisSession",
    "SequenceId",
    "Session",
    "SessionError",
    "SessionErrorKind",
    "SessionEvent",
    "SessionRecorder",
    "SqliteSession",
    "TokenCounter",
    "ToolCallRecorded",
    "ToolResultRecorded",
    "UserMessageEvent",
    "conversation_problems",
    "decode_event",
    "encode_event",
    "event_from_json",
    "event_to_json",
    "load_history",
    "now_ms",
    "persist_run",
    "project",
]
