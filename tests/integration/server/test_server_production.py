"""The agent server as a deployment runs it (issue 37): probes that answer,
admission control, Hypercorn's production settings, a client that hangs up,
retention at every finish, one run id, and the drain on SIGTERM — each on a
real server on loopback (``AgentServer.serve`` on port 0)."""

from __future__ import annotations

import gc
import inspect
import json
import logging
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from httpx_sse import connect_sse
from server_support import (
    ScriptedModel,
    approving_context,
    assistant,
    free_port,
    server_for,
    serving,
    wait_for,
)

from helikon import LlmAgent, ModelCapabilities
from helikon.cancel import CancellationToken
from helikon.errors import ConfigError
from helikon.items import text_of
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk
from helikon.server import AgentServer, BearerAuth
from helikon.sessions import SqliteSession

pytestmark = pytest.mark.integration


@contextmanager
def served(server: AgentServer, backend: str = "asyncio", **options: Any) -> Iterator[str]:
    """``server.serve("127.0.0.1", 0, ...)`` in a thread: the URL it reports."""
    if "task_status" not in inspect.signature(server.serve).parameters:  # the server before issue 37
        with serving(server.app(), backend) as base:
            yield base
        return
    urls: queue.Queue[str | BaseException] = queue.Queue()
    stop = threading.Event()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            urls.put(
                await group.start(
                    lambda task_status: server.serve("127.0.0.1", 0, task_status=task_status, **options)
                )
            )
            while not stop.is_set():
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()

    def run() -> None:
        try:
            anyio.run(main, backend=backend)
        except BaseException as exc:  # surfaced to the test
            urls.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    url = urls.get(timeout=10)
    if isinstance(url, BaseException):
        raise url
    try:
        yield url
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive(), "the server did not stop"
    assert urls.empty(), urls.get()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_health_and_ready_are_public_and_in_the_schema(backend: str) -> None:
    server = server_for(auth=BearerAuth(["secret-token-1"]))
    with served(server, backend) as base, httpx.Client(base_url=base) as client:
        assert base.startswith("http://127.0.0.1:") and _port(base) > 0  # serve reports its address
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/ready").json() == {"status": "ready"}
        assert client.get("/agents").status_code == 401  # the probes need no token, the rest does
        paths = client.get("/openapi.json").json()["paths"]
        assert {"/health", "/ready"} <= set(paths)
        assert paths["/health"]["get"]["security"] == []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_serve_tunes_the_garbage_collector_while_it_serves_and_restores_it(backend: str) -> None:
    # A full collection walks every object and stops the loop (0.1-0.3 s at
    # 1,000 runs): while serving, the startup heap is frozen out of them and
    # they are rarer; afterwards the process's own settings are back.
    from helikon.server._server import FULL_GC_AFTER

    before = gc.get_threshold()
    with served(server_for(), backend) as base:
        during, frozen = gc.get_threshold(), gc.get_freeze_count()
        assert httpx.get(f"{base}/health").json() == {"status": "ok"}
    assert during[:2] == before[:2] and during[2] >= FULL_GC_AFTER > before[2], (before, during)
    assert frozen > 1000  # the imported modules and the app, at least
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with served(server_for(), backend, tune_gc=False):
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_main_port_answers_the_probes_as_the_routes_do() -> None:
    # GET /health and /ready are answered before the app (ProbeFastPath): the
    # same status, body and headers as the routes, an X-Run-Id, readiness live.
    server = server_for(assistant(ScriptedModel(pause=0.1))).with_admission(max_running=1, max_queued=0)
    with (
        served(server) as base,
        serving(server_for().app()) as plain_base,  # the routes themselves
        httpx.Client(base_url=base) as client,
    ):
        for path in ("/health", "/ready"):
            fast = client.get(path)
            routed = httpx.get(f"{plain_base}{path}")
            assert (fast.status_code, fast.content) == (routed.status_code, routed.content), path
            assert fast.headers["content-type"] == routed.headers["content-type"] == "application/json"
            assert len(fast.headers["x-run-id"]) == 32
        run_id = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 100"}).json()["run_id"]
        full = client.get("/ready")
        assert (full.status_code, full.json()) == (503, {"status": "full"})
        assert client.head("/health").status_code == 200  # other methods go to the routes
        assert client.post("/health").status_code == 405
        client.post(f"/agents/assistant/runs/{run_id}/cancel")


def test_the_probe_port_answers_from_its_own_thread() -> None:
    probe = free_port()
    server = server_for(assistant(ScriptedModel(pause=0.1))).with_admission(max_running=1, max_queued=0)
    with served(server, probe_port=probe) as base, httpx.Client(base_url=base) as client:
        side = f"http://127.0.0.1:{probe}"
        assert httpx.get(f"{side}/health").json() == {"status": "ok"}
        assert httpx.get(f"{side}/ready").json() == {"status": "ready"}
        run_id = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 100"}).json()["run_id"]
        full = httpx.get(f"{side}/ready")
        assert (full.status_code, full.json()) == (503, {"status": "full"})
        assert httpx.get(f"{side}/agents").status_code == 404  # probes only
        client.post(f"/agents/assistant/runs/{run_id}/cancel")
    with pytest.raises(httpx.ConnectError):  # closed with the server
        httpx.get(f"{side}/health")


class _BusyModel:
    """Streams ``chunks`` text chunks without ever waiting (a cached or local model)."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "busy"

    @property
    def model_id(self) -> str:
        return "busy"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[ModelEvent]:
        for _ in range(self.chunks):
            yield TextChunk("x")
        yield Finish(FinishReason.STOP)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_busy_run_does_not_starve_the_cheap_routes(backend: str) -> None:
    # Before issue 37 a run whose model never waits held the event loop to its
    # end: a request that came meanwhile was answered after the run completed.
    busy: LlmAgent[Any] = LlmAgent(name="busy", model=_BusyModel(20_000), instructions="Stream.")
    with (
        serving(AgentServer().with_agent(busy).app(), backend) as base,
        httpx.Client(base_url=base) as client,
    ):
        run_id = client.post("/agents/busy/runs?mode=async", json={"input": "go"}).json()["run_id"]
        assert client.get("/agents").status_code == 200
        status = client.get(f"/agents/busy/runs/{run_id}").json()
        assert status["status"] == "running" and status["events"] < 20_000, status  # answered mid-run
        client.post(f"/agents/busy/runs/{run_id}/cancel")


class _BurningModel(_BusyModel):
    """Never waits, and each chunk costs 2 ms of CPU (a model whose stream is work)."""

    async def _stream(self) -> AsyncIterator[ModelEvent]:
        for _ in range(self.chunks):
            end = time.thread_time() + 0.002
            while time.thread_time() < end:
                pass
            yield TextChunk("x")
        yield Finish(FinishReason.STOP)


def _health_on_a_fresh_connection(base: str) -> int:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return int(sock.recv(12)[9:12])


def _events(server: AgentServer) -> int:
    return sum(len(run.log.frames) for run in list(server.runs.runs.values()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_health_on_the_main_port_waits_for_a_portion_of_the_runs_not_all(backend: str) -> None:
    # Before issue 37's pacer every turn of the loop stepped every busy run, so
    # a probe (several turns) waited for `runs` events per turn. Measured in
    # work: the events the runs produced while the probe was in flight.
    runs = 50
    busy: LlmAgent[Any] = LlmAgent(name="busy", model=_BurningModel(20_000), instructions="Stream.")
    server = AgentServer().with_agent(busy)
    with serving(server.app(), backend) as base, httpx.Client(base_url=base, timeout=120) as client:

        def start(_: int) -> str:
            run_id: str = client.post("/agents/busy/runs?mode=async", json={"input": "go"}).json()["run_id"]
            return run_id

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(start, range(runs)))
        deadline = time.monotonic() + 120
        while sum(1 for run in server.runs.runs.values() if len(run.log.frames) > 3) < runs:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the runs did not all start"
            time.sleep(0.05)
        during = []
        for _ in range(3):
            before = _events(server)
            assert _health_on_a_fresh_connection(base) == 200
            during.append(_events(server) - before)
        for run in list(server.runs.runs.values()):  # type: ignore[attr-defined]
            run.token.cancel()
        assert len(ids) == runs
    # A probe takes several turns: unpaced, each turn steps every run (2 ms of
    # CPU each), several times `runs` events; paced, about 8 runs a turn.
    assert sorted(during)[1] < 3 * runs, during


def test_a_full_queue_is_refused_with_503_and_retry_after() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.1))).with_admission(
        max_running=1, max_queued=1, retry_after=7
    )
    with served(server) as base, httpx.Client(base_url=base) as client:
        first = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 100"}).json()["run_id"]
        second = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 100"}).json()["run_id"]
        wait_for(client, f"/agents/assistant/runs/{first}", "running")
        assert client.get(f"/agents/assistant/runs/{second}").json()["status"] == "queued"  # waits for a slot
        refused = client.post("/agents/assistant/runs", json={"input": "hello"})
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "7"
        assert refused.json()["error"]["code"] == "unavailable"
        assert client.get("/ready").status_code == 503
        assert client.get("/health").status_code == 200
        for run_id in (first, second):
            client.post(f"/agents/assistant/runs/{run_id}/cancel")
        wait_for(client, f"/agents/assistant/runs/{second}", "cancelled")
        assert client.get("/ready").status_code == 200
        assert client.post("/agents/assistant/runs", json={"input": "hello"}).json()["status"] == "completed"


def _listen_backlog(port: int) -> int:
    """The listening socket's backlog, as the kernel reports it (``ss``'s Send-Q)."""
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[2])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_under_trio_serve_accepts_on_several_sockets_of_its_port(backend: str) -> None:
    # Hypercorn's trio server accepts one connection per scheduler pass per
    # socket: a burst's intake is spread over TRIO_ACCEPTORS sockets of one
    # port (SO_REUSEPORT); asyncio accepts every waiting connection at once.
    from helikon.server._server import TRIO_ACCEPTORS, ServeError

    with served(server_for(), backend) as base:
        port = _port(base)
        lines = subprocess.run(
            ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert len(lines) == (TRIO_ACCEPTORS if backend == "trio" else 1), lines
        assert all(int(line.split()[2]) >= 2048 for line in lines), lines  # each with the backlog
        with ThreadPoolExecutor(16) as pool:  # fresh connections, spread by the kernel
            statuses = list(pool.map(lambda _: httpx.get(f"{base}/health").status_code, range(64)))
        assert statuses == [200] * 64
    with socket.socket() as taken:  # a port another program holds is still refused
        taken.bind(("127.0.0.1", 0))
        taken.listen()

        async def main() -> None:
            await AgentServer().serve("127.0.0.1", taken.getsockname()[1])

        with pytest.raises(ServeError, match="cannot listen"):
            anyio.run(main, backend=backend)


def test_a_run_waiting_for_a_human_gives_its_slot_back() -> None:
    server = AgentServer(context=approving_context()).with_agent(assistant()).with_admission(max_running=1)
    with served(server) as base, httpx.Client(base_url=base) as client:
        waiting = client.post("/agents/assistant/runs?mode=async", json={"input": "pay 5"}).json()["run_id"]
        url = f"/agents/assistant/runs/{waiting}"
        (pending,) = wait_for(client, url, "awaiting_approval")["pending_approvals"]
        # the only slot is free while it waits: another run goes through
        assert client.post("/agents/assistant/runs", json={"input": "hello"}, timeout=10).json()[
            "status"
        ] == ("completed")
        decision = {"decisions": [{"call_id": pending["call_id"], "approved": True}]}
        assert client.post(f"{url}/approvals", json=decision).status_code == 200
        assert wait_for(client, url, "completed")["output"] == "The tool said: paid 5"
        assert client.post("/agents/assistant/runs", json={"input": "again"}).json()["status"] == "completed"


def test_runs_waiting_for_a_human_are_bounded_the_next_call_is_denied() -> None:
    # Each waiting run holds its memory until a human answers: with
    # max_awaiting=1 a second run's call is denied at once and the run goes on.
    server = AgentServer(context=approving_context()).with_agent(assistant()).with_admission(max_awaiting=1)
    with served(server) as base, httpx.Client(base_url=base) as client:
        waiting = client.post("/agents/assistant/runs?mode=async", json={"input": "pay 5"}).json()["run_id"]
        url = f"/agents/assistant/runs/{waiting}"
        (pending,) = wait_for(client, url, "awaiting_approval")["pending_approvals"]
        second = client.post("/agents/assistant/runs", json={"input": "pay 6"}, timeout=10).json()
        assert second["status"] == "completed" and "too many runs wait for a human" in second["output"]
        assert "paid 6" not in second["output"]
        decision = {"decisions": [{"call_id": pending["call_id"], "approved": True}]}
        assert client.post(f"{url}/approvals", json=decision).status_code == 200
        assert wait_for(client, url, "completed")["output"] == "The tool said: paid 5"
        # the waiting run is answered: the next one may wait again
        third = client.post("/agents/assistant/runs?mode=async", json={"input": "pay 7"}).json()["run_id"]
        wait_for(client, f"/agents/assistant/runs/{third}", "awaiting_approval")
        client.post(f"/agents/assistant/runs/{third}/cancel")
    with pytest.raises(ConfigError, match="max_awaiting"):
        AgentServer().with_admission(max_awaiting=-1)


def test_serve_listens_with_a_large_backlog_and_closes_idle_connections() -> None:
    with served(server_for(), keep_alive=0.5) as base:
        assert _listen_backlog(_port(base)) >= 2048
        with socket.create_connection(("127.0.0.1", _port(base)), timeout=5) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while b'{"status":"ok"}' not in answer:
                answer += sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200")
            started = time.monotonic()
            assert sock.recv(4096) == b""  # closed by the server once idle
            assert time.monotonic() - started < 4


def test_a_body_that_stalls_is_cut_with_408() -> None:
    with (
        served(server_for(body_timeout=0.5)) as base,
        socket.create_connection(("127.0.0.1", _port(base)), timeout=10) as sock,
    ):
        sock.sendall(
            b"POST /agents/assistant/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"input":'
        )
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"body_timeout" in answer
        assert time.monotonic() - started < 5  # and the connection is closed


def test_a_client_that_hangs_up_mid_body_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="helikon.server")
    with served(server_for()) as base:
        with socket.create_connection(("127.0.0.1", _port(base)), timeout=5) as sock:
            sock.sendall(
                b"POST /agents/assistant/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"input":'
            )
            time.sleep(0.3)
        deadline = time.monotonic() + 5
        while not any("went away" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.05)
    mine = [r for r in caplog.records if r.name == "helikon.server"]
    assert [r.levelno for r in mine if "went away" in r.getMessage()] == [logging.INFO], mine
    assert not [r for r in mine if r.exc_info or r.levelno >= logging.WARNING], mine


def test_a_disconnected_sse_client_cancels_the_run_and_the_session_keeps_the_turn() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.05)))
    with served(server) as base, httpx.Client(base_url=base) as client:
        headers = {"X-Session-Id": "s-disconnect"}
        with connect_sse(
            client, "POST", "/agents/assistant/runs?stream=sse", json={"input": "slow 200"}, headers=headers
        ) as source:
            run_id = source.response.headers["x-run-id"]
            events = source.iter_sse()
            kinds = [json.loads(next(events).data)["type"] for _ in range(3)]
            assert kinds[0] == "RunStarted" and "TokenDelta" in kinds
        done = wait_for(client, f"/agents/assistant/runs/{run_id}", "cancelled")
        assert done["output"].startswith("w0 ")
        answer = client.post("/agents/assistant/runs", json={"input": "history"}, headers=headers).json()
        assert answer["output"] == "I have seen 2 user messages"  # the cancelled turn is in the session


def test_retention_is_enforced_as_each_run_finishes() -> None:
    server = server_for().with_retention(max_age=3600, max_runs=2, sweep_every=3600)
    with served(server) as base, httpx.Client(base_url=base) as client:
        ids = [
            client.post("/agents/assistant/runs", json={"input": f"hi {n}"}).json()["run_id"]
            for n in range(5)
        ]
        kept = set(server.runs.runs)  # type: ignore[attr-defined]
        assert kept == set(ids[-2:])  # no sweep ran: the limit held at each finish
        assert client.get(f"/agents/assistant/runs/{ids[0]}").status_code == 404


def test_the_run_id_is_the_runs_own_id() -> None:
    with served(server_for()) as base, httpx.Client(base_url=base) as client:
        answer = client.post("/agents/assistant/runs", json={"input": "weather please"})
        body = answer.json()
        started = next(e for e in body["events"] if e["type"] == "RunStarted")
        assert answer.headers["x-run-id"] == body["run_id"] == started["run_id"]
        calls = [e for e in body["events"] if e["type"] == "ToolCallItem"]
        assert calls and all(body["run_id"] in json.dumps(c) for c in calls)
        with connect_sse(client, "POST", "/agents/assistant/runs?stream=sse", json={"input": "hi"}) as source:
            first = json.loads(next(source.iter_sse()).data)
            assert first["run_id"] == source.response.headers["x-run-id"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_apps_shutdown_drains_its_runs(backend: str) -> None:
    server = server_for(assistant(ScriptedModel(pause=0.05)), drain_grace=1.0)
    with serving(server.app(), backend) as base, httpx.Client(base_url=base) as client:
        short = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 10"}).json()["run_id"]
        long = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 400"}).json()["run_id"]
        wait_for(client, f"/agents/assistant/runs/{long}", "running")
        started = time.monotonic()
    assert time.monotonic() - started < 1.0 + 5
    runs = server.runs.runs  # type: ignore[attr-defined]
    assert runs[short].status.value == "completed"  # finished within the grace period
    assert runs[long].status.value == "cancelled"  # cancelled after it, keeping its output
    assert runs[long].log.frames[-1]["error"]["type"] == "Cancelled"


# -- the drain, on a real process with a real signal --------------------------------------------

_CHILD = """
import sys
import anyio
sys.path.insert(0, {support!r})
from server_support import ScriptedModel, assistant
from helikon.server import AgentServer, sessions_from
from helikon.sessions import SqliteSession

server = AgentServer(
    agents=[assistant(ScriptedModel(pause=0.05))],
    sessions=sessions_from(lambda sid: SqliteSession.open({db!r}, sid)),
    drain_grace=2.0,
)

async def main() -> None:
    async with anyio.create_task_group() as group:
        url = await group.start(lambda task_status: server.serve("127.0.0.1", 0, task_status=task_status))
        print(url, flush=True)

anyio.run(main, backend={backend!r})
print("exited cleanly", flush=True)
"""


def _stream(base: str, session: str, text: str, seen: threading.Event, out: dict[str, Any]) -> None:
    frames: list[dict[str, Any]] = []
    try:
        with (
            httpx.Client(base_url=base, timeout=30) as client,
            connect_sse(
                client,
                "POST",
                "/agents/assistant/runs?stream=sse",
                json={"input": text},
                headers={"X-Session-Id": session},
            ) as source,
        ):
            for event in source.iter_sse():
                frames.append(json.loads(event.data))
                if frames[-1]["type"] == "TokenDelta":
                    seen.set()
    except httpx.HTTPError as exc:
        out["error"] = repr(exc)
    out["frames"] = frames


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sigterm_drains_twenty_streaming_runs_and_exits_0(tmp_path: Path, backend: str) -> None:
    db = tmp_path / "sessions.db"
    script = tmp_path / "serve.py"
    support = str(Path(__file__).resolve().parent)
    script.write_text(_CHILD.format(support=support, db=str(db), backend=backend))
    child = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        base = child.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:"), child.stderr.read() if child.stderr else ""
        # ten runs that finish within the grace period, ten that cannot
        texts = ["slow 10"] * 10 + ["slow 400"] * 10
        results: list[dict[str, Any]] = [{} for _ in texts]
        seen = [threading.Event() for _ in texts]
        threads = [
            threading.Thread(target=_stream, args=(base, f"s{n}", text, seen[n], results[n]), daemon=True)
            for n, text in enumerate(texts)
        ]
        for thread in threads:
            thread.start()
        for event in seen:
            assert event.wait(20), "a run never streamed"
        child.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        time.sleep(0.3)
        with httpx.Client(base_url=base) as client:
            assert client.get("/ready").status_code == 503
            refused = client.post("/agents/assistant/runs", json={"input": "hi"})
            assert refused.status_code == 503 and "retry-after" in refused.headers
        assert child.wait(timeout=20) == 0, child.stderr.read() if child.stderr else ""
        assert time.monotonic() - signalled < 2.0 + 6  # the grace period, plus the cancelled runs' ends
        assert child.stdout.read().strip() == "exited cleanly"
        for thread in threads:
            thread.join(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    ends = []
    for text, result in zip(texts, results, strict=True):
        assert "error" not in result, result
        terminal = result["frames"][-1]
        if text == "slow 10":
            assert terminal["type"] == "RunCompleted", terminal
            ends.append("completed")
        else:
            assert terminal["type"] == "RunFailed" and terminal["error"]["type"] == "Cancelled", terminal
            ends.append("cancelled")
    assert ends.count("cancelled") == 10
    # every run's turn is in its session: the user's message, and the reply of those that completed
    for n, text in enumerate(texts):
        items = anyio.run(_snapshot, db, f"s{n}")
        kinds = [type(item).__name__ for item in items]
        assert kinds[0] == "UserMessage", kinds
        assert text_of(items[0].content) == text
        if text == "slow 10":
            assert kinds == ["UserMessage", "AssistantMessage"], kinds


async def _snapshot(db: Path, session_id: str) -> tuple[Any, ...]:
    session = SqliteSession.open(db, session_id)
    try:
        return await session.snapshot()
    finally:
        await session.aclose()
