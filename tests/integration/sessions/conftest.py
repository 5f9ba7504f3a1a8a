"""Session backends for the integration tests: real SQLite files, the project's
PostgreSQL (127.0.0.1:5432, database ``test``) and Redis (127.0.0.1:6379).

Override the servers with ``HELIKON_TEST_POSTGRES`` / ``HELIKON_TEST_REDIS``.
A test that needs an unreachable server is skipped, saying which; in CI both
run. Every test writes under session ids (and so Redis keys) of its own
random prefix and deletes them when it ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from helikon.sessions import MemorySession, Session

POSTGRES_URL = os.environ.get("HELIKON_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HELIKON_TEST_REDIS", "redis://127.0.0.1:6379/0")
BACKENDS = ["memory", "sqlite", "postgres", "redis"]

Factory = Callable[[str], Awaitable[Session]]


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def id_prefix() -> str:
    """This test's own session-id prefix."""
    return f"helikon-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def postgres_pool() -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    from psycopg_pool import ConnectionPool

    from helikon.sessions import PostgresSession

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL is unreachable at {POSTGRES_URL}: {exc}")
    pool: Any = ConnectionPool(POSTGRES_URL, min_size=1, max_size=12, open=True, kwargs={"autocommit": True})
    pool.wait(timeout=10)
    anyio.run(PostgresSession.migrate, pool)
    yield pool
    pool.close()


@pytest.fixture
def postgres(postgres_pool: Any, id_prefix: str) -> Iterator[Any]:
    """The shared pool; this test's rows are deleted afterwards."""
    yield postgres_pool
    with postgres_pool.connection() as conn:
        conn.execute("DELETE FROM session_events WHERE session_id LIKE %s", (id_prefix + "%",))


@pytest.fixture(scope="session")
def redis_client() -> Iterator[Any]:
    redis = pytest.importorskip("redis", reason="the 'redis' extra is not installed")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.skip(f"Redis is unreachable at {REDIS_URL}: {exc}")
    yield client
    client.close()


@pytest.fixture
def redis(redis_client: Any, id_prefix: str) -> Iterator[Any]:
    """The shared client; this test's keys are deleted afterwards."""
    yield redis_client
    keys = list(redis_client.scan_iter(match=f"helikon:session:{id_prefix}*", count=1000))
    if keys:
        redis_client.delete(*keys)


def make_factory(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """Open-session functions per backend, as the testkit wants them."""
    if name == "memory":
        sessions: dict[str, MemorySession] = {}

        async def open_memory(session_id: str) -> Session:
            return sessions.setdefault(session_id, MemorySession())

        return open_memory
    if name == "sqlite":
        from helikon.sessions import SqliteSession

        path = tmp_path / "sessions.db"

        async def open_sqlite(session_id: str) -> Session:
            return await anyio.to_thread.run_sync(SqliteSession.open, path, session_id)

        return open_sqlite
    if name == "postgres":
        from helikon.sessions import PostgresSession

        pool = request.getfixturevalue("postgres")

        async def open_postgres(session_id: str) -> Session:
            return PostgresSession.open_without_migrate(pool, session_id)

        return open_postgres
    if name == "redis":
        from helikon.sessions import RedisSession

        client = request.getfixturevalue("redis")

        async def open_redis(session_id: str) -> Session:
            return RedisSession(client, session_id)

        return open_redis
    raise ValueError(name)


@pytest.fixture(params=BACKENDS)
def open_session(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    return make_factory(str(request.param), request, tmp_path)
