"""The server's pieces without a network: retention, the run log, frames,
configuration errors."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helikon import LlmAgent
from helikon.errors import ConfigError
from helikon.events import RunStarted
from helikon.server import AgentServer, InProcessRuns, Retention, RunLog, expired, frames_of, sse_message
from helikon.testing import MockModel, say

RUNS = st.dictionaries(st.text("abcdef", min_size=1, max_size=4), st.floats(0, 1000), max_size=20)


@given(RUNS, st.floats(0, 2000), st.floats(0.001, 500), st.integers(0, 25))
def test_expired_drops_the_old_and_the_oldest_surplus(
    runs: dict[str, float], now: float, max_age: float, max_runs: int
) -> None:
    gone = expired(runs.items(), now, Retention(max_age=max_age, max_runs=max_runs))
    kept = {run_id: at for run_id, at in runs.items() if run_id not in gone}
    assert all(now - at <= max_age for at in kept.values())
    assert len(kept) <= max_runs
    young = {run_id for run_id, at in runs.items() if now - at <= max_age}
    assert len(kept) == min(len(young), max_runs)  # nothing dropped that could stay
    if kept and gone - {r for r in runs if now - runs[r] > max_age}:
        assert min(kept.values()) >= max(runs[r] for r in gone if now - runs[r] <= max_age)


def test_retention_refuses_nonsense() -> None:
    with pytest.raises(ConfigError):
        Retention(max_age=0)
    with pytest.raises(ConfigError):
        Retention(max_runs=-1)


def test_a_log_replays_then_tails_and_closes_with_a_synthetic_terminal() -> None:
    async def main() -> None:
        log = RunLog()
        log.append({"type": "RunStarted"})
        seen: list[Any] = []

        async def read(since: int) -> None:
            seen.extend([(since, f["seq"], f["type"]) async for f in log.tail(since)])

        async with anyio.create_task_group() as group:
            group.start_soon(read, 0)
            group.start_soon(read, 1)
            await anyio.sleep(0.01)
            log.append({"type": "TokenDelta"})
            log.close("it stopped")
            log.append({"type": "TokenDelta"})  # after the close: ignored
        assert sorted(seen) == [
            (0, 0, "RunStarted"),
            (0, 1, "TokenDelta"),
            (0, 2, "RunFailed"),
            (1, 1, "TokenDelta"),
            (1, 2, "RunFailed"),
        ]
        assert log.terminal is not None and log.terminal["synthetic"] is True
        assert log.terminal["error"]["message"] == "it stopped"
        assert (
            sse_message(log.frames[1])
            == b'id: 1\nevent: token_delta\ndata: {"type":"TokenDelta","seq":1}\n\n'
        )

    anyio.run(main)


def test_frames_of_ends_a_broken_stream_with_a_terminal_frame() -> None:
    async def broken() -> Any:
        yield RunStarted("a", "r")
        raise RuntimeError("boom")

    async def main() -> list[dict[str, Any]]:
        return [frame async for frame in frames_of(broken())]

    frames = anyio.run(main)
    assert [(f["seq"], f["type"]) for f in frames] == [(0, "RunStarted"), (1, "RunFailed")]
    assert "RuntimeError: boom" in frames[1]["error"]["message"]


def _agent(name: str) -> LlmAgent[Any]:
    return LlmAgent(name=name, model=MockModel([say("hi")]))


def test_configuration_errors_are_clear() -> None:
    with pytest.raises(ConfigError, match="two agents are named 'a'"):
        AgentServer(agents=[_agent("a"), _agent("a")])
    with pytest.raises(ConfigError, match="not an agent with a name"):
        AgentServer(agents=[object()])
    with pytest.raises(ConfigError, match="context must be"):
        AgentServer(context=42)
    with pytest.raises(ConfigError, match="max_body_bytes"):
        AgentServer(max_body_bytes=0)


def test_the_builder_chain_keeps_every_setting() -> None:
    server = (
        AgentServer.builder()
        .with_retention(max_age=5, max_runs=3)
        .with_agent(_agent("a"))
        .with_max_body_bytes(99)
        .with_agent(_agent("b"))
    )
    assert [a.name for a in server.agents] == ["a", "b"]
    assert server.max_body_bytes == 99
    assert isinstance(server.runs, InProcessRuns)
    assert server.runs.retention == Retention(max_age=5, max_runs=3)


def test_starting_a_run_without_the_lifespan_says_what_to_do() -> None:
    async def main() -> None:
        with pytest.raises(ConfigError, match="lifespan"):
            await InProcessRuns().start(None)  # type: ignore[arg-type]

    anyio.run(main)


def test_the_probe_fast_path_answers_without_the_app_and_passes_the_rest() -> None:
    from helikon.server._server import ProbeFastPath

    class Runs:
        draining = False
        ready = True

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        raise RuntimeError("the app was asked")

    async def ask(path: str, method: str = "GET", headers: tuple[Any, ...] = ()) -> list[Any]:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {"type": "http", "path": path, "method": method, "headers": list(headers), "root_path": ""}
        await ProbeFastPath(app, runs)(scope, receive, send)
        return sent

    runs = Runs()
    health = anyio.run(ask, "/health")
    assert health[0]["status"] == 200 and health[1]["body"] == b'{"status":"ok"}'
    assert dict(health[0]["headers"])[b"content-length"] == b"15"
    assert len(dict(health[0]["headers"])[b"x-run-id"]) == 32
    assert anyio.run(ask, "/ready")[1]["body"] == b'{"status":"ready"}'
    runs.ready = False
    assert anyio.run(ask, "/ready")[0]["status"] == 503
    runs.draining = True
    assert anyio.run(ask, "/ready")[1]["body"] == b'{"status":"draining"}'
    assert seen == []
    for path, method, headers in [
        ("/agents", "GET", ()),
        ("/health", "HEAD", ()),
        ("/health", "GET", ((b"content-length", b"2"),)),
        ("/healthz", "GET", ()),
    ]:
        with pytest.raises(RuntimeError):
            anyio.run(ask, path, method, headers)
    assert seen == ["/agents", "/health", "/health", "/healthz"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_run_cancelled_between_events_has_its_stream_closed_at_once(backend: str) -> None:
    """A run's stream cancelled at a checkpoint is closed there (a wave's
    parts are cancelled and awaited), not left to the garbage collector."""
    from helikon.server._runs import drive

    closed: list[str] = []

    async def events() -> Any:
        try:
            for _ in range(1000):
                yield RunStarted(agent="a", run_id="r")
        finally:
            closed.append("closed")

    async def main() -> None:
        log = RunLog()
        stream = events()
        seen = 0

        async def checkpoint() -> None:
            nonlocal seen
            seen += 1
            if seen == 3:
                scope.cancel()
            await anyio.lowlevel.checkpoint()

        with anyio.CancelScope() as scope:
            await drive(stream, log, lambda event: None, checkpoint)
        assert closed == ["closed"] and log.closed and seen == 3

    anyio.run(main, backend=backend)
