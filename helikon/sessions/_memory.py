"""``MemorySession``: the in-process backend.

One instance is one session (there is no session id): the log is a list
held by the instance and lost with it. Appends take a thread lock, so one
instance may be shared by tasks of one event loop and by threads alike.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import final

from helikon.items import Item
from helikon.sessions._events import SequenceId, SessionEvent
from helikon.sessions._project import project


@final
class MemorySession:
    """An in-memory :class:`~helikon.sessions.Session`: tests and ephemeral runs.

    >>> import anyio
    >>> from helikon.sessions import UserMessageEvent
    >>> session = MemorySession()
    >>> anyio.run(session.append, [UserMessageEvent.from_text("hi", at=0)])
    [0]
    """

    def __init__(self, events: Sequence[SessionEvent] = ()) -> None:
        self._events: list[SessionEvent] = list(events)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemorySession(<{len(self._events)} events>)"

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        batch = list(events)
        with self._lock:
            first = len(self._events)
            self._events.extend(batch)
        return [SequenceId(first + i) for i in range(len(batch))]

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        with self._lock:
            return self._events[:] if since is None else self._events[max(since + 1, 0) :]

    def log(self) -> list[SessionEvent]:
        """A copy of the whole log as it is now, read without awaiting (the
        log is in memory): for synchronous readers such as the studio's
        sessions view, on any thread. :meth:`events` is the same read
        through the :class:`~helikon.sessions.Session` protocol.

        >>> import anyio
        >>> from helikon.sessions import UserMessageEvent
        >>> session = MemorySession([UserMessageEvent.from_text("hi", at=0)])
        >>> [event.at for event in session.log()]
        [0]
        """
        with self._lock:
            return self._events[:]

    async def snapshot(self) -> tuple[Item, ...]:
        return project(await self.events())

    async def aclose(self) -> None:
        """Nothing to release (for symmetry with the durable backends)."""

    async def __aenter__(self) -> MemorySession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


__all__ = ["MemorySession"]
