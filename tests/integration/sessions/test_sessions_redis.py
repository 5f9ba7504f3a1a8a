"""RedisSession specifics against the real server: key layout, the Lua
script's guarantees, failures."""

from __future__ import annotations

import os
from typing import Any

import pytest

from helikon.sessions import SequenceId, SessionError, SessionErrorKind, UserMessageEvent

redis_py = pytest.importorskip("redis")

from helikon.sessions import RedisSession  # noqa: E402
from helikon.sessions._redis import PAGE  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

REDIS_URL = os.environ.get("HELIKON_TEST_REDIS", "redis://127.0.0.1:6379/0")


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=7)


async def test_the_stream_and_counter_keys_and_entry_fields(redis: Any, id_prefix: str) -> None:
    session = RedisSession(redis, f"{id_prefix}-layout")
    stream, counter = session.keys
    assert stream == f"helikon:session:{id_prefix}-layout:events"
    assert counter == f"helikon:session:{id_prefix}-layout:seq"
    assert await session.append([user("a"), user("b")]) == [0, 1]
    entries = redis.xrange(stream)
    assert [e[0] for e in entries] == [b"0-1", b"0-2"]
    assert entries[1][1][b"seq"] == b"1"
    assert entries[1][1][b"kind"] == b"user_message"
    assert entries[1][1][b"at"] == b"7"
    assert redis.get(counter) == b"2"


async def test_works_with_a_decoding_client(redis: Any, id_prefix: str) -> None:
    client = redis_py.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        session = RedisSession(client, f"{id_prefix}-decoding")
        await session.append([user("ü")])
        assert await session.events() == [user("ü")]
    finally:
        client.close()


async def test_reads_page_through_long_streams(redis: Any, id_prefix: str) -> None:
    session = RedisSession(redis, f"{id_prefix}-long")
    log = [user(str(i)) for i in range(2 * PAGE + 5)]
    await session.append(log)
    assert await session.events() == log
    assert await session.events(SequenceId(PAGE)) == log[PAGE + 1 :]


async def test_a_lost_counter_fails_loudly_instead_of_reusing_ids(redis: Any, id_prefix: str) -> None:
    session = RedisSession(redis, f"{id_prefix}-evicted")
    await session.append([user("a")])
    redis.delete(session.keys[1])  # as an evicting maxmemory-policy might
    with pytest.raises(SessionError, match="counter") as caught:
        await session.append([user("b")])
    assert caught.value.kind is SessionErrorKind.BACKEND
    assert await session.events() == [user("a")]


async def test_a_lost_stream_fails_loudly(redis: Any, id_prefix: str) -> None:
    session = RedisSession(redis, f"{id_prefix}-lost")
    await session.append([user("a")])
    redis.delete(session.keys[0])
    with pytest.raises(SessionError, match="missing"):
        await session.append([user("b")])


async def test_ids_stay_unique_after_a_trim(redis: Any, id_prefix: str) -> None:
    session = RedisSession(redis, f"{id_prefix}-trim")
    await session.append([user("a"), user("b")])
    redis.xtrim(session.keys[0], maxlen=0)
    assert await session.append([user("c")]) == [2]
    assert await session.events() == [user("c")]


async def test_connect_owns_its_client_and_checks_the_server(id_prefix: str, redis: Any) -> None:
    session = await RedisSession.connect(REDIS_URL, f"{id_prefix}-connect")
    await session.append([user("a")])
    await session.aclose()
    with pytest.raises(SessionError) as caught:
        await RedisSession.connect("redis://127.0.0.1:1/0", "x")
    assert caught.value.kind is SessionErrorKind.UNAVAILABLE
