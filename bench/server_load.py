"""Load test of helikon's agent server on loopback: N concurrent SSE runs.

The server (``helikon.server.AgentServer`` on Hypercorn) runs in a child
process with a scripted model that streams ``--words`` tokens, ``--pause``
seconds apart (no LLM, no network beyond loopback). The parent opens N
streaming runs at once (``POST /agents/bench/runs?stream=sse``, httpx under
asyncio), reads each to its terminal frame and checks that every run
completed with every token. Meanwhile a prober asks ``GET /health`` (on
servers without it, ``GET /agents``) on a fresh connection every 50 ms. It
prints one JSON object: the latencies (request sent -> terminal frame; p50,
p90, p99, max), the p99 time to the first event, the p99 of the probe during
the burst (and during its streaming phase alone: probes sent after every run
had its first event, apart from the burst's intake), the connections dropped
(reset, or closed before the terminal frame), the runs refused with 503
(admission control), the wall time, and the server's peak RSS (``VmHWM``), its
RSS before the load and after it (per 1,000 runs), the machine's load
average before and after, and the server's share of a core (its CPU seconds
over the wall time). The server is started the documented way, with its
default settings. ``--repeat N`` measures N times and adds the medians.

    python bench/server_load.py                 # 500 runs (the documented measurement)
    python bench/server_load.py --runs 100 --loop trio

On a machine shared with other work, give the bench (the server is its child)
a core: ``nice`` alone does not when the kernel groups processes by session
(``/proc/sys/kernel/sched_autogroup_enabled``: niceness then only orders the
processes of one session), so start it in a session of its own whose group is
niced too (as root):

    setsid -w sh -c 'echo -15 > /proc/self/autogroup; exec nice -n -15 \\
        python bench/server_load.py --runs 1000 --repeat 5'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from helikon import LlmAgent, ModelCapabilities
from helikon.cancel import CancellationToken
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk


class StreamingModel:
    """Streams ``words`` tokens, ``pause`` seconds apart, for any number of runs."""

    def __init__(self, words: int, pause: float) -> None:
        self.words = words
        self.pause = pause

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "bench"

    @property
    def model_id(self) -> str:
        return "bench-stream"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[ModelEvent]:
        for index in range(self.words):
            if index:
                await anyio.sleep(self.pause)
            yield TextChunk(f"t{index} ")
        yield Finish(FinishReason.STOP)


def serve(
    port: int,
    words: int,
    pause: float,
    loop: str,
    admission: str = "",
    probe_port: int = 0,
    tune_gc: bool = True,
) -> None:
    """The child: serve one agent until killed (``admission``: ``RUNNING,QUEUED``
    for ``AgentServer.with_admission``; the defaults when empty; ``tune_gc``
    False: ``serve(tune_gc=False)``)."""
    from helikon.server import AgentServer  # the parent needs only httpx

    agent = LlmAgent(name="bench", model=StreamingModel(words, pause), instructions="Stream.")
    server = AgentServer(agents=[agent]).with_retention(max_age=600, max_runs=100_000)
    if admission:
        running, queued = (int(n) for n in admission.split(","))
        server = server.with_admission(max_running=running, max_queued=queued)

    async def main() -> None:
        options: dict[str, Any] = {}
        if probe_port:
            options["probe_port"] = probe_port
        if not tune_gc:
            options["tune_gc"] = False
        await server.serve("127.0.0.1", port, **options)

    anyio.run(main, backend=loop)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields


async def _one(client: Any, words: int) -> tuple[float, str, int]:
    """One streamed run: (latency s, terminal type, tokens seen)."""
    started = time.perf_counter()
    terminal, tokens = "none", 0
    async with client.stream("POST", "/agents/bench/runs?stream=sse", json={"input": "go"}) as response:
        if response.status_code != 200:
            return time.perf_counter() - started, f"http {response.status_code}", 0
        async for line in response.aiter_lines():
            if not line.startswith("event: "):
                continue
            kind = _CAMEL.get(line[7:], line[7:])
            if kind == "TokenDelta":
                tokens += 1
            elif kind in ("RunCompleted", "RunFailed"):
                terminal = kind
    return time.perf_counter() - started, terminal, tokens


#: A stream that has not ended by then counts as a failure (never a hung run).
STREAM_TIMEOUT_S = 300.0
#: The server's SSE event names (the book's snake case) as event types.
_CAMEL = {"token_delta": "TokenDelta", "run_completed": "RunCompleted", "run_failed": "RunFailed"}
#: The terminal frames' SSE lines, in the book's names and in the type names
#: servers before them used (so the bench measures older commits too).
_ENDS = (
    b"event: run_completed\n",
    b"event: RunCompleted\n",
    b"event: run_failed\n",
    b"event: RunFailed\n",
)


async def _one_raw(
    port: int, words: int, first: list[float], first_at: list[float]
) -> tuple[float, str, int]:
    """One streamed run over a bare asyncio connection (a light client, so the
    numbers measure the server rather than the client's HTTP library); the
    time to its first event goes into ``first``."""
    body = b'{"input": "go"}'
    request = (
        b"POST /agents/bench/runs?stream=sse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
    ) % (len(body), body)
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return time.perf_counter() - started, "dropped", 0
    try:
        writer.write(request)
        await writer.drain()
        data = bytearray()
        terminal = "none"
        while True:
            try:
                chunk = await reader.read(65536)
            except OSError:
                return time.perf_counter() - started, "dropped", 0
            if not chunk:
                break
            had_event = b"\nevent: " in data
            data += chunk
            if not had_event and b"\nevent: " in data:
                first.append(time.perf_counter() - started)
                first_at.append(time.perf_counter())
            tail = bytes(data[-4096:])
            if any(name in tail for name in _ENDS):
                terminal = "RunCompleted" if any(name in tail for name in _ENDS[:2]) else "RunFailed"
                break
        if not data:
            return time.perf_counter() - started, "dropped", 0
        if not data.startswith(b"HTTP/1.1 200"):
            return time.perf_counter() - started, f"http {bytes(data[9:12]).decode()}", 0
        if terminal == "none":
            return time.perf_counter() - started, "dropped", 0
        tokens = data.count(b"event: token_delta\n") + data.count(b"event: TokenDelta\n")
        return time.perf_counter() - started, terminal, tokens
    finally:
        writer.close()


def _probe(port: int, path: str) -> tuple[float, int]:
    """One ``GET path`` on a fresh connection: (seconds, status; 0 if it failed)."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            head = sock.recv(12)
    except OSError:
        return time.perf_counter() - started, 0
    status = int(head[9:12]) if head.startswith(b"HTTP/1.") else 0
    return time.perf_counter() - started, status


def _prober(port: int, every: float, stop: threading.Event, out: dict[str, Any]) -> None:
    """Probe ``/health`` (``/agents`` where there is none) every ``every``
    seconds until ``stop``, from a thread of the client (blocking sockets: the
    kernel wakes it, not the load's event loop), each probe in a thread of its own."""
    path = "/health"
    if _probe(port, path)[1] == 404:
        path = "/agents"
    found: list[tuple[float, int]] = []
    sent: list[float] = []

    def one() -> None:
        at = time.perf_counter()
        found.append(_probe(port, path))
        sent.append(at)

    threads: list[threading.Thread] = []
    while not stop.wait(every):
        threads.append(threading.Thread(target=one, daemon=True))
        threads[-1].start()
    for thread in threads:
        thread.join()
    out["path"] = path
    out["probes"] = [seconds if status else float("inf") for seconds, status in found]
    out["sent"] = sent


async def _load_raw(
    port: int, runs: int, words: int, probe_port: int = 0
) -> tuple[list[tuple[float, str, int]], float, dict[str, Any]]:
    first: list[float] = []
    first_at: list[float] = []
    stop = threading.Event()
    main_probes: dict[str, Any] = {}
    side_probes: dict[str, Any] = {"probes": []}
    probers = [threading.Thread(target=_prober, args=(port, 0.05, stop, main_probes))]
    if probe_port:
        probers.append(threading.Thread(target=_prober, args=(probe_port, 0.05, stop, side_probes)))
    for prober in probers:
        prober.start()
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    results = await asyncio.gather(
        *(asyncio.wait_for(_one_raw(port, words, first, first_at), STREAM_TIMEOUT_S) for _ in range(runs)),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    stop.set()
    for prober in probers:
        await asyncio.to_thread(prober.join)
    # Probes sent once every run had its first event: the streaming phase,
    # apart from the intake of the burst (every connection's accept and parse).
    intake_end = max(first_at, default=float("inf"))
    streaming = [
        p for p, at in zip(main_probes["probes"], main_probes["sent"], strict=True) if at > intake_end
    ]
    extra = {
        "first_event": first,
        "probe_path": main_probes["path"],
        "probes": main_probes["probes"],
        "streaming_probes": streaming,
        "probe_port_probes": side_probes["probes"],
    }
    return [("error", repr(r), 0) if isinstance(r, BaseException) else r for r in results], wall, extra  # type: ignore[misc]


async def _load(base: str, runs: int, words: int) -> tuple[list[tuple[float, str, int]], float]:
    import httpx

    limits = httpx.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=300) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(_one(client, words) for _ in range(runs)), return_exceptions=True)
        wall = time.perf_counter() - started
    out: list[tuple[float, str, int]] = []
    for result in results:
        out.append(("error", repr(result), 0) if isinstance(result, BaseException) else result)  # type: ignore[arg-type]
    return out, wall


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_load(
    runs: int = 500,
    words: int = 10,
    pause: float = 0.02,
    loop: str = "asyncio",
    client: str = "raw",
    admission: str = "",
    probe_port: bool = False,
    tune_gc: bool = True,
) -> dict[str, Any]:
    """Start the server in a child process, run the load, stop it: the
    measurements (``probe_port``: the server also answers probes on a port
    of their own, probed too)."""
    port = _free_port()
    side_port = _free_port() if probe_port else 0
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--words",
            str(words),
            "--pause",
            str(pause),
            "--loop",
            loop,
            *(["--admission", admission] if admission else []),
            *(["--probe-port", str(side_port)] if side_port else []),
            *([] if tune_gc else ["--no-tune-gc"]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the server did not start: {child.stderr.read() if child.stderr else ''}"
                    ) from None
                time.sleep(0.05)
        load_before = os.getloadavg()[0]
        before, cpu_before = _rss_kib(child.pid), _cpu_s(child.pid)
        client_cpu = time.process_time()
        extra: dict[str, Any] = {"first_event": [], "probe_path": "", "probes": []}
        if client == "raw":
            results, wall, extra = asyncio.run(_load_raw(port, runs, words, side_port))
        else:
            results, wall = asyncio.run(_load(base, runs, words))
        time.sleep(0.5)  # the server finishes its bookkeeping
        client_cpu = time.process_time() - client_cpu
        after, cpu = _rss_kib(child.pid), _cpu_s(child.pid) - cpu_before
    finally:
        child.terminate()
        child.wait(timeout=10)
    latencies = [r[0] for r in results if isinstance(r[0], float)]
    completed = sum(1 for r in results if r[1] == "RunCompleted" and r[2] == words)
    first, probes = extra["first_event"] or [float("nan")], extra["probes"] or [float("nan")]
    return {
        "runs": runs,
        "completed": completed,
        "lost": runs - completed,
        "failures": sorted({r[1] for r in results if r[1] != "RunCompleted"})[:5],
        "words": words,
        "pause_s": pause,
        "loop": loop,
        "client": client,
        "admission": admission or "default",
        "wall_s": round(wall, 3),
        "latency_p50_s": round(_percentile(latencies, 0.50), 4),
        "latency_p90_s": round(_percentile(latencies, 0.90), 4),
        "latency_p99_s": round(_percentile(latencies, 0.99), 4),
        "latency_max_s": round(max(latencies), 4),
        "latency_mean_s": round(statistics.fmean(latencies), 4),
        "first_event_p99_s": round(_percentile(first, 0.99), 4),
        "probe_path": extra["probe_path"],
        "probe_p99_s": round(_percentile(probes, 0.99), 4),
        "probe_max_s": round(max(probes), 4),
        "probes": len(extra["probes"]),
        "probe_streaming_p99_s": round(_percentile(extra.get("streaming_probes") or [float("nan")], 0.99), 4),
        "probes_streaming": len(extra.get("streaming_probes") or []),
        "probe_port_p99_s": round(_percentile(extra.get("probe_port_probes") or [float("nan")], 0.99), 4),
        "dropped": sum(1 for r in results if r[1] in ("dropped", "error")),
        "refused_503": sum(1 for r in results if r[1] == "http 503"),
        "server_rss_before_mib": round(before["VmRSS"] / 1024, 1),
        "server_rss_after_mib": round(after["VmRSS"] / 1024, 1),
        "server_rss_mib_per_1000_runs": round((after["VmRSS"] - before["VmRSS"]) / 1024 * 1000 / runs, 2),
        "server_peak_rss_mib": round(after["VmHWM"] / 1024, 1),
        "server_cpu_s": round(cpu, 2),
        "client_cpu_s": round(client_cpu, 2),
        "server_core_share": round(cpu / wall, 2),
        "load_avg_before": round(load_before, 2),
        "load_avg_after": round(os.getloadavg()[0], 2),
        "tune_gc": tune_gc,
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "ideal_run_s": round((words - 1) * pause, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--words", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.02)
    parser.add_argument("--loop", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    parser.add_argument("--admission", default="", help="RUNNING,QUEUED (AgentServer.with_admission)")
    parser.add_argument(
        "--probe-port", type=int, default=0, help="also serve and probe /health on a port of its own"
    )
    parser.add_argument(
        "--no-tune-gc", action="store_true", help="serve(tune_gc=False): the collector's own settings"
    )
    parser.add_argument("--repeat", type=int, default=1, help="measure N times; report each and the medians")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(
            args.serve,
            args.words,
            args.pause,
            args.loop,
            args.admission,
            args.probe_port,
            not args.no_tune_gc,
        )
        return
    results = [
        run_load(
            args.runs,
            args.words,
            args.pause,
            args.loop,
            args.client,
            args.admission,
            bool(args.probe_port),
            not args.no_tune_gc,
        )
        for _ in range(max(1, args.repeat))
    ]
    if len(results) == 1:
        print(json.dumps(results[0], indent=2))
        return
    print(json.dumps({"median": medians(results), "runs": results}, indent=2))


def medians(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every number over several measurements (the rest as in the first)."""
    out: dict[str, Any] = {}
    for key, value in results[0].items():
        numbers = [r[key] for r in results]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            middle = statistics.median(numbers)
            out[key] = int(middle) if isinstance(value, int) and middle == int(middle) else round(middle, 4)
        else:
            out[key] = value
    out["repeats"] = len(results)
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
