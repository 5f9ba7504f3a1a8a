"""MemorySession, and the run-lifecycle helpers against it and against broken sessions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import anyio
import pytest

from helikon.items import Item, user_text
from helikon.sessions import (
    INTERRUPTED_RESULT,
    MemorySession,
    SequenceId,
    Session,
    SessionError,
    SessionErrorKind,
    SessionEvent,
    SessionRecorder,
    UserMessageEvent,
    load_history,
    now_ms,
    persist_run,
    project,
    testkit,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=0)


async def test_memory_session_passes_the_testkit() -> None:
    sessions: dict[str, MemorySession] = {}

    async def open_session(session_id: str) -> Session:
        return sessions.setdefault(session_id, MemorySession())

    await testkit.run_all(open_session)


async def test_memory_session_is_a_session() -> None:
    assert isinstance(MemorySession(), Session)


async def test_memory_session_starts_from_given_events() -> None:
    session = MemorySession([user("a")])
    assert await session.append([user("b")]) == [1]
    assert await session.events(SequenceId(0)) == [user("b")]
    assert await session.snapshot() == project([user("a"), user("b")])


async def test_memory_session_log_is_a_synchronous_copy_of_the_whole_log() -> None:
    session = MemorySession([user("a")])
    log = session.log()
    await session.append([user("b")])
    log.append(user("not in the session"))
    assert log[:1] == [user("a")]  # a copy: neither later appends nor edits to it reach across
    assert session.log() == await session.events() == [user("a"), user("b")]
    assert await anyio.to_thread.run_sync(session.log) == [user("a"), user("b")]  # any thread


async def test_memory_session_is_safe_across_threads() -> None:
    session = MemorySession()

    def write(w: int) -> None:
        for i in range(100):
            anyio.run(session.append, [user(f"{w}:{i}")])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(await session.events()) == 400


class Broken:
    """A session whose every call fails."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.appends = 0

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        self.appends += 1
        raise self.exc

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        raise self.exc

    async def snapshot(self) -> tuple[Item, ...]:
        raise self.exc


async def test_load_history_returns_the_snapshot() -> None:
    session = MemorySession([user("a"), user("b")])
    assert await load_history(session) == (user_text("a"), user_text("b"))


async def test_load_history_fails_hard() -> None:
    error = SessionError.unavailable("down")
    with pytest.raises(SessionError) as caught:
        await load_history(Broken(error))
    assert caught.value is error
    with pytest.raises(SessionError) as wrapped:
        await load_history(Broken(RuntimeError("bug in a custom backend")))
    assert wrapped.value.kind is SessionErrorKind.OTHER
    assert isinstance(wrapped.value.cause, RuntimeError)


async def test_persist_run_appends_the_drained_recording() -> None:
    session = MemorySession()
    recorder = SessionRecorder([user_text("hi")], clock=lambda: 5)
    await persist_run(session, recorder, now=9)
    assert await session.events() == [UserMessageEvent.from_text("hi", at=5)]
    await persist_run(session, recorder)  # nothing left: no append
    assert len(await session.events()) == 1


async def test_persist_run_closes_open_calls() -> None:
    from helikon.events import ToolCallItem
    from helikon.ids import CallId
    from helikon.items import ToolCall

    session = MemorySession()
    recorder = SessionRecorder([user_text("go")], clock=now_ms)
    recorder.observe(ToolCallItem(ToolCall(CallId("c"), "slow", "{}")))
    await persist_run(session, recorder, now=1)
    snapshot = await session.snapshot()
    assert snapshot[-1].content == INTERRUPTED_RESULT  # type: ignore[union-attr]


async def test_persist_run_logs_and_swallows_failures(caplog: pytest.LogCaptureFixture) -> None:
    broken = Broken(SessionError.backend(OSError("disk full")))
    with caplog.at_level(logging.ERROR, logger="helikon.sessions"):
        await persist_run(broken, SessionRecorder([user_text("hi")], clock=now_ms))
    assert broken.appends == 1
    assert "could not persist 1 session events" in caplog.text


async def test_persist_run_still_appends_when_the_run_was_cancelled() -> None:
    session = MemorySession()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await persist_run(session, SessionRecorder([user_text("hi")], clock=now_ms))
    assert len(await session.events()) == 1


def test_now_ms_is_milliseconds_since_the_epoch() -> None:
    import time

    assert abs(now_ms() - time.time() * 1000) < 5_000


def test_session_error_kinds() -> None:
    cause = OSError("boom")
    assert SessionError.backend(cause).kind is SessionErrorKind.BACKEND
    assert SessionError.backend(cause).cause is cause
    assert "OSError: boom" in str(SessionError.backend(cause))
    assert SessionError.unavailable("x").kind is SessionErrorKind.UNAVAILABLE
    assert SessionError.other("x").kind is SessionErrorKind.OTHER
    from helikon.errors import HelikonError

    assert isinstance(SessionError.other("x"), HelikonError)


def test_every_public_name_resolves_and_the_backends_load_lazily() -> None:
    import importlib

    import helikon.sessions as sessions

    for name in sessions.__all__:
        assert getattr(sessions, name) is not None, name
    assert importlib.import_module("helikon.sessions.testkit").CHECKS
    with pytest.raises(AttributeError):
        _ = sessions.NoSuchSession
