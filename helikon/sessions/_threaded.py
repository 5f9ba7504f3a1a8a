"""The async face every blocking-driver backend shares.

SQLite, PostgreSQL and Redis sessions talk to their stores through blocking
drivers (so they work under trio and asyncio alike); each implements three
blocking methods and inherits the async protocol, which runs them in a
worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import anyio

from helikon.items import Item
from helikon.sessions._events import SequenceId, SessionEvent
from helikon.sessions._project import project


class ThreadedSession:
    """A :class:`~helikon.sessions.Session` over a blocking driver.

    Subclasses implement ``_append`` (store a non-empty batch, return the
    first new sequence id), ``_read`` (the events after ``since``) and
    ``_close`` (release what the session owns).
    """

    def _append(self, events: list[SessionEvent]) -> int:
        raise NotImplementedError

    def _read(self, since: SequenceId | None) -> list[SessionEvent]:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        if not events:
            return []
        batch = list(events)
        first = await anyio.to_thread.run_sync(self._append, batch)
        return [SequenceId(first + i) for i in range(len(batch))]

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        return await anyio.to_thread.run_sync(self._read, since)

    async def snapshot(self) -> tuple[Item, ...]:
        return project(await self.events())

    async def aclose(self) -> None:
        """Release the session's resources, off the event loop."""
        await anyio.to_thread.run_sync(self._close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


__all__ = ["ThreadedSession"]
