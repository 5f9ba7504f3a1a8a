"""Session append throughput per backend: appends per second.

For each store (memory, sqlite, postgres, redis) and event loop (trio,
asyncio), one task appends ``N`` times to a fresh session, first one event
per append, then batches of 50 events per append; then ``W`` = 8 tasks, each
with its own session object, append one event at a time to one shared
session (the contended case). Each result is checked: the log holds exactly
the events appended, with contiguous ids.

It prints one JSON line per metric, in the format of the other bench scripts
(``{"sdk", "workload", "metric", "value", "unit", ...}``) plus ``backend``,
``store``, ``batch`` and ``writers``. Unlike ``helikon_bench.py`` it does
not install the network guard: PostgreSQL and Redis are reached over
loopback TCP. A store whose server is unreachable (or whose extra is not
installed) is skipped with a note on stderr.

Environment: ``BENCH_SESSIONS_N`` (appends per single-writer run, default
2000), ``BENCH_SESSIONS_W_APPENDS`` (appends per contended writer, default
200), ``HELIKON_BENCH_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``), ``HELIKON_BENCH_REDIS``
(default ``redis://127.0.0.1:6379/0``). SQLite writes to a temporary
directory (WAL, ``synchronous=NORMAL``).

Usage: ``python bench/sessions_bench.py [--store NAME ...] [--backend trio|asyncio|both]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from helikon.sessions import MemorySession, Session, SessionEvent, UserMessageEvent

N = int(os.environ.get("BENCH_SESSIONS_N", "2000"))
W_APPENDS = int(os.environ.get("BENCH_SESSIONS_W_APPENDS", "200"))
WRITERS = 8
BATCH = 50
POSTGRES_URL = os.environ.get("HELIKON_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HELIKON_BENCH_REDIS", "redis://127.0.0.1:6379/0")
STORES = ("memory", "sqlite", "postgres", "redis")
SDK = "helikon"

#: Opens a session by id, within a store's setup.
Opener = Callable[[str], Awaitable[Session]]


def emit(workload: str, metric: str, value: float, unit: str, **extra: Any) -> None:
    record: dict[str, Any] = {"sdk": SDK, "workload": workload, "metric": metric, "value": value}
    record["unit"] = unit
    record.update(extra)
    print(json.dumps(record), flush=True)


def event(i: int) -> SessionEvent:
    # A typical chat message: ~100 characters.
    text = f"message {i}: " + "the quick brown fox jumps over the lazy dog " * 2
    return UserMessageEvent.from_text(text, at=i)


@asynccontextmanager
async def store(name: str, tmp: Path, prefix: str) -> AsyncIterator[Opener]:
    """An opener for ``name``; on exit, deletes every session whose id starts with ``prefix``."""
    if name == "memory":
        sessions: dict[str, MemorySession] = {}

        async def open_memory(session_id: str) -> Session:
            return sessions.setdefault(session_id, MemorySession())

        yield open_memory
    elif name == "sqlite":
        from helikon.sessions import SqliteSession

        path = tmp / f"{prefix}.db"
        SqliteSession.migrate(path)

        async def open_sqlite(session_id: str) -> Session:
            return SqliteSession.open_without_migrate(path, session_id)

        yield open_sqlite
    elif name == "postgres":
        from helikon.sessions import PostgresSession

        pool = await PostgresSession.create_pool(POSTGRES_URL, max_size=WRITERS + 2, timeout=5)
        try:
            await PostgresSession.migrate(pool)

            async def open_postgres(session_id: str) -> Session:
                return PostgresSession.open_without_migrate(pool, session_id)

            yield open_postgres
        finally:
            with pool.connection() as conn:
                conn.execute("DELETE FROM session_events WHERE session_id LIKE %s", (prefix + "%",))
            pool.close()
    elif name == "redis":
        import redis

        from helikon.sessions import RedisSession

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
        client.ping()
        try:

            async def open_redis(session_id: str) -> Session:
                return RedisSession(client, session_id)

            yield open_redis
        finally:
            keys = list(client.scan_iter(match=f"helikon:session:{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
            client.close()
    else:
        raise ValueError(name)


async def close(session: object) -> None:
    aclose = getattr(session, "aclose", None)
    if aclose is not None:
        await aclose()


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


async def single_writer(open_session: Opener, session_id: str, appends: int, batch: int) -> float:
    """Seconds for ``appends`` appends of ``batch`` events each; checks the log."""
    session = await open_session(session_id)
    try:
        batches = [[event(a * batch + i) for i in range(batch)] for a in range(appends)]
        await session.append([event(-1)])  # warm up: connection, statements, script load
        start = time.perf_counter()
        for b in batches:
            await session.append(b)
        elapsed = time.perf_counter() - start
        log = await session.events()
        check(len(log) == 1 + appends * batch, f"log has {len(log)} events")
        check(log[-1] == batches[-1][-1], "the last event read back differs")
        return elapsed
    finally:
        await close(session)


async def contended(open_session: Opener, session_id: str) -> float:
    """Seconds for WRITERS tasks x W_APPENDS single-event appends to one session."""
    ids: list[int] = []

    async def writer(w: int) -> None:
        session = await open_session(session_id)
        try:
            for i in range(W_APPENDS):
                ids.extend(await session.append([event(w * W_APPENDS + i)]))
        finally:
            await close(session)

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for w in range(WRITERS):
            group.start_soon(writer, w)
    elapsed = time.perf_counter() - start
    check(sorted(ids) == list(range(WRITERS * W_APPENDS)), "gaps or duplicates under contention")
    return elapsed


async def bench_store(name: str, backend: str, tmp: Path) -> None:
    base = f"helikon-bench-{uuid.uuid4().hex[:10]}"
    try:
        cm = store(name, tmp, base)
        open_session = await cm.__aenter__()
    except Exception as exc:
        print(f"sessions bench: skipping {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    try:
        common = {"backend": backend, "store": name}
        seconds = await single_writer(open_session, f"{base}-one", N, 1)
        emit("S1", "appends_per_s", N / seconds, "appends/s", batch=1, writers=1, appends=N, **common)
        appends = max(N // 10, 20)
        seconds = await single_writer(open_session, f"{base}-batch", appends, BATCH)
        batched = {"batch": BATCH, "writers": 1, "appends": appends, **common}
        emit("S50", "appends_per_s", appends / seconds, "appends/s", **batched)
        emit("S50", "events_per_s", appends * BATCH / seconds, "events/s", **batched)
        seconds = await contended(open_session, f"{base}-contended")
        total = WRITERS * W_APPENDS
        contention = {"batch": 1, "writers": WRITERS, "appends": total, **common}
        emit("S1x8", "appends_per_s", total / seconds, "appends/s", **contention)
    finally:
        await cm.__aexit__(None, None, None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="helikon session append throughput (JSON lines on stdout)")
    parser.add_argument("--store", action="append", choices=STORES, help="a store to bench (default: all)")
    parser.add_argument("--backend", choices=["trio", "asyncio", "both"], default="both")
    args = parser.parse_args(argv)
    stores = args.store or list(STORES)
    backends = ["trio", "asyncio"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="helikon-sessions-bench-") as tmp:
        for backend in backends:
            for name in stores:

                async def run(name: str = name, backend: str = backend) -> None:
                    await bench_store(name, backend, Path(tmp))

                anyio.run(run, backend=backend)


if __name__ == "__main__":
    main()
