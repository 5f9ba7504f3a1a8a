"""SqliteSession specifics: WAL, migrations, the busy timeout, closing."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from helikon.sessions import SessionError, SessionErrorKind, SqliteSession, UserMessageEvent
from helikon.sessions._sqlite import MIGRATIONS

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=0)


def migrations_applied(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [v for (v,) in conn.execute("SELECT version FROM helikon_session_migrations ORDER BY version")]


async def test_open_migrates_and_uses_wal_with_normal_sync(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSession.open(path, "chat-1") as session:
        assert session.session_id == "chat-1"
        assert await session.append([user("hi")]) == [0]
        conn = session._connection()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert migrations_applied(path) == [v for v, _, _ in MIGRATIONS]


async def test_migrations_are_idempotent_and_safe_to_run_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            SqliteSession.migrate(path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    SqliteSession.migrate(path)
    SqliteSession.open(path, "x").close()
    assert migrations_applied(path) == [v for v, _, _ in MIGRATIONS]


async def test_open_without_migrate_works_on_a_migrated_database(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteSession.migrate(path)
    async with SqliteSession.open_without_migrate(path, "hot") as session:
        await session.append([user("a")])
        assert await session.events() == [user("a")]


async def test_open_without_migrate_on_a_bare_database_fails_cleanly(tmp_path: Path) -> None:
    async with SqliteSession.open_without_migrate(tmp_path / "bare.db", "x") as session:
        with pytest.raises(SessionError, match="no such table") as caught:
            await session.append([user("a")])
        assert caught.value.kind is SessionErrorKind.BACKEND


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteSession.migrate(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO helikon_session_migrations (version, description) VALUES (999, 'future')")
    with pytest.raises(SessionError, match="newer than this helikon"):
        SqliteSession.open(path, "x")


async def test_an_unopenable_path_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SessionError) as caught:
        SqliteSession.open(tmp_path / "missing-dir" / "s.db", "x")
    assert caught.value.kind is SessionErrorKind.UNAVAILABLE


async def test_busy_timeout_fails_cleanly_persisting_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session = SqliteSession.open(path, "busy", busy_timeout=0.2)
    await session.append([user("before")])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # hold the write lock
    try:
        with anyio.fail_after(10):
            with pytest.raises(SessionError, match="database is locked") as caught:
                await session.append([user("blocked 1"), user("blocked 2")])
        assert caught.value.kind is SessionErrorKind.BACKEND
        assert isinstance(caught.value.cause, sqlite3.OperationalError)
        # readers are not blocked under WAL, and nothing was written
        assert await session.events() == [user("before")]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # the session stays usable, and the failed append left no gap
    assert await session.append([user("after")]) == [1]
    assert await session.events() == [user("before"), user("after")]
    await session.aclose()


async def test_a_writer_waits_within_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session = SqliteSession.open(path, "wait", busy_timeout=10)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: blocker.execute("COMMIT"))
    release.start()
    try:
        assert await session.append([user("eventually")]) == [0]
    finally:
        release.join()
        blocker.close()
        await session.aclose()


async def test_a_closed_session_refuses_work(tmp_path: Path) -> None:
    session = SqliteSession.open(tmp_path / "s.db", "x")
    await session.aclose()
    await session.aclose()  # idempotent
    with pytest.raises(SessionError, match="closed"):
        await session.events()
    with pytest.raises(SessionError, match="closed"):
        await session.append([user("a")])


async def test_a_corrupt_row_is_reported_not_crashed_on(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSession.open(path, "x") as session:
        await session.append([user("ok")])
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE session_events SET payload = '{\"type\": \"alien\"}' WHERE session_id = 'x'")
        with pytest.raises(SessionError, match="event 0 is corrupt") as caught:
            await session.events()
        assert caught.value.kind is SessionErrorKind.OTHER


async def test_the_synchronous_level_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteSession.open(tmp_path / "s.db", "x", synchronous="SOMETIMES")  # type: ignore[arg-type]
    async with SqliteSession.open(tmp_path / "s.db", "x", synchronous="FULL") as session:
        assert session._connection().execute("PRAGMA synchronous").fetchone()[0] == 2


async def test_many_openers_of_a_new_database_all_succeed(tmp_path: Path) -> None:
    # Switching a new database to WAL needs an exclusive lock and SQLite
    # answers "locked" at once (no busy handler) to the losers of the race.
    for round_ in range(20):
        path = tmp_path / f"new-{round_}.db"
        errors: list[BaseException] = []

        def open_close(path: Path = path, errors: list[BaseException] = errors) -> None:
            try:
                SqliteSession.open(path, "x").close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_close) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []


async def test_an_in_memory_database_works(tmp_path: Path) -> None:
    async with SqliteSession.open(":memory:", "x") as session:
        assert await session.append([user("a")]) == [0]
        assert await session.events() == [user("a")]
