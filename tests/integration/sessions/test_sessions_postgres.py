"""PostgresSession specifics against the real server: migrations, the advisory
lock, JSONB, pools, failures."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from helikon.sessions import SessionError, SessionErrorKind, UserMessageEvent

psycopg = pytest.importorskip("psycopg")

from helikon.sessions import PostgresSession  # noqa: E402
from helikon.sessions._postgres import MIGRATIONS  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

POSTGRES_URL = os.environ.get("HELIKON_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=0)


async def test_migrations_are_idempotent_and_serialised(postgres: Any) -> None:
    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(PostgresSession.migrate, postgres)
    await PostgresSession.migrate(POSTGRES_URL)  # by conninfo too
    with postgres.connection() as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM helikon_session_migrations ORDER BY 1")]
    assert versions == [v for v, _, _ in MIGRATIONS]


async def test_payloads_are_jsonb_and_sequences_contiguous(postgres: Any, id_prefix: str) -> None:
    session = PostgresSession.open_without_migrate(postgres, f"{id_prefix}-jsonb")
    assert await session.append([user("a"), user("b")]) == [0, 1]
    assert await session.append([user("c")]) == [2]
    with postgres.connection() as conn:
        rows = conn.execute(
            "SELECT sequence, kind, payload->>'type', jsonb_typeof(payload), at FROM session_events "
            "WHERE session_id = %s ORDER BY sequence",
            (session.session_id,),
        ).fetchall()
    assert rows == [(i, "user_message", "user_message", "object", 0) for i in range(3)]


async def test_open_with_a_conninfo_owns_its_pool(id_prefix: str, postgres: Any) -> None:
    session = await PostgresSession.open(POSTGRES_URL, f"{id_prefix}-owned")
    await session.append([user("a")])
    assert await session.events() == [user("a")]
    await session.aclose()
    assert session.pool.closed
    with pytest.raises(SessionError) as caught:
        await session.events()
    assert caught.value.kind is SessionErrorKind.UNAVAILABLE


async def test_open_with_a_shared_pool_leaves_it_open(postgres: Any, id_prefix: str) -> None:
    async with await PostgresSession.open(postgres, f"{id_prefix}-shared") as session:
        await session.append([user("a")])
    assert not postgres.closed


async def test_nul_is_refused_by_jsonb_and_nothing_is_written(postgres: Any, id_prefix: str) -> None:
    session = PostgresSession.open_without_migrate(postgres, f"{id_prefix}-nul")
    with pytest.raises(SessionError) as caught:
        await session.append([user("fine"), user("nul \x00 here")])
    assert caught.value.kind is SessionErrorKind.BACKEND
    assert await session.events() == []
    assert await session.append([user("after")]) == [0]


async def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(SessionError) as caught:
        await PostgresSession.create_pool("postgresql://postgres@127.0.0.1:1/test", timeout=1)
    assert caught.value.kind is SessionErrorKind.UNAVAILABLE
    with pytest.raises(SessionError) as caught:
        await PostgresSession.migrate("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")
    assert caught.value.kind is SessionErrorKind.UNAVAILABLE


async def test_writers_to_one_session_serialise_on_the_advisory_lock(postgres: Any, id_prefix: str) -> None:
    session_id = f"{id_prefix}-locked"
    session = PostgresSession.open_without_migrate(postgres, session_id)
    holder = psycopg.connect(POSTGRES_URL, autocommit=True)
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (session_id,))
        done = anyio.Event()

        async def write() -> None:
            await session.append([user("waited")])
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await anyio.sleep(0.3)
            assert not done.is_set()  # blocked by the lock
            other = PostgresSession.open_without_migrate(postgres, f"{id_prefix}-other")
            assert await other.append([user("free")]) == [0]  # other sessions are not
            holder.execute("COMMIT")
        assert done.is_set()
    finally:
        holder.close()
    assert await session.events() == [user("waited")]


async def test_a_schema_from_a_newer_helikon_is_refused(postgres: Any) -> None:
    from helikon.sessions._migrations import run_migrations
    from helikon.sessions._postgres import _MIGRATIONS_TABLE

    # One transaction, rolled back: the shared test database keeps its schema.
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute("INSERT INTO helikon_session_migrations (version, description) VALUES (99, 'future')")
        with pytest.raises(SessionError, match="schema version 99, newer than this helikon knows"):
            run_migrations(conn.execute, MIGRATIONS, table=_MIGRATIONS_TABLE, placeholder="%s")
        conn.rollback()
    with postgres.connection() as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM helikon_session_migrations ORDER BY 1")]
    assert versions == [v for v, _, _ in MIGRATIONS]
