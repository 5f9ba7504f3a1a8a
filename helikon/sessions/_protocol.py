"""The :class:`Session` protocol every backend implements, and its error.

A session is conversation persistence as an append-only log of
:data:`~helikon.sessions.SessionEvent`. Its contract (the testkit checks
every rule, :mod:`helikon.sessions.testkit`):

- ``append(events)`` writes ``events`` at the end of the log, all or nothing,
  and returns the :data:`~helikon.sessions.SequenceId` of each, in order.
  Sequence ids of one log start at 0 and are contiguous: concurrent
  appenders never get the same id and never leave a gap, and each
  appender's events keep their order. Appending nothing returns ``[]``.
- ``events(since=None)`` reads the log in sequence order; ``since`` is
  exclusive: ``events(SequenceId(n))`` returns the events after position
  ``n``. As ids are contiguous from 0, ``events()[i]`` has id ``i``.
- ``snapshot()`` returns the conversation the log projects to:
  :func:`~helikon.sessions.project` over ``events()``.

Backends raise :class:`SessionError` and nothing else on purpose; any other
exception escaping a shipped backend is a bug.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from helikon.errors import HelikonError
from helikon.items import Item
from helikon.sessions._events import EventDecodeError, SequenceId, SessionEvent, decode_event


class SessionErrorKind(enum.Enum):
    """What kind of failure a :class:`SessionError` reports."""

    #: The backend cannot be reached (connection refused, pool exhausted).
    UNAVAILABLE = "unavailable"
    #: The backend failed; :attr:`SessionError.cause` holds its exception.
    BACKEND = "backend"
    #: Anything else (a corrupt log, a misuse).
    OTHER = "other"


class SessionError(HelikonError):
    """A session could not be read or written.

    Build it with the class methods: ``SessionError.backend(exc)`` wraps a
    driver's exception (kept in :attr:`cause` and as ``__cause__`` when raised
    ``from`` it), ``SessionError.unavailable(...)`` and
    ``SessionError.other(...)`` carry a message.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: SessionErrorKind = SessionErrorKind.OTHER,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause = cause

    @classmethod
    def unavailable(cls, message: str, cause: BaseException | None = None) -> SessionError:
        return cls(f"session unavailable: {message}", kind=SessionErrorKind.UNAVAILABLE, cause=cause)

    @classmethod
    def backend(cls, cause: BaseException, message: str | None = None) -> SessionError:
        text = message if message is not None else f"{type(cause).__name__}: {cause}"
        return cls(f"session backend error: {text}", kind=SessionErrorKind.BACKEND, cause=cause)

    @classmethod
    def other(cls, message: str, cause: BaseException | None = None) -> SessionError:
        return cls(message, kind=SessionErrorKind.OTHER, cause=cause)


@runtime_checkable
class Session(Protocol):
    """Conversation persistence as an append-only event log (see the module doc)."""

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        """Append ``events`` atomically; their sequence ids, in order.

        Raises:
            SessionError: nothing was appended.
        """
        ...

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        """The log after position ``since`` (exclusive), or all of it.

        Raises:
            SessionError: the log could not be read.
        """
        ...

    async def snapshot(self) -> tuple[Item, ...]:
        """The conversation the log projects to (``project(await events())``).

        Raises:
            SessionError: the log could not be read.
        """
        ...


def decode_stored(session_id: str, sequence: int, payload: str | bytes) -> SessionEvent:
    """Decode a stored event; a corrupt one raises ``SessionError`` (kind other)."""
    try:
        return decode_event(payload)
    except EventDecodeError as exc:
        raise SessionError.other(f"session {session_id!r}: event {sequence} is corrupt: {exc}", exc) from exc


__all__ = ["Session", "SessionError", "SessionErrorKind"]
