"""The sessions view over the real servers: sessions written by
:class:`PostgresSession` (127.0.0.1:5432, database ``test``) and
:class:`RedisSession` (127.0.0.1:6379, under a key prefix of this test's own)
are listed and open to their conversation through the studio's API."""

from __future__ import annotations

import os
import time
import uuid

import pytest
import trio
from starlette.testclient import TestClient

from helikon.sessions import AssistantMessageEvent, UserMessageEvent
from helikon.studio import PostgresBrowser, RedisBrowser, Studio, browser_for

pytestmark = pytest.mark.integration

POSTGRES_URL = os.environ.get("HELIKON_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HELIKON_TEST_REDIS", "redis://127.0.0.1:6379/0")
BASE = "http://127.0.0.1:8765"


def conversation(n: int) -> list[object]:
    now = int(time.time() * 1000)
    return [
        UserMessageEvent.from_text(f"question {n}", at=now),
        AssistantMessageEvent.from_text(f"answer {n}", "desk", at=now + 1),
    ]


def browse(studio: Studio, ids: list[str]) -> tuple[dict[str, object], dict[str, object], int]:
    with TestClient(studio.app(), base_url=BASE) as client:
        listed = client.get("/api/sessions").json()
        page = client.get(f"/api/sessions/{ids[1]}").json()
        missing = client.get(f"/api/sessions/{ids[1]}-none").status_code
    return listed, page, missing


def test_postgres_sessions_are_listed_and_open() -> None:
    pytest.importorskip("psycopg")
    from helikon.sessions import PostgresSession

    prefix = f"studioviews-{uuid.uuid4().hex[:10]}"
    ids = [f"{prefix}-a", f"{prefix}-b"]

    async def fill() -> None:
        for n, sid in enumerate(ids):
            session = await PostgresSession.open(POSTGRES_URL, sid)
            await session.append(conversation(n))
            await session.aclose()

    trio.run(fill)
    try:
        assert isinstance(browser_for(POSTGRES_URL), PostgresBrowser)
        listed, page, missing = browse(Studio(sessions=POSTGRES_URL), ids)
    finally:
        import psycopg

        with psycopg.connect(POSTGRES_URL) as conn:
            conn.execute("DELETE FROM session_events WHERE session_id LIKE %s", (prefix + "%",))
    assert listed["backend"] == "postgres"
    mine = {s["id"]: s["events"] for s in listed["sessions"] if s["id"].startswith(prefix)}  # type: ignore[attr-defined]
    assert mine == {ids[0]: 2, ids[1]: 2}
    assert [part["text"] for item in page["items"] for part in item["content"]] == ["question 1", "answer 1"]  # type: ignore[attr-defined]
    assert missing == 404


def test_redis_sessions_are_listed_and_open() -> None:
    redis = pytest.importorskip("redis")
    from helikon.sessions import RedisSession

    key_prefix = f"studioviews:{uuid.uuid4().hex[:10]}:"
    ids = ["alice", "bob:with:colons"]

    async def fill() -> None:
        for n, sid in enumerate(ids):
            session = await RedisSession.connect(REDIS_URL, sid, key_prefix=key_prefix)
            await session.append(conversation(n))
            await session.aclose()

    trio.run(fill)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        listed, page, missing = browse(Studio(sessions=RedisBrowser(REDIS_URL, key_prefix=key_prefix)), ids)
    finally:
        keys = list(client.scan_iter(match=key_prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()
    assert listed["backend"] == "redis"
    assert sorted((s["id"], s["events"]) for s in listed["sessions"]) == [
        ("alice", 2),
        ("bob:with:colons", 2),
    ]  # type: ignore[attr-defined]
    assert [part["text"] for item in page["items"] for part in item["content"]] == ["question 1", "answer 1"]  # type: ignore[attr-defined]
    assert missing == 404
