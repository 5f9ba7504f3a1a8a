"""The conformance testkit against every shipped backend, under trio and asyncio.

The concurrency check runs 8 writers x 200 appends each on one session id,
each writer with its own session object (its own SQLite connection, its own
pooled PostgreSQL connections, the shared Redis client's pool).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from helikon.sessions import Session, testkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

Factory = Callable[[str], Awaitable[Session]]


@pytest.mark.parametrize("check", testkit.CHECKS, ids=lambda c: c.name)
async def test_backend_conforms(check: testkit.Check, open_session: Factory, id_prefix: str) -> None:
    settings = testkit.ConformanceSettings(writers=8, appends_per_writer=200, id_prefix=id_prefix)
    await check.run(open_session, settings)


async def test_run_all_passes_and_reports_the_failing_check() -> None:
    from helikon.sessions import MemorySession, SequenceId, SessionEvent

    class Forgetful:
        """Drops every second event: a broken backend."""

        def __init__(self) -> None:
            self.inner = MemorySession()
            self.n = 0

        async def append(self, events: list[SessionEvent]) -> list[SequenceId]:
            self.n += 1
            return [] if self.n % 2 == 0 and events else await self.inner.append(events)

        async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
            return await self.inner.events(since)

        async def snapshot(self):  # type: ignore[no-untyped-def]
            return await self.inner.snapshot()

    async def open_forgetful(session_id: str) -> Forgetful:
        return Forgetful()

    with pytest.raises(testkit.ConformanceError, match=r"^ordering: "):
        await testkit.run_all(open_forgetful)  # type: ignore[arg-type]
