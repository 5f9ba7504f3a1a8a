"""The live interpreter, under trio and under asyncio, with real concurrency,
real cancellation and real timeouts (nothing here is mocked but the model,
which is a scripted :class:`MockModel`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
import pytest

from helikon import (
    AgentEvent,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunConfig,
    RunContext,
    RunError,
    RunFailed,
    TokenDelta,
    ToolContext,
    ToolOutputItem,
    collect,
    tool,
)
from helikon.errors import Cancelled, ModelError, ModelFailed, RateLimited, TimedOut
from helikon.interpreters import LiveInterpreter
from helikon.model import ToolEffect
from helikon.testing import MockModel, Pause, call_tools, say
from helikon.tools._decorator import at_once

BACKENDS = ["trio", "asyncio"]
pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def run_on(backend: str, fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn, backend=backend)


class InFlight:
    """Counts tool calls running at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.finished: list[int] = []


def probe_tool(flight: InFlight) -> Any:
    @tool
    async def probe(i: int, delay_ms: int) -> int:
        """Sleep a while and report which call this was.

        Args:
            i: the call's number.
            delay_ms: how long to sleep.
        """
        flight.now += 1
        flight.peak = max(flight.peak, flight.now)
        try:
            await anyio.sleep(delay_ms / 1000)
        finally:
            flight.now -= 1
        flight.finished.append(i)
        return i

    return probe


async def events_of(agent: LlmAgent[Any], ctx: RunContext[Any] | None = None, **kw: Any) -> list[AgentEvent]:
    return [event async for event in agent.run(ctx, "go", **kw)]


def test_tools_of_a_turn_run_concurrently_under_the_limit(backend: str) -> None:
    flight = InFlight()
    calls = [("probe", {"i": i, "delay_ms": 20}) for i in range(6)]
    model = MockModel([call_tools(*calls), say("done")])
    agent = LlmAgent(name="a", model=model, tools=[probe_tool(flight)])

    events = run_on(backend, lambda: events_of(agent, config=RunConfig(parallel_tool_call_limit=2)))

    assert flight.peak == 2
    assert type(events[-1]) is RunCompleted


def test_unbounded_tools_all_run_at_once(backend: str) -> None:
    flight = InFlight()
    calls = [("probe", {"i": i, "delay_ms": 20}) for i in range(6)]
    agent = LlmAgent(name="a", model=MockModel([call_tools(*calls), say("done")]), tools=[probe_tool(flight)])

    run_on(backend, lambda: events_of(agent))

    assert flight.peak == 6


def test_results_enter_in_call_order_whatever_order_they_finish(backend: str) -> None:
    flight = InFlight()
    delays = [60, 10, 40, 0, 25]
    calls = [("probe", {"i": i, "delay_ms": d}) for i, d in enumerate(delays)]
    agent = LlmAgent(name="a", model=MockModel([call_tools(*calls), say("done")]), tools=[probe_tool(flight)])

    events = run_on(backend, lambda: events_of(agent))

    assert flight.finished != sorted(flight.finished)  # they did finish out of order
    outputs = [e.item.content for e in events if type(e) is ToolOutputItem]
    assert outputs == ["0", "1", "2", "3", "4"]


def test_deltas_stream_before_the_turn_settles(backend: str) -> None:
    model = MockModel([[*say("first ")[:-1], Pause(0.2), *say("second")]])
    agent = LlmAgent(name="a", model=model)
    seen: list[tuple[str, float]] = []

    async def consume() -> None:
        t0 = time.perf_counter()
        async for event in agent.run(None, "go"):
            seen.append((type(event).__name__, time.perf_counter() - t0))

    run_on(backend, consume)

    first_delta = next(t for name, t in seen if name == "TokenDelta")
    message = next(t for name, t in seen if name == "MessageOutput")
    assert message - first_delta >= 0.15


def test_cancel_mid_stream_ends_the_run_promptly(backend: str) -> None:
    ctx = RunContext.ephemeral(None)
    agent = LlmAgent(name="a", model=MockModel([[*say("a b")[:-1], Pause(30), *say("c")]]))

    async def scenario() -> tuple[list[AgentEvent], float]:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as group:

            async def cancel_soon() -> None:
                await anyio.sleep(0.05)
                ctx.cancel.cancel()

            group.start_soon(cancel_soon)
            events = await events_of(agent, ctx)
        return events, time.perf_counter() - t0

    events, elapsed = run_on(backend, scenario)

    assert elapsed < 2
    assert [type(e) for e in events].count(RunFailed) == 1
    assert events[-1] == RunFailed(Cancelled())
    assert [e for e in events if type(e) is TokenDelta] == [TokenDelta("a "), TokenDelta("b")]


def test_cancel_mid_tool_ends_the_run_promptly(backend: str) -> None:
    ctx = RunContext.ephemeral(None)

    @tool
    async def stall(tctx: ToolContext[None]) -> str:
        """Wait for a long time."""
        tctx.cancel.cancel()  # the tool itself asks to stop, then blocks
        await anyio.sleep(30)
        return "never"

    agent = LlmAgent(name="a", model=MockModel([call_tools(("stall", {})), say("never")]), tools=[stall])

    async def scenario() -> tuple[list[AgentEvent], float]:
        t0 = time.perf_counter()
        events = await events_of(agent, ctx)
        return events, time.perf_counter() - t0

    events, elapsed = run_on(backend, scenario)

    assert elapsed < 2
    assert events[-1] == RunFailed(Cancelled())
    assert not any(type(e) is ToolOutputItem for e in events)


def test_a_tool_that_never_awaits_and_cancels_the_run_ends_it(backend: str) -> None:
    # Performed without a cancel scope (it cannot suspend): the token it
    # fired still ends the run, and its output is dropped as it was before.
    ctx = RunContext.ephemeral(None)

    @tool
    async def stop(tctx: ToolContext[None]) -> str:
        """Stop the run."""
        tctx.cancel.cancel()
        return "stopped"

    agent = LlmAgent(name="a", model=MockModel([call_tools(("stop", {})), say("never")]), tools=[stop])

    events = run_on(backend, lambda: events_of(agent, ctx))

    assert events[-1] == RunFailed(Cancelled())
    assert not any(type(e) is ToolOutputItem for e in events)


def test_tools_that_never_await_answer_as_awaiting_ones_do(backend: str) -> None:
    @tool
    async def quick(tctx: ToolContext[None], n: int) -> dict[str, Any]:
        """Answer at once.

        Args:
            n: a number.
        """
        if n < 0:
            raise ValueError("negative")
        tctx.actions.escalate()
        return {"b": n, "a": [tctx.call_id]}

    @tool
    async def slow(tctx: ToolContext[None], n: int) -> dict[str, Any]:
        """Answer after a checkpoint.

        Args:
            n: a number.
        """
        await anyio.sleep(0)
        if n < 0:
            raise ValueError("negative")
        tctx.actions.escalate()
        return {"b": n, "a": [tctx.call_id]}

    async def scenario(which: Any) -> list[AgentEvent]:
        script = [call_tools(("f", {"n": 2})), call_tools(("f", {"n": -1})), say("done")]
        agent = LlmAgent(name="a", model=MockModel(script), tools=[tool(which, name="f")])
        return await events_of(agent, RunContext.ephemeral(None), interpreter=LiveInterpreter(run_id="r"))

    assert at_once(quick) is not None and at_once(slow) is None  # the two paths of a tool round
    assert run_on(backend, lambda: scenario(quick)) == run_on(backend, lambda: scenario(slow))


def test_timeout_interrupts_a_slow_tool(backend: str) -> None:
    flight = InFlight()
    model = MockModel([call_tools(("probe", {"i": 0, "delay_ms": 30_000})), say("never")])
    agent = LlmAgent(name="a", model=model, tools=[probe_tool(flight)], config=RunConfig(timeout=0.1))

    async def scenario() -> tuple[list[AgentEvent], float]:
        t0 = time.perf_counter()
        events = await events_of(agent)
        return events, time.perf_counter() - t0

    events, elapsed = run_on(backend, scenario)

    assert 0.09 < elapsed < 2
    assert type(events[-1]) is RunFailed and events[-1].error == TimedOut(0.1)


def test_timeout_interrupts_a_stalled_model_stream(backend: str) -> None:
    agent = LlmAgent(name="a", model=MockModel([[*say("a")[:-1], Pause(30)]]), config=RunConfig(timeout=0.1))

    events = run_on(backend, lambda: events_of(agent))

    assert type(events[-1]) is RunFailed and events[-1].error == TimedOut(0.1)


def test_a_terminal_event_that_happened_wins_over_a_late_cancel(backend: str) -> None:
    ctx = RunContext.ephemeral(None)
    agent = LlmAgent(name="a", model=MockModel([say("all done")]))

    async def scenario() -> list[AgentEvent]:
        events = []
        async for event in agent.run(ctx, "go"):
            events.append(event)
            if type(event) is MessageOutput:
                ctx.cancel.cancel()
        return events

    events = run_on(backend, scenario)

    assert type(events[-1]) is RunCompleted


def test_a_tool_that_raises_becomes_an_error_result(backend: str) -> None:
    @tool
    def divide(a: int, b: int) -> float:
        """Divide a by b.

        Args:
            a: dividend.
            b: divisor.
        """
        return a / b

    model = MockModel([call_tools(("divide", {"a": 1, "b": 0})), say("cannot divide by zero")])
    agent = LlmAgent(name="a", model=model, tools=[divide])

    result = run_on(backend, lambda: collect(agent.run(None, "1/0?")))

    (output,) = [e.item for e in result.events if type(e) is ToolOutputItem]
    assert output.is_error and "ZeroDivisionError" in output.content
    assert result.final_output == "cannot divide by zero"


def test_sync_tools_run_in_a_worker_thread(backend: str) -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "ok"

    agent = LlmAgent(name="a", model=MockModel([call_tools(("where", {})), say("ok")]), tools=[where])

    run_on(backend, lambda: collect(agent.run(None, "go")))

    assert threads and threads[0] != threading.get_ident()


def blocking_tool(release: threading.Event, started: threading.Event) -> Any:
    @tool
    def block() -> str:
        """Block the calling thread (as time.sleep(30) would) until released."""
        started.set()
        release.wait(30)
        return "late"

    return block


def test_a_timeout_abandons_a_blocking_sync_tool(backend: str) -> None:
    release, started = threading.Event(), threading.Event()
    model = MockModel([call_tools(("block", {})), say("never")])
    agent = LlmAgent(
        name="a", model=model, tools=[blocking_tool(release, started)], config=RunConfig(timeout=2)
    )

    async def scenario() -> tuple[list[AgentEvent], float]:
        t0 = time.perf_counter()
        events = await events_of(agent)
        return events, time.perf_counter() - t0

    try:
        events, elapsed = run_on(backend, scenario)
    finally:
        release.set()  # let the abandoned thread end

    assert started.is_set()
    assert 1.9 < elapsed < 4
    assert type(events[-1]) is RunFailed and events[-1].error == TimedOut(2)
    assert not any(type(e) is ToolOutputItem for e in events)


def test_a_cancel_abandons_a_blocking_sync_tool(backend: str) -> None:
    release, started = threading.Event(), threading.Event()
    ctx = RunContext.ephemeral(None)
    model = MockModel([call_tools(("block", {})), say("never")])
    agent = LlmAgent(name="a", model=model, tools=[blocking_tool(release, started)])

    async def scenario() -> tuple[list[AgentEvent], float]:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as group:

            async def cancel_once_started() -> None:
                while not started.is_set():
                    await anyio.sleep(0.01)
                ctx.cancel.cancel()

            group.start_soon(cancel_once_started)
            events = await events_of(agent, ctx)
        return events, time.perf_counter() - t0

    try:
        events, elapsed = run_on(backend, scenario)
    finally:
        release.set()

    assert elapsed < 2
    assert events[-1] == RunFailed(Cancelled())
    assert not any(type(e) is ToolOutputItem for e in events)


def test_a_sync_tool_with_thread_false_runs_on_the_event_loop(backend: str) -> None:
    threads: list[int] = []

    @tool(thread=False)
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "ok"

    agent = LlmAgent(name="a", model=MockModel([call_tools(("where", {})), say("ok")]), tools=[where])

    result = run_on(backend, lambda: collect(agent.run(None, "go")))

    assert threads == [threading.get_ident()]
    (output,) = [e.item for e in result.events if type(e) is ToolOutputItem]
    assert output.content == "ok" and not output.is_error


def test_a_tool_returning_bytes_fails_naming_the_tool_and_the_type(backend: str) -> None:
    @tool
    async def raw() -> Any:
        """Return raw bytes."""
        return {"blob": b"\x00\x01"}

    model = MockModel([call_tools(("raw", {})), say("that failed")])
    agent = LlmAgent(name="a", model=model, tools=[raw])

    result = run_on(backend, lambda: collect(agent.run(None, "go")))

    (output,) = [e.item for e in result.events if type(e) is ToolOutputItem]
    assert output.is_error
    assert "tool 'raw'" in output.content and "bytes" in output.content and "$.blob" in output.content
    assert "AAE=" not in output.content  # not base64 in disguise


class RawTool:
    """A hand-written tool (no @tool) that returns bytes."""

    name = "raw_bytes"
    description = "Return raw bytes."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    output_schema = None
    effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: ToolContext[Any], args: Any) -> Any:
        return b"\x00\x01"


def test_a_hand_written_tool_returning_bytes_fails_naming_it(backend: str) -> None:
    model = MockModel([call_tools(("raw_bytes", {})), say("that failed")])
    agent = LlmAgent(name="a", model=model, tools=[RawTool()])

    result = run_on(backend, lambda: collect(agent.run(None, "go")))

    (output,) = [e.item for e in result.events if type(e) is ToolOutputItem]
    assert output.is_error and "tool 'raw_bytes'" in output.content and "bytes" in output.content
    assert "AAE=" not in output.content


def test_a_model_error_fails_the_run_with_it(backend: str) -> None:
    model = MockModel([[*say("partial")[:-1], ModelError.rate_limited("slow down", retry_after_ms=500)]])
    agent = LlmAgent(name="a", model=model)

    with pytest.raises(RunError) as info:
        run_on(backend, lambda: collect(agent.run(None, "go")))

    assert info.value.error == ModelFailed(RateLimited("slow down", 500))
    assert type(info.value.events[-1]) is RunFailed


def test_dynamic_instructions_see_the_run_context(backend: str) -> None:
    model = MockModel([say("hi Ada")])
    agent = LlmAgent(name="a", model=model, instructions=lambda ctx: f"The user is {ctx.user_ctx['name']}.")

    run_on(backend, lambda: collect(agent.run(RunContext.ephemeral({"name": "Ada"}), "hello")))

    assert model.requests[0].instructions == "The user is Ada."


def test_async_dynamic_instructions_are_awaited(backend: str) -> None:
    model = MockModel([say("ok")])

    async def instructions(ctx: RunContext[int]) -> str:
        await anyio.sleep(0)
        return f"turn budget {ctx.user_ctx}"

    agent = LlmAgent(name="a", model=model, instructions=instructions)
    run_on(backend, lambda: collect(agent.run(RunContext.ephemeral(3), "hello")))

    assert model.requests[0].instructions == "turn budget 3"


def scripted_agent() -> LlmAgent[Any]:
    @tool
    async def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: first.
            b: second.
        """
        await anyio.sleep(0.001 * a)
        return a + b

    model = MockModel(
        [
            call_tools(
                ("add", {"a": 3, "b": 1}), ("add", {"a": 1, "b": 1}), ("nope", {}), text="Let me add."
            ),
            call_tools(("add", {"a": "x"})),
            say("4 and 2"),
        ]
    )
    return LlmAgent(name="calc", model=model, instructions="add things", tools=[add])


def test_the_same_run_gives_identical_events_under_trio_and_asyncio(backend: str) -> None:
    # One run per backend; the parametrization makes this run twice, and
    # each compares against the other backend.
    other = "asyncio" if backend == "trio" else "trio"
    mine = run_on(backend, lambda: events_of(scripted_agent(), interpreter=LiveInterpreter("run-x")))
    theirs = run_on(other, lambda: events_of(scripted_agent(), interpreter=LiveInterpreter("run-x")))

    assert mine == theirs
    assert type(mine[-1]) is RunCompleted
