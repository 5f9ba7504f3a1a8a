"""``SqliteSession``: session logs in one SQLite database (stdlib ``sqlite3``).

Many sessions share one database file, isolated by ``session_id``. Rules:

- The schema is one table, ``session_events``, keyed by
  ``(session_id, sequence)`` (``WITHOUT ROWID``, so a session's log is one
  contiguous range of the primary key). Migrations are numbered, recorded in
  ``helikon_session_migrations`` and applied in one ``BEGIN IMMEDIATE``
  transaction, so concurrent openers are serialised and re-running them is
  a no-op.
- An append is one ``BEGIN IMMEDIATE`` transaction: it takes the database's
  write lock first, then reads the session's last sequence and inserts the
  batch after it. Writers are therefore serialised and sequences are
  contiguous; the primary key is the backstop against a duplicate.
- A writer waits for the lock at most ``busy_timeout`` seconds, then fails
  with ``SessionError`` (kind backend, "database is locked") having written
  nothing; the session stays usable.
- The connection uses WAL with ``synchronous=NORMAL`` by default: readers
  never block the writer, and a power loss may drop the newest commits but
  never corrupts the file. A killed process loses nothing committed.
- The driver is blocking: every call runs in a worker thread
  (``anyio.to_thread``), under trio or asyncio. One instance owns one
  connection, guarded by a lock; give concurrent writers their own
  instances for parallelism (they still serialise on the write lock).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Final, Literal, TypeVar, final

from helikon.sessions._events import SequenceId, SessionEvent, encode_event, event_tag
from helikon.sessions._migrations import Migration, run_migrations
from helikon.sessions._protocol import SessionError, decode_stored
from helikon.sessions._threaded import ThreadedSession

T = TypeVar("T")

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

#: (version, description, statements), applied in order, each once.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        1,
        "create session_events",
        (
            """CREATE TABLE IF NOT EXISTS session_events (
                session_id TEXT NOT NULL,
                sequence INTEGER NOT NULL,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL,
                at INTEGER NOT NULL,
                PRIMARY KEY (session_id, sequence)
            ) WITHOUT ROWID""",
        ),
    ),
)

_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS helikon_session_migrations (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)"""
_LAST = "SELECT COALESCE(MAX(sequence), -1) FROM session_events WHERE session_id = ?"
_INSERT = "INSERT INTO session_events (session_id, sequence, kind, payload, at) VALUES (?, ?, ?, ?, ?)"
_SELECT = (
    "SELECT sequence, payload FROM session_events WHERE session_id = ? AND sequence > ? ORDER BY sequence"
)


def _error(exc: sqlite3.Error) -> SessionError:
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
        return SessionError.unavailable(str(exc), exc)
    return SessionError.backend(exc)


def _connect(
    path: str | os.PathLike[str], busy_timeout: float, synchronous: Synchronous
) -> sqlite3.Connection:
    if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
    try:
        # isolation_level=None: no implicit transactions; we BEGIN ourselves.
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _error(exc) from exc
    try:
        _use_wal(conn, busy_timeout)
        conn.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.Error as exc:
        conn.close()
        raise _error(exc) from exc
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the database to WAL, retrying while other openers hold it.

    Switching the journal mode needs an exclusive lock and SQLite reports
    "database is locked" at once, without calling the busy handler, when
    several connections open a new database together; so retry until the
    busy timeout is spent, like any other wait for the lock.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode not in ("wal", "memory"):  # an in-memory database has no journal file
                mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            if mode in ("wal", "memory"):
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        if time.monotonic() + delay > deadline:
            raise sqlite3.OperationalError("database is locked (could not switch it to WAL)")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _in_write_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` inside ``BEGIN IMMEDIATE`` ... ``COMMIT``; roll back on any failure."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise _error(exc) from exc
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise _error(exc) from exc
        raise
    return result


def _apply_migrations(conn: sqlite3.Connection) -> None:
    _in_write_transaction(
        conn, lambda conn: run_migrations(conn.execute, MIGRATIONS, table=_MIGRATIONS_TABLE, placeholder="?")
    )


@final
class SqliteSession(ThreadedSession):
    """A durable :class:`~helikon.sessions.Session` in a SQLite database.

    Build one with :meth:`open` (which migrates), or :meth:`migrate` once at
    startup and then :meth:`open_without_migrate` per session. Close it with
    :meth:`aclose` (or use it as an async context manager).

    Args of the constructors:
        path: the database file (created when missing).
        session_id: the log this instance reads and writes.
        busy_timeout: seconds an append waits for the write lock before
            failing. Size it for the backlog, not one transaction: the
            worst-placed of ``W`` writers each appending ``A`` times waits
            about ``W * A * (one transaction's latency)``.
        synchronous: the ``PRAGMA synchronous`` level (``NORMAL`` pairs with
            WAL; ``FULL`` also survives a power loss, slower).
    """

    def __init__(self, conn: sqlite3.Connection, session_id: str) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._session_id = session_id
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        session_id: str,
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "NORMAL",
    ) -> SqliteSession:
        """Open the database, apply pending migrations, and open ``session_id``.

        Synchronous (a local file; call it at setup, or through
        ``anyio.to_thread.run_sync`` on a hot path).

        Raises:
            SessionError: the database cannot be opened or migrated.
        """
        conn = _connect(path, busy_timeout, synchronous)
        try:
            _apply_migrations(conn)
        except BaseException:
            conn.close()
            raise
        return cls(conn, session_id)

    @classmethod
    def migrate(cls, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        """Apply pending migrations to the database at ``path`` (idempotent).

        Raises:
            SessionError: the database cannot be opened or migrated.
        """
        conn = _connect(path, busy_timeout, "NORMAL")
        try:
            _apply_migrations(conn)
        finally:
            conn.close()

    @classmethod
    def open_without_migrate(
        cls,
        path: str | os.PathLike[str],
        session_id: str,
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "NORMAL",
    ) -> SqliteSession:
        """Open ``session_id`` in an already migrated database (no schema round trip).

        Raises:
            SessionError: the database cannot be opened.
        """
        return cls(_connect(path, busy_timeout, synchronous), session_id)

    @property
    def session_id(self) -> str:
        """The id of the log this instance reads and writes."""
        return self._session_id

    def __repr__(self) -> str:
        return f"SqliteSession({self._session_id!r})"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SessionError.other(f"session {self._session_id!r} is closed")
        return self._conn

    def _append(self, events: list[SessionEvent]) -> int:
        rows = [(event_tag(e), encode_event(e).decode(), e.at) for e in events]
        sid = self._session_id

        def work(conn: sqlite3.Connection) -> int:
            (last,) = conn.execute(_LAST, (sid,)).fetchone()
            first: int = last + 1
            conn.executemany(_INSERT, [(sid, first + i, *row) for i, row in enumerate(rows)])
            return first

        with self._lock:
            return _in_write_transaction(self._connection(), work)

    def _read(self, since: SequenceId | None) -> list[SessionEvent]:
        with self._lock:
            try:
                rows = self._connection().execute(_SELECT, (self._session_id, -1 if since is None else since))
                fetched: list[tuple[int, str]] = rows.fetchall()
            except sqlite3.Error as exc:
                raise _error(exc) from exc
        return [decode_stored(self._session_id, sequence, payload) for sequence, payload in fetched]

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``SessionError``."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    _close = close


__all__ = ["MIGRATIONS", "SqliteSession"]
