"""CompactingSession over real backends, with a scripted model."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from helikon.errors import ConfigError, ModelError
from helikon.items import Item, SystemMessage, system_text, user_text
from helikon.model import ModelSettings
from helikon.sessions import (
    Compacted,
    CompactingSession,
    HeuristicTokenCounter,
    MemorySession,
    SequenceId,
    Session,
    SessionError,
    SessionEvent,
    SqliteSession,
    UserMessageEvent,
    project,
)
from helikon.testing import MockModel, say

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=0)


def tokens(n: int) -> UserMessageEvent:
    """A user message the heuristic counts as ``n`` tokens."""
    return user("abcd" * n)


async def test_compaction_fires_past_the_threshold_and_projects_a_system_summary() -> None:
    model = MockModel([say("They greeted each other.")])
    session = CompactingSession(MemorySession(), model, threshold=20, clock=lambda: 99)
    assert await session.append([tokens(8)]) == [0]
    assert await session.append([tokens(8)]) == [1]
    assert model.calls == 0
    assert await session.append([tokens(8)]) == [2]  # 24 > 20
    assert model.calls == 1
    request = model.requests[0]
    assert request.messages == (*project([tokens(8)] * 3), user_text(session_prompt(session)))
    events = await session.events()
    assert events[-1] == Compacted("They greeted each other.", 3, at=99)
    assert await session.snapshot() == (system_text("They greeted each other."),)
    assert session.estimate == HeuristicTokenCounter().count([system_text("They greeted each other.")])
    # the next small append is cheap: no read, no model call
    await session.append([user("next")])
    assert model.calls == 1
    assert await session.snapshot() == (system_text("They greeted each other."), user_text("next"))


def session_prompt(session: CompactingSession) -> str:
    return session._compactor.prompt


async def test_the_prompt_and_settings_are_passed_to_the_model() -> None:
    model = MockModel([say("s")])
    settings = ModelSettings(temperature=0.0, max_output_tokens=100)
    session = CompactingSession(MemorySession(), model, 5, prompt="Sum up.", settings=settings)
    await session.append([tokens(10)])
    assert model.requests[0].messages[-1] == user_text("Sum up.")
    assert model.requests[0].settings == settings


async def test_resume_compacts_an_existing_backlog_on_the_first_append(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSession.open(path, "long") as durable:
        await durable.append([tokens(10) for _ in range(10)])  # 100 tokens, written without compaction
    model = MockModel([say("a long chat")])
    async with CompactingSession(SqliteSession.open(path, "long"), model, threshold=50) as session:
        await session.append([])  # even an empty first append counts the log
        assert model.calls == 1
        assert await session.snapshot() == (system_text("a long chat"),)
    async with SqliteSession.open(path, "long") as reopened:
        assert await reopened.snapshot() == (system_text("a long chat"),)


async def test_model_failures_are_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    model = MockModel([[ModelError.unavailable("overloaded")]])
    session = CompactingSession(MemorySession(), model, threshold=5)
    with caplog.at_level(logging.WARNING, logger="helikon.sessions"):
        assert await session.append([tokens(10)]) == [0]
    assert "compaction skipped" in caplog.text and "overloaded" in caplog.text
    assert await session.events() == [tokens(10)]  # the user's event is persisted, no marker


async def test_a_model_with_no_script_left_is_a_failure_too(caplog: pytest.LogCaptureFixture) -> None:
    session = CompactingSession(MemorySession(), MockModel([]), threshold=5)
    with caplog.at_level(logging.WARNING, logger="helikon.sessions"):
        await session.append([tokens(10)])
    assert "MockModel has no script left" in caplog.text


async def test_a_blank_summary_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    model = MockModel([say("  \n ")])
    session = CompactingSession(MemorySession(), model, threshold=5)
    with caplog.at_level(logging.WARNING, logger="helikon.sessions"):
        await session.append([tokens(10)])
    assert "blank" in caplog.text
    assert not any(type(e) is Compacted for e in await session.events())


class FailingReads:
    """Appends work; reads fail (a backend that breaks mid-compaction)."""

    def __init__(self) -> None:
        self.inner = MemorySession()

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        return await self.inner.append(events)

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        raise SessionError.unavailable("read replica down")

    async def snapshot(self) -> tuple[Item, ...]:
        raise SessionError.unavailable("read replica down")


async def test_inner_failures_propagate_after_the_users_events_are_persisted() -> None:
    inner = FailingReads()
    session = CompactingSession(inner, MockModel([say("s")]), threshold=5)
    with pytest.raises(SessionError, match="read replica down"):
        await session.append([tokens(1)])  # the first append reads
    assert await inner.inner.events() == [tokens(1)]
    assert session.estimate is None  # the next append re-counts


async def test_a_failed_marker_append_propagates() -> None:
    inner = MemorySession()
    original = inner.append

    async def append(events: Sequence[SessionEvent]) -> list[SequenceId]:
        if any(type(e) is Compacted for e in events):
            raise SessionError.other("disk full")
        return await original(events)

    inner.append = append  # type: ignore[method-assign]
    session = CompactingSession(inner, MockModel([say("s")]), threshold=5)
    with pytest.raises(SessionError, match="disk full"):
        await session.append([tokens(10)])
    assert await inner.events() == [tokens(10)]


async def test_the_convergence_guard_stops_re_compacting_a_lone_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    long_summary = "x" * 200  # 50 tokens: over the threshold on its own
    model = MockModel([say(long_summary, chunked=False), say("shorter", chunked=False)])
    session = CompactingSession(MemorySession(), model, threshold=20)
    await session.append([tokens(30)])
    assert model.calls == 1
    assert await session.snapshot() == (system_text(long_summary),)
    with caplog.at_level(logging.WARNING, logger="helikon.sessions"):
        await session.append([])  # lone summary over threshold: guarded, no model call
    assert model.calls == 1
    assert "lone summary" in caplog.text
    await session.append([user("hi")])  # something to collapse: compacts again
    assert model.calls == 2
    snapshot = await session.snapshot()
    assert snapshot == (system_text("shorter"),)
    assert type(snapshot[0]) is SystemMessage


async def test_a_custom_token_counter_is_authoritative() -> None:
    class ItemCounter:
        def count(self, items: Sequence[Item]) -> int:
            return len(items) * 1000

    model = MockModel([say("s")])
    session = CompactingSession(MemorySession(), model, threshold=2500, token_counter=ItemCounter())
    await session.append([user("a"), user("b")])
    assert model.calls == 0 and session.estimate == 2000
    # the cheap estimate (heuristic) says "fine"; the authoritative count is not asked
    await session.append([user("c")])
    assert model.calls == 0
    session2 = CompactingSession(
        MemorySession(), MockModel([say("s")]), threshold=2500, token_counter=ItemCounter()
    )
    await session2.append([user("a"), user("b"), user("c")])
    assert await session2.snapshot() == (system_text("s"),)


async def test_threshold_zero_is_rejected() -> None:
    with pytest.raises(ConfigError):
        CompactingSession(MemorySession(), MockModel([]), threshold=0)


async def test_it_is_a_session_and_delegates(tmp_path: Path) -> None:
    inner = SqliteSession.open(tmp_path / "s.db", "x")
    session = CompactingSession(inner, MockModel([]), threshold=1000)
    assert isinstance(session, Session)
    await session.append([user("a"), user("b")])
    assert await session.events(SequenceId(0)) == [user("b")]
    assert await session.snapshot() == (user_text("a"), user_text("b"))
    await session.aclose()
    with pytest.raises(SessionError, match="closed"):
        await inner.events()
