"""The migration runner the SQLite and PostgreSQL sessions share, on real SQLite files.

(Each backend's own refusal of a newer schema is in ``tests/integration/sessions``.)
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helikon.sessions import SessionError
from helikon.sessions._migrations import Migration, run_migrations

TABLE = (
    "CREATE TABLE IF NOT EXISTS helikon_session_migrations (version INTEGER PRIMARY KEY, description TEXT)"
)
STEPS: tuple[Migration, ...] = (
    (1, "create notes", ("CREATE TABLE notes (body TEXT)",)),
    (2, "a percent sign in a statement", ("INSERT INTO notes (body) VALUES ('100% done')",)),
)


def versions(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    return list(conn.execute("SELECT version, description FROM helikon_session_migrations ORDER BY version"))


def test_pending_migrations_run_in_order_once(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite")

    assert run_migrations(conn.execute, STEPS[:1], table=TABLE, placeholder="?") == (1,)
    assert run_migrations(conn.execute, STEPS, table=TABLE, placeholder="?") == (2,)
    assert run_migrations(conn.execute, STEPS, table=TABLE, placeholder="?") == ()

    assert versions(conn) == [(1, "create notes"), (2, "a percent sign in a statement")]
    assert list(conn.execute("SELECT body FROM notes")) == [("100% done",)]


def test_a_database_migrated_by_a_newer_helikon_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    run_migrations(conn.execute, STEPS, table=TABLE, placeholder="?")
    conn.execute("INSERT INTO helikon_session_migrations VALUES (7, 'from the future')")

    with pytest.raises(SessionError, match="schema version 7, newer than this helikon knows \\(2\\)"):
        run_migrations(conn.execute, STEPS, table=TABLE, placeholder="?")


def test_a_failing_migration_is_not_recorded(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    run_migrations(conn.execute, STEPS, table=TABLE, placeholder="?")
    broken: tuple[Migration, ...] = (
        *STEPS,
        (3, "add tags", ("CREATE TABLE tags (name TEXT)",)),
        (4, "broken", ("CREATE TABLE notes (x)",)),  # notes exists
    )

    conn.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        run_migrations(conn.execute, broken, table=TABLE, placeholder="?")
    conn.execute("ROLLBACK")

    assert [v for v, _ in versions(conn)] == [1, 2]  # the caller's transaction held 3 and 4
    assert not list(conn.execute("SELECT name FROM sqlite_master WHERE name = 'tags'"))
