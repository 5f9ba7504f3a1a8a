"""A run's events a step at a time: :class:`helikon._stream.RunEvents`.

``drive_batches`` gives each outcome's events as one tuple (a live event as
a tuple of one); ``agent.run`` and ``drive`` hand them out one at a time
over it, and ``collect`` drains whole steps. What a caller sees — the
events, their order, when a model's deltas arrive, closing, errors,
cancellation — is what the async generator it replaces gave.
"""

from __future__ import annotations

import gc
import inspect
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, nullcontext
from typing import Any

import anyio
import pytest
import trio

from helikon import (
    AgentEvent,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunContext,
    RunStarted,
    RunSuspended,
    TokenDelta,
    collect,
    tool,
)
from helikon._stream import RunEvents
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter, drive
from helikon.interpreters._scripted import iterate_sync
from helikon.model import Finish, FinishReason, ModelCapabilities, ModelEvent, ModelRequest, TextChunk, Usage
from helikon.testing import MockModel, call_tools, say

BACKENDS = ["trio", "asyncio"]


# -- the iterator over batches ------------------------------------------------------------------


class Steps:
    """A generator of steps (tuples of events, or bare events) that notes how it ended."""

    def __init__(self, *steps: Any, error: BaseException | None = None) -> None:
        self.steps = steps
        self.error = error
        self.ended: str | None = None

    async def run(self) -> AsyncGenerator[Any, None]:
        try:
            for step in self.steps:
                yield step
            if self.error is not None:
                raise self.error
            self.ended = "done"
        except GeneratorExit:
            self.ended = "closed"
            raise


def test_events_come_one_at_a_time_in_order_and_empty_batches_are_skipped() -> None:
    steps = Steps(("a", "b"), (), "c", ("d",), ("e", "f", "g"))

    async def main() -> list[Any]:
        return [event async for event in RunEvents(steps.run())]

    assert anyio.run(main) == ["a", "b", "c", "d", "e", "f", "g"]
    assert steps.ended == "done"


def test_it_is_an_async_generator_of_events() -> None:
    from collections.abc import AsyncGenerator as Abstract

    events = RunEvents(Steps().run())
    assert isinstance(events, Abstract)
    anyio.run(events.aclose)


def test_an_error_comes_after_the_events_before_it() -> None:
    steps = Steps(("a", "b"), ("c",), error=KeyError("boom"))
    seen: list[Any] = []

    async def main() -> None:
        async for event in RunEvents(steps.run()):
            seen.append(event)

    with pytest.raises(KeyError, match="boom"):
        anyio.run(main)
    assert seen == ["a", "b", "c"]


def test_the_stream_is_over_after_an_error() -> None:
    async def main() -> None:
        events = RunEvents(Steps(("a",), error=KeyError("boom")).run())
        assert await events.__anext__() == "a"
        with pytest.raises(KeyError):
            await events.__anext__()
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()

    anyio.run(main)


def test_closing_mid_batch_drops_the_rest_and_closes_the_generator() -> None:
    steps = Steps(("a", "b", "c"), ("d",))

    async def main() -> list[Any]:
        seen = []
        async with aclosing(RunEvents(steps.run())) as events:
            async for event in events:
                seen.append(event)
                if event == "b":
                    break
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
        return seen

    assert anyio.run(main) == ["a", "b"]
    assert steps.ended == "closed"


def test_athrow_raises_the_error_where_the_run_waits_and_closes_it() -> None:
    steps = Steps(("a", "b"), ("c",))

    async def main() -> None:
        events = RunEvents(steps.run())
        assert await events.__anext__() == "a"
        with pytest.raises(KeyError):
            await events.athrow(KeyError("k"))
        with pytest.raises(StopAsyncIteration):
            await events.asend(None)

    anyio.run(main)
    assert steps.ended == "closed"


def test_athrow_in_its_old_three_argument_form() -> None:
    async def main() -> None:
        events = RunEvents(Steps(("a", "b")).run())
        await events.__anext__()
        with pytest.raises(KeyError):
            await events.athrow(KeyError, KeyError("k"), None)

    with pytest.warns(DeprecationWarning) if sys.version_info >= (3, 12) else nullcontext():
        anyio.run(main)


def test_async_for_iterates_a_native_async_generator() -> None:
    events = RunEvents(Steps(("a",)).run())
    inner = events.__aiter__()
    assert inspect.isasyncgen(inner) and events.__aiter__() is inner
    anyio.run(events.aclose)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_dropped_unclosed_is_finalized_at_once(backend: str) -> None:
    steps = Steps(("a", "b"), ("c",))

    async def main() -> None:
        events = RunEvents(steps.run())
        assert await events.__anext__() == "a"
        del events  # no reference cycle: the event loop's finalizer closes it, no collector needed
        for _ in range(5):
            await anyio.sleep(0)
        assert steps.ended == "closed"  # before the loop ends (it closes every generator left then)

    gc.disable()
    try:
        anyio.run(main, backend=backend)
    finally:
        gc.enable()


def test_batches_are_the_steps_until_events_are_taken_one_at_a_time() -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        whole = [step async for step in RunEvents(Steps(("a", "b"), "c", ("d",)).run()).batches()]
        events = RunEvents(Steps(("a", "b", "c"), ("d",)).run())
        assert await events.__anext__() == "a"
        return whole, [step async for step in events.batches()]

    whole, rest = anyio.run(main)
    assert whole == [("a", "b"), "c", ("d",)]
    assert rest == [("b",), ("c",), ("d",)]


def test_closing_the_batches_closes_the_run() -> None:
    steps = Steps(("a", "b"), ("c",))

    async def main() -> None:
        events = RunEvents(steps.run())
        await events.__anext__()
        async with aclosing(events.batches()) as batches:
            async for _ in batches:
                break

    anyio.run(main)
    assert steps.ended == "closed"


def test_a_stream_that_never_waits_iterates_without_an_event_loop() -> None:
    assert list(iterate_sync(RunEvents(Steps(("a", "b"), "c").run()))) == ["a", "b", "c"]


def test_a_stream_started_lazily_makes_its_generator_at_the_first_event() -> None:
    made: list[Steps] = []

    def start() -> AsyncGenerator[Any, None]:
        made.append(Steps(("a", "b"), ("c",)))
        return made[-1].run()

    async def main() -> list[Any]:
        events = RunEvents.starting(start)
        assert not made
        return [event async for event in events]

    assert anyio.run(main) == ["a", "b", "c"] and len(made) == 1


def test_a_lazy_stream_whose_start_fails_raises_it_first_then_is_over() -> None:
    def start() -> AsyncGenerator[Any, None]:
        raise LookupError("no environment")

    async def main() -> None:
        events = RunEvents.starting(start)
        with pytest.raises(LookupError):
            await events.__anext__()
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
        with pytest.raises(LookupError):
            RunEvents.starting(start).batches()

    anyio.run(main)


def test_a_lazy_stream_closed_or_thrown_into_before_it_starts_never_starts() -> None:
    def start() -> AsyncGenerator[Any, None]:
        raise AssertionError("started")

    async def main() -> None:
        closed = RunEvents.starting(start)
        await closed.aclose()
        with pytest.raises(StopAsyncIteration):
            await closed.__anext__()
        thrown = RunEvents.starting(start)
        with pytest.raises(KeyError):
            await thrown.athrow(KeyError("k"))
        with pytest.raises(StopAsyncIteration):
            await thrown.__anext__()

    anyio.run(main)


def test_collect_starts_a_lazy_stream_and_takes_its_batches() -> None:
    steps = Steps((RunStarted("a", RunId("r")),), (RunCompleted(Usage()),))

    async def main() -> Any:
        return await collect(RunEvents.starting(steps.run))

    result = anyio.run(main)
    assert [type(e) for e in result.events] == [RunStarted, RunCompleted]


# -- agent.run ------------------------------------------------------------------------------------


@tool
async def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: one.
        b: another.
    """
    return a + b


def adder() -> LlmAgent[Any]:
    script = [
        call_tools(("c0", "add", {"a": 1, "b": 2})),
        call_tools(("c1", "add", {"a": 3, "b": 4})),
        say("it is ten"),
    ]
    return LlmAgent(name="adder", model=MockModel(script), tools=[add])


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_event_consumers_and_collect_see_the_same_events(backend: str) -> None:
    async def main() -> tuple[list[AgentEvent], list[AgentEvent], list[AgentEvent]]:
        one_by_one = [event async for event in adder().run(None, "sum", run_id="r")]
        collected = await collect(adder().run(None, "sum", run_id="r"))
        env_free: list[AgentEvent] = []
        stream = adder().run(None, "sum", run_id="r")
        env_free.append(await stream.__anext__())  # partly consumed, then collected
        env_free.extend((await collect(stream)).events)
        return one_by_one, list(collected.events), env_free

    one_by_one, collected, partly = anyio.run(main, backend=backend)
    assert one_by_one == collected == partly
    assert type(one_by_one[0]) is RunStarted and type(one_by_one[-1]) is RunCompleted
    assert any(type(e) is MessageOutput for e in one_by_one)


def test_agent_run_is_a_run_events_stream() -> None:
    stream = adder().run(None, "sum")
    assert isinstance(stream, RunEvents)
    anyio.run(stream.aclose)


class GatedModel:
    """Streams "a", then waits for ``gate`` before "b": a delta the caller
    does not get at once would never open it. Notes whether it was closed."""

    capabilities = ModelCapabilities(streaming=True, tools=True)
    provider = "gated"
    model_id = "gated"

    def __init__(self) -> None:
        self.gate: anyio.Event | None = None
        self.closed = False

    async def invoke(self, request: ModelRequest, cancel: Any) -> AsyncIterator[ModelEvent]:
        try:
            yield TextChunk("a")
            assert self.gate is not None
            await self.gate.wait()
            yield TextChunk("b")
            yield Finish(FinishReason.STOP)
        finally:
            self.closed = True


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_models_deltas_stream_one_at_a_time_as_they_come(backend: str) -> None:
    model = GatedModel()

    async def main() -> list[AgentEvent]:
        model.gate = anyio.Event()
        seen = []
        with anyio.fail_after(10):
            async for event in LlmAgent(name="g", model=model).run(None, "hi"):
                seen.append(event)
                if type(event) is TokenDelta and event.text == "a":
                    model.gate.set()
        return seen

    seen = anyio.run(main, backend=backend)
    assert [e.text for e in seen if type(e) is TokenDelta] == ["a", "b"]
    assert type(seen[-1]) is RunCompleted


class FailingCloseModel(GatedModel):
    """A ``GatedModel`` whose stream fails as it is closed (a connection
    reset while its response is released, say)."""

    async def invoke(self, request: ModelRequest, cancel: Any) -> AsyncIterator[ModelEvent]:
        try:
            yield TextChunk("a")
            assert self.gate is not None
            await self.gate.wait()
            yield Finish(FinishReason.STOP)
        finally:
            self.closed = True
            raise OSError("connection reset while closing")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [GatedModel, FailingCloseModel])
def test_a_run_closed_mid_turn_is_over_and_its_models_stream_closed_at_once(
    backend: str, make: type[GatedModel]
) -> None:
    # The run is over either way: as when the collector closed the model's
    # stream, a failure closing it does not become the caller's (it was a
    # RuntimeError, "async generator ignored GeneratorExit").
    model = make()

    async def main() -> None:
        model.gate = anyio.Event()
        async with aclosing(LlmAgent(name="g", model=model).run(None, "hi")) as events:
            async for event in events:
                if type(event) is TokenDelta:
                    break
        assert model.closed  # by the close, not by the collector (switched off here)
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()

    gc.disable()
    try:
        anyio.run(main, backend=backend)
    finally:
        gc.enable()


class FailsAsClosed:
    """The live interpreter, whose effect streams fail as they are closed."""

    def __init__(self) -> None:
        self.inner = LiveInterpreter()
        self.failed = 0

    def new_run_id(self) -> RunId:
        return self.inner.new_run_id()

    async def perform(self, effect: Any, env: Any) -> AsyncGenerator[Any, None]:
        try:
            async for item in self.inner.perform(effect, env):
                yield item
        except GeneratorExit:
            self.failed += 1
            raise OSError("failed as closed") from None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_closed_mid_effect_whose_stream_fails_to_close_closes_quietly(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    model, interpreter = GatedModel(), FailsAsClosed()

    async def main() -> None:
        model.gate = anyio.Event()
        run = LlmAgent(name="g", model=model).run(None, "hi", interpreter=interpreter)
        async with aclosing(run) as events:
            async for event in events:
                if type(event) is TokenDelta:
                    break

    anyio.run(main, backend=backend)
    assert interpreter.failed == 1 and model.closed
    assert "OSError: failed as closed" in caplog.text  # logged, as the collector would have


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_cancelled_while_it_waits_ends_and_is_over(backend: str) -> None:
    model = GatedModel()

    async def main() -> None:
        model.gate = anyio.Event()
        stream = LlmAgent(name="g", model=model).run(None, "hi")
        seen = []
        with anyio.move_on_after(0.05) as scope:
            async for event in stream:
                seen.append(event)
        assert scope.cancelled_caught
        assert model.closed
        assert [e.text for e in seen if type(e) is TokenDelta] == ["a"]
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()

    anyio.run(main, backend=backend)


@tool
async def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: dollars.
    """
    return f"paid {amount}"


def suspending(session: Any = None) -> RunContext[None]:
    from helikon.governance import AskUser

    ctx: RunContext[None] = RunContext.ephemeral(None).with_session(session)
    return ctx.with_permission_policy(lambda c, t, a: AskUser("Pay?")).with_suspend_on_approval()


@pytest.mark.parametrize("with_session", [False, True])
def test_run_suspended_is_raised_from_the_iterator_after_the_events_before_it(with_session: bool) -> None:
    from helikon.sessions import MemorySession

    session = MemorySession() if with_session else None
    model = MockModel([call_tools(("c1", "pay", {"amount": 5}))])
    agent = LlmAgent[None](name="clerk", model=model, tools=[pay])
    seen: list[AgentEvent] = []

    async def main() -> None:
        async for event in agent.run(suspending(session), "go"):
            seen.append(event)

    with pytest.raises(RunSuspended):
        trio.run(main)
    assert type(seen[0]) is RunStarted and not any(type(e) is RunCompleted for e in seen)
    if session is not None:
        logged = trio.run(session.events)
        assert [type(e).__name__ for e in logged] == ["UserMessageEvent", "ToolCallRecorded"]


def test_a_session_run_closed_early_records_what_its_caller_was_given() -> None:
    from helikon.sessions import MemorySession

    session = MemorySession()
    agent = LlmAgent[None](name="w", model=MockModel([say("hello there")]))
    ctx: RunContext[None] = RunContext.ephemeral(None).with_session(session)

    async def main() -> None:
        async with aclosing(agent.run(ctx, "hi")) as events:
            async for event in events:
                if type(event) is RunStarted:
                    break

    trio.run(main)
    logged = trio.run(session.events)
    assert [type(e).__name__ for e in logged] == ["UserMessageEvent"]


class Source:
    """A tool source that supplies ``add``."""

    async def resolve_tools(self) -> Sequence[Any]:
        return [add]


def test_an_agent_with_tool_sources_streams_and_collects_the_same_events() -> None:
    def agent() -> LlmAgent[Any]:
        return LlmAgent[Any](
            name="adder",
            model=MockModel([call_tools(("c0", "add", {"a": 1, "b": 2})), say("three")]),
            tool_sources=[Source()],
        )

    async def main() -> tuple[list[AgentEvent], list[AgentEvent]]:
        one_by_one = [event async for event in agent().run(None, "sum", run_id="r")]
        collected = await collect(agent().run(None, "sum", run_id="r"))
        return one_by_one, list(collected.events)

    one_by_one, collected = trio.run(main)
    assert one_by_one == collected and type(one_by_one[-1]) is RunCompleted


def test_drive_gives_the_same_events_as_agent_run() -> None:
    from helikon.agent import environment
    from helikon.items import AgentInput

    async def main() -> tuple[list[AgentEvent], list[AgentEvent]]:
        by_agent = [event async for event in adder().run(None, "sum", run_id="r")]
        interpreter = LiveInterpreter("r")
        agent = adder()
        env = environment(agent, RunContext.ephemeral(None), interpreter)
        by_drive = [event async for event in drive(interpreter, env, AgentInput.from_user_text("sum"))]
        return by_agent, by_drive

    by_agent, by_drive = trio.run(main)
    assert by_agent == by_drive
