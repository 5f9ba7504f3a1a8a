"""helikon's framework overhead on the peer workloads (scripted model, no LLM).

The public API only: ``LlmAgent`` + ``@tool`` + ``agent.run(...)`` (drained
with ``collect`` for W1/W2, iterated event by event for W3), under trio and
under asyncio (``trio.run`` + a nursery, ``asyncio.run`` + ``asyncio.gather``).

The scripted model holds no state between calls, like the peers' models: if
the last message is a ``ToolResult`` for call id ``call_k`` the turn index is
k+1, otherwise 0. Turns 0..T-2 ask for one ``add(a=1, b=2)`` call; turn T-1
answers "done". So 1000 concurrent runs share one model and one agent.

Workloads (see ``shared/bench/peers/README.md``):

- W1 tool loop: T turns per run, R sequential runs after the warm-ups;
  microseconds per model turn.
- W2 concurrent runs: C runs of T turns started together after one warm-up
  run; wall time, VmRSS before and after, RSS growth, peak ``ru_maxrss``.
  ``max_in_flight`` says how many runs were alive at once.
- W2i (helikon only, a diagnostic): W2 with a scheduler checkpoint at the
  start of every model call, so all C runs are alive at once and the RSS
  growth measures C live runs rather than C finished results.
- W3 streaming: one run whose model streams N deltas "tok "; TokenDelta
  events the caller receives per second.
- W4 import time of ``import helikon`` and of the names a user imports.

Usage: ``python bench/helikon_bench.py [--only W1|W2|W2i|W3|W4] [--backend trio|asyncio|both]``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gc
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import _common as C  # first: telemetry env and network guard before any SDK import
import anyio.lowlevel

from helikon import LlmAgent, RunConfig, RunResult, TokenDelta, collect, tool
from helikon.events import MessageOutput, RunCompleted, RunFailed, ToolOutputItem
from helikon.items import ToolResult, text_of
from helikon.model import (
    Finish,
    FinishReason,
    ModelCapabilities,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    Usage,
)

SDK = "helikon"
IMPORT_STMTS = ("import helikon", "from helikon import LlmAgent, RunContext, collect, tool")
INSTRUCTIONS = "You are a benchmark agent."
COUNTERS = {"tool": 0, "model": 0}
T = TypeVar("T")


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    COUNTERS["tool"] += 1
    return a + b


@tool(name="add")
async def add_may_suspend(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    COUNTERS["tool"] += 1
    if a < 0:  # never taken: the await makes it a tool that may suspend (a cancel scope per round)
        await anyio.lowlevel.checkpoint()
    return a + b


def add_sync(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    COUNTERS["tool"] += 1
    return a + b


#: ``BENCH_TOOL=def`` makes the tool a plain ``def`` (a worker thread per
#: call), ``BENCH_TOOL=def-inline`` one with ``thread=False``,
#: ``BENCH_TOOL=async-may-suspend`` an ``async def`` with an ``await`` (on a
#: branch W1 never takes): its round runs in a cancel scope; by default it
#: is the ``async def`` above.
_TOOL_KINDS = {
    "": add,
    "async": add,
    "def": tool(add_sync, name="add"),
    "def-inline": tool(add_sync, name="add", thread=False),
    "async-may-suspend": add_may_suspend,
}


#: ``BENCH_SPLIT=1`` streams each tool call as live providers do: a start
#: chunk (id and name, no arguments), then its arguments in two pieces.
_SPLIT = os.environ.get("BENCH_SPLIT", "") == "1"


def next_turn(request: ModelRequest) -> int:
    """The turn index, read from the last message (no state kept between calls)."""
    last = request.messages[-1]
    if type(last) is ToolResult:
        return int(last.call_id.rsplit("_", 1)[1]) + 1
    return 0


class ScriptedModel:
    """Calls ``add`` on turns 0..turns-2 and answers "done" on the last turn.

    With ``stream_deltas`` set it instead streams that many "tok " chunks and
    stops. With ``checkpoint`` it yields to the scheduler once per call.
    """

    capabilities = ModelCapabilities(streaming=True, tools=True)
    provider = "scripted"
    model_id = "scripted-bench"

    def __init__(self, turns: int, stream_deltas: int = 0, checkpoint: bool = False) -> None:
        self.turns = turns
        self.stream_deltas = stream_deltas
        self.checkpoint = checkpoint

    def invoke(self, request: ModelRequest, cancel: object) -> AsyncIterator[ModelEvent]:
        COUNTERS["model"] += 1
        if self.stream_deltas:
            return self._stream(self.stream_deltas)
        return self._turn(next_turn(request))

    async def _turn(self, k: int) -> AsyncIterator[ModelEvent]:
        if self.checkpoint:
            await anyio.lowlevel.checkpoint()
        if k < self.turns - 1:
            if _SPLIT:  # as live providers stream a call: its start, then its arguments in pieces
                yield ToolCallChunk(0, f"call_{k}", "add", "")
                yield ToolCallChunk(0, None, None, '{"a": 1, ')
                yield ToolCallChunk(0, None, None, '"b": 2}')
            else:
                yield ToolCallChunk(0, f"call_{k}", "add", '{"a": 1, "b": 2}')
            yield Usage(1, 1)
            yield Finish(FinishReason.TOOL_CALLS)
        else:
            yield TextChunk("done")
            yield Usage(1, 1)
            yield Finish(FinishReason.STOP)

    async def _stream(self, n: int) -> AsyncIterator[ModelEvent]:
        chunk = TextChunk(C.W3_DELTA)
        for _ in range(n):
            yield chunk
        yield Usage(1, n)
        yield Finish(FinishReason.STOP)


def make_agent(model: ScriptedModel, turns: int) -> LlmAgent[Any]:
    return LlmAgent(
        name="bench",
        model=model,
        instructions=INSTRUCTIONS,
        tools=[_TOOL_KINDS[os.environ.get("BENCH_TOOL", "")]],
        config=RunConfig(max_turns=turns + 5),
    )


def run_loop(backend: str, main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` under trio or a plain asyncio event loop."""
    if backend == "trio":
        import trio

        return trio.run(main)
    import asyncio

    async def wrapper() -> T:
        return await main()

    return asyncio.run(wrapper())


async def gather(backend: str, coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Start every coroutine together and wait for all: a trio nursery or ``asyncio.gather``."""
    if backend == "asyncio":
        import asyncio

        return list(await asyncio.gather(*coros))
    import trio

    results: list[T | None] = [None] * len(coros)

    async def one(i: int, coro: Coroutine[Any, Any, T]) -> None:
        results[i] = await coro

    async with trio.open_nursery() as nursery:
        for i, coro in enumerate(coros):
            nursery.start_soon(one, i, coro)
    return [r for r in results if r is not None]


def check_tool_loop(result: RunResult[str], turns: int) -> None:
    """One W1/W2 run: T-1 tool outputs of "3", the answer "done", usage of T turns."""
    C.check(result.final_output == "done", f"final output {result.final_output!r}")
    outputs = [e.item.content for e in result.events if type(e) is ToolOutputItem]
    C.check(outputs == ["3"] * (turns - 1), f"tool outputs {outputs}")
    C.check(result.usage == Usage(turns, turns), f"usage {result.usage}")


def reset_counters() -> None:
    COUNTERS["tool"] = COUNTERS["model"] = 0


def check_counters(runs: int, turns: int) -> None:
    C.check(COUNTERS["tool"] == runs * (turns - 1), f"tool calls {COUNTERS} for {runs} runs of {turns} turns")
    C.check(COUNTERS["model"] == runs * turns, f"model calls {COUNTERS} for {runs} runs of {turns} turns")
    C.check(not C.NET_ATTEMPTS, f"network attempts: {C.NET_ATTEMPTS}")


def observer() -> Any:
    """W1's interpreter: ``None`` (the default live one), or with
    ``BENCH_OBSERVE=1`` the live one wrapped by an ``ObservingInterpreter``
    with no tracer provider configured (what "no overhead" is measured on),
    or with ``BENCH_OBSERVE=sdk`` one reporting to an OpenTelemetry SDK
    tracer provider that keeps every span in memory (for information)."""
    mode = os.environ.get("BENCH_OBSERVE", "")
    if not mode:
        return None
    from helikon.observability import ObservingInterpreter

    if mode != "sdk":
        return ObservingInterpreter()
    os.environ.pop("OTEL_SDK_DISABLED", None)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return ObservingInterpreter(tracer_provider=provider)


def w1(backend: str) -> None:
    turns, runs = C.T_W1, C.R_W1
    agent = make_agent(ScriptedModel(turns), turns)

    async def go() -> tuple[float, RunResult[str]]:
        for _ in range(C.WARMUP_W1):
            check_tool_loop(await collect(agent.run(None, "add things", interpreter=observer())), turns)
        reset_counters()
        t0 = time.perf_counter()
        for _ in range(runs):
            result = await collect(agent.run(None, "add things", interpreter=observer()))
        wall = time.perf_counter() - t0
        return wall, result

    wall, result = run_loop(backend, go)
    check_tool_loop(result, turns)
    check_counters(runs, turns)
    C.emit(
        SDK,
        "W1",
        "us_per_model_turn",
        round(wall / (runs * turns) * 1e6, 2),
        "us",
        backend=backend,
        runs=runs,
        turns=turns,
        observe=os.environ.get("BENCH_OBSERVE", ""),
        tool=os.environ.get("BENCH_TOOL", "async") or "async",
        tool_calls=COUNTERS["tool"],
        model_calls=COUNTERS["model"],
        total_wall_s=round(wall, 4),
        net_attempts=len(C.NET_ATTEMPTS),
    )


def _w2(backend: str, workload: str, checkpoint: bool) -> None:
    turns, runs = C.T_W2, C.C_W2
    agent = make_agent(ScriptedModel(turns, checkpoint=checkpoint), turns)
    live = {"now": 0, "max": 0}

    async def one(i: int) -> RunResult[str]:
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        result = await collect(agent.run(None, f"run {i}"))
        live["now"] -= 1
        return result

    async def go() -> tuple[float, float, float, float, list[RunResult[str]]]:
        check_tool_loop(await collect(agent.run(None, "warm")), turns)
        reset_counters()
        live["max"] = 0
        rss_before = C.rss_now_mib()
        peak_before = C.peak_rss_mib()
        t0 = time.perf_counter()
        results = await gather(backend, [one(i) for i in range(runs)])
        wall = time.perf_counter() - t0
        rss_after = C.rss_now_mib()
        return wall, rss_before, rss_after, peak_before, results

    wall, rss_before, rss_after, peak_before, results = run_loop(backend, go)
    peak = C.peak_rss_mib()
    C.check(len(results) == runs, f"{len(results)} results for {runs} runs")
    for result in results:
        check_tool_loop(result, turns)
    check_counters(runs, turns)
    C.emit(
        SDK,
        workload,
        "total_wall_s",
        round(wall, 4),
        "s",
        backend=backend,
        runs=runs,
        turns=turns,
        tool_calls=COUNTERS["tool"],
        model_calls=COUNTERS["model"],
        max_in_flight=live["max"],
        gc_enabled=gc.isenabled(),
        net_attempts=len(C.NET_ATTEMPTS),
    )
    C.emit(SDK, workload, "rss_before_mib", round(rss_before, 1), "MiB", backend=backend)
    C.emit(SDK, workload, "rss_after_mib", round(rss_after, 1), "MiB", backend=backend)
    C.emit(SDK, workload, "rss_growth_mib", round(rss_after - rss_before, 1), "MiB", backend=backend)
    C.emit(
        SDK,
        workload,
        "peak_rss_mib",
        round(peak, 1),
        "MiB",
        backend=backend,
        peak_before_mib=round(peak_before, 1),
    )


def w2(backend: str) -> None:
    _w2(backend, "W2", checkpoint=False)


def w2i(backend: str) -> None:
    _w2(backend, "W2i", checkpoint=True)


def w3(backend: str) -> None:
    n = C.N_W3
    model = ScriptedModel(1)
    agent = make_agent(model, 1)

    async def one(deltas_wanted: int) -> tuple[str | None, list[str], int, int, bool]:
        model.stream_deltas = deltas_wanted
        parts: list[str] = []
        total = chars = 0
        final: str | None = None
        completed = False
        async for event in agent.run(None, "stream"):
            total += 1
            kind = type(event)
            if kind is TokenDelta:
                parts.append(event.text)
                chars += len(event.text)
            elif kind is MessageOutput:
                final = text_of(event.item.content)
            elif kind is RunCompleted:
                completed = True
            elif kind is RunFailed:
                raise C.BenchFailure(f"W3 run failed: {event}")
        return final, parts, total, chars, completed

    async def go() -> tuple[float, str | None, list[str], int, int, bool]:
        await one(10)
        reset_counters()
        t0 = time.perf_counter()
        res = await one(n)
        return (time.perf_counter() - t0, *res)

    wall, final, parts, total, chars, completed = run_loop(backend, go)
    deltas = len(parts)
    C.check(completed, "W3 run did not complete")
    C.check(deltas == n, f"{deltas} deltas, expected {n}")
    C.check(chars == n * len(C.W3_DELTA), f"{chars} characters, expected {n * len(C.W3_DELTA)}")
    C.check(final == "".join(parts) == C.W3_DELTA * n, "final output differs from the streamed text")
    C.check(COUNTERS["model"] == 1 and not C.NET_ATTEMPTS, f"{COUNTERS}, network {C.NET_ATTEMPTS}")
    C.emit(
        SDK,
        "W3",
        "text_deltas_per_s",
        round(deltas / wall, 1),
        "events/s",
        backend=backend,
        deltas=deltas,
        chars=chars,
        events_total=total,
        all_events_per_s=round(total / wall, 1),
        wall_s=round(wall, 4),
        api="agent.run() async iterator",
        net_attempts=len(C.NET_ATTEMPTS),
    )


def w4() -> None:
    for stmt in IMPORT_STMTS:
        median, samples = C.time_import(stmt)
        C.emit(
            SDK,
            "W4",
            "import_ms_median",
            round(median, 1),
            "ms",
            stmt=stmt,
            samples=[round(s, 1) for s in samples],
        )


if __name__ == "__main__":
    C.main(SDK, {"W1": w1, "W2": w2, "W2i": w2i, "W3": w3}, {"W4": w4}, os.path.abspath(__file__))
