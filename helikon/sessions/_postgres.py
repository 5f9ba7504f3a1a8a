"""``PostgresSession``: session logs in PostgreSQL (psycopg 3, the ``postgres`` extra).

Many sessions share one table and one connection pool, isolated by
``session_id``. Rules:

- The schema is one table, ``session_events(session_id, sequence, kind,
  payload JSONB, at)`` with primary key ``(session_id, sequence)``.
  Migrations are numbered, recorded in ``helikon_session_migrations``, and
  run in one transaction under a fixed advisory lock, so concurrent
  migrators (every replica at startup) serialise and a re-run is a no-op.
- An append is one transaction: it takes
  ``pg_advisory_xact_lock(hashtextextended(session_id, 0))`` (a 64-bit key:
  writers to different sessions practically never wait on each other),
  then inserts the batch from ``COALESCE(MAX(sequence), -1) + 1`` on in one
  statement. Writers to one session are serialised, sequences are
  contiguous, and the lock is released at commit or rollback.
- JSONB cannot hold the NUL character (``\\u0000``): an event whose text
  contains one fails with ``SessionError`` (kind backend), writing nothing.
- psycopg's blocking API runs in worker threads (``anyio.to_thread``), so the
  backend works under trio and asyncio alike; the pool is psycopg_pool's
  thread-safe ``ConnectionPool``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, final

import anyio.to_thread
import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from helikon.sessions._events import SequenceId, SessionEvent, encode_event, event_tag
from helikon.sessions._migrations import Migration, run_migrations
from helikon.sessions._protocol import SessionError, decode_stored
from helikon.sessions._threaded import ThreadedSession

T = TypeVar("T")

#: (version, description, statements), applied in order, each once.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        1,
        "create session_events",
        (
            """CREATE TABLE IF NOT EXISTS session_events (
                session_id TEXT NOT NULL,
                sequence BIGINT NOT NULL,
                kind TEXT NOT NULL,
                payload JSONB NOT NULL,
                at BIGINT NOT NULL,
                PRIMARY KEY (session_id, sequence)
            )""",
        ),
    ),
)

_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('helikon.sessions.migrations', 0))"
_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS helikon_session_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# Its own statement, after the lock's: under READ COMMITTED a statement's
# snapshot is taken when it starts, so MAX sees every commit made before the
# lock was granted.
_INSERT = """INSERT INTO session_events (session_id, sequence, kind, payload, at)
SELECT %(sid)s, n.first + t.ord - 1, t.kind, t.payload::jsonb, t.at
FROM (SELECT COALESCE(MAX(sequence), -1) + 1 AS first FROM session_events WHERE session_id = %(sid)s) AS n,
     unnest(%(kinds)s::text[], %(payloads)s::text[], %(ats)s::bigint[])
         WITH ORDINALITY AS t(kind, payload, at, ord)
RETURNING sequence"""
_SELECT = """SELECT sequence, payload::text FROM session_events
WHERE session_id = %s AND sequence > %s ORDER BY sequence"""

#: The pool type: psycopg_pool's (sync, thread-safe) pool of any connection class.
Pool = ConnectionPool[Any]


def _guard(work: Callable[[], T]) -> T:
    """Run ``work``, turning driver and pool failures into ``SessionError``."""
    try:
        return work()
    except (PoolTimeout, PoolClosed) as exc:
        raise SessionError.unavailable(f"{type(exc).__name__}: {exc}", exc) from exc
    except psycopg.Error as exc:
        raise SessionError.backend(exc) from exc


def _apply_migrations(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute(_MIGRATION_LOCK)
        run_migrations(conn.execute, MIGRATIONS, table=_MIGRATIONS_TABLE, placeholder="%s")


def _migrate_sync(target: Pool | str) -> None:
    def work() -> None:
        if isinstance(target, str):
            with psycopg.connect(target, autocommit=True) as conn:
                _apply_migrations(conn)
        else:
            with target.connection() as conn:
                _apply_migrations(conn)

    try:
        _guard(work)
    except SessionError as exc:
        if isinstance(exc.cause, psycopg.OperationalError) and isinstance(target, str):
            raise SessionError.unavailable(str(exc.cause), exc.cause) from exc.cause
        raise


def _open_pool(conninfo: str, min_size: int, max_size: int, timeout: float) -> Pool:
    pool: Pool = ConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        open=False,
        kwargs={"autocommit": True},
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except PoolTimeout as exc:
        pool.close()
        raise SessionError.unavailable(f"cannot connect to PostgreSQL: {exc}", exc) from exc
    return pool


@final
class PostgresSession(ThreadedSession):
    """A durable :class:`~helikon.sessions.Session` in PostgreSQL.

    Build one with :meth:`open` (migrates, then opens), or run :meth:`migrate`
    once at startup and :meth:`open_without_migrate` per session on the hot
    path. Bring your own :class:`psycopg_pool.ConnectionPool` to share it
    between sessions (TLS, timeouts and sizing are its settings), or pass a
    conninfo string and the session owns a pool of its own, closed by
    :meth:`aclose`.
    """

    def __init__(self, pool: Pool, session_id: str, *, owns_pool: bool = False) -> None:
        self._pool = pool
        self._session_id = session_id
        self._owns_pool = owns_pool

    @staticmethod
    async def create_pool(
        conninfo: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 30.0
    ) -> Pool:
        """An open ``ConnectionPool`` (autocommit connections) for many sessions to share.

        Raises:
            SessionError: no connection could be made within ``timeout`` (unavailable).
        """
        return await anyio.to_thread.run_sync(_open_pool, conninfo, min_size, max_size, timeout)

    @classmethod
    async def migrate(cls, pool: Pool | str) -> None:
        """Apply pending migrations (idempotent; serialised by an advisory lock).

        Raises:
            SessionError: the database cannot be reached or migrated.
        """
        await anyio.to_thread.run_sync(_migrate_sync, pool)

    @classmethod
    async def open(cls, pool: Pool | str, session_id: str) -> PostgresSession:
        """Migrate, then open ``session_id``; a conninfo string gets a pool of its own.

        Raises:
            SessionError: the database cannot be reached or migrated.
        """
        if isinstance(pool, str):
            owned = await cls.create_pool(pool)
            try:
                await cls.migrate(owned)
            except BaseException:
                await anyio.to_thread.run_sync(owned.close)
                raise
            return cls(owned, session_id, owns_pool=True)
        await cls.migrate(pool)
        return cls(pool, session_id)

    @classmethod
    def open_without_migrate(cls, pool: Pool, session_id: str) -> PostgresSession:
        """Open ``session_id`` over an already migrated database (no round trip)."""
        return cls(pool, session_id)

    @property
    def session_id(self) -> str:
        """The id of the log this instance reads and writes."""
        return self._session_id

    @property
    def pool(self) -> Pool:
        return self._pool

    def __repr__(self) -> str:
        return f"PostgresSession({self._session_id!r})"

    def _append(self, events: list[SessionEvent]) -> int:
        kinds = [event_tag(e) for e in events]
        payloads = [encode_event(e).decode() for e in events]
        ats = [e.at for e in events]
        sid = self._session_id

        params = {"sid": sid, "kinds": kinds, "payloads": payloads, "ats": ats}

        def work() -> int:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(_LOCK, (sid,))
                return min(int(row[0]) for row in conn.execute(_INSERT, params).fetchall())

        return _guard(work)

    def _read(self, since: SequenceId | None) -> list[SessionEvent]:
        def work() -> list[tuple[int, str]]:
            with self._pool.connection() as conn:
                rows = conn.execute(_SELECT, (self._session_id, -1 if since is None else since)).fetchall()
            return [(int(r[0]), str(r[1])) for r in rows]

        return [decode_stored(self._session_id, seq, payload) for seq, payload in _guard(work)]

    def _close(self) -> None:
        """Close the pool if this session owns it (a shared pool stays open)."""
        if self._owns_pool:
            self._pool.close()


__all__ = ["MIGRATIONS", "Pool", "PostgresSession"]
