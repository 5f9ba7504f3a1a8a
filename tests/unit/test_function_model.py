"""``FunctionModel``: a model whose every turn is a function of the request."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from helikon import LlmAgent, RunConfig, RunContext, RunFailed, collect, tool
from helikon.cancel import CancellationToken
from helikon.errors import ModelError, ModelFailed, RunError, TimedOut, Unavailable
from helikon.events import TokenDelta, ToolOutputItem
from helikon.ids import CallId
from helikon.items import ToolCall, ToolResult, user_text
from helikon.loop import Response
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.protocols import Model
from helikon.testing import FunctionModel, ModelReply, Pause, ScriptItem, call_tools, say

BACKENDS = ["asyncio", "trio"]


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def adder(request: ModelRequest) -> ModelReply:
    """Call ``add`` until a result is in, then tell it."""
    last = request.messages[-1]
    if isinstance(last, ToolResult):
        return f"The sum is {last.content}."
    return call_tools(("add", {"a": 2, "b": 3}))


def drain(model: FunctionModel, request: ModelRequest, backend: str = "trio") -> list[ModelEvent]:
    async def go() -> list[ModelEvent]:
        return [e async for e in model.invoke(request, CancellationToken())]

    return anyio.run(go, backend=backend)


REQUEST = ModelRequest((user_text("hi"),))


def test_a_function_model_is_a_model() -> None:
    model = FunctionModel(adder, model_id="f1")
    assert isinstance(model, Model)
    assert (model.model_id, model.provider) == ("f1", "function")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sync_function_drives_a_tool_loop(backend: str) -> None:
    model = FunctionModel(adder)
    agent = LlmAgent(name="a", model=model, tools=[add])

    result = anyio.run(lambda: collect(agent.run(None, "2 + 3?")), backend=backend)

    assert result.final_output == "The sum is 5."
    assert model.calls == 2
    assert [t.name for t in model.requests[0].tools] == ["add"]
    (output,) = [e.item for e in result.events if type(e) is ToolOutputItem]
    assert output.content == "5"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_async_function_is_awaited_and_text_streams_word_by_word(backend: str) -> None:
    async def answer(request: ModelRequest) -> ModelReply:
        await anyio.sleep(0)
        return f"You said {len(request.messages)} thing"

    agent = LlmAgent(name="a", model=FunctionModel(answer))

    result = anyio.run(lambda: collect(agent.run(None, "go")), backend=backend)

    assert result.final_output == "You said 1 thing"
    assert [e.text for e in result.events if type(e) is TokenDelta] == ["You ", "said ", "1 ", "thing"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_async_generator_streams_and_gets_a_finish(backend: str) -> None:
    async def stream(request: ModelRequest) -> AsyncIterator[ScriptItem | str]:
        yield "Hel"
        yield TextChunk("lo")
        yield Usage(3, 2)

    assert drain(FunctionModel(stream), REQUEST, backend) == [
        TextChunk("Hel"),
        TextChunk("lo"),
        Usage(3, 2),
        Finish(FinishReason.STOP),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_async_generator_may_yield_call_tools_and_say(backend: str) -> None:
    """The table in docs/testing.md lists ``call_tools(...)`` as an item an async generator yields."""

    async def stream(request: ModelRequest) -> AsyncIterator[ScriptItem | Sequence[ScriptItem] | str]:
        if isinstance(request.messages[-1], ToolResult):
            yield "The sum is "
            yield say(str(request.messages[-1].content))
            return
        yield call_tools(("add", {"a": 2, "b": 3}))

    agent = LlmAgent(name="a", model=FunctionModel(stream), tools=[add])
    result = anyio.run(lambda: collect(agent.run(None, "2 + 3?")), backend=backend)
    assert result.final_output == "The sum is 5"
    assert drain(FunctionModel(stream), REQUEST, backend) == [
        ToolCallChunk(0, None, "add", '{"a":2,"b":3}'),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_an_async_generator_yielding_a_list_of_other_things_is_refused() -> None:
    async def stream(request: ModelRequest) -> AsyncIterator[Any]:
        yield [object()]

    with pytest.raises(TypeError, match="not a model event"):
        drain(FunctionModel(stream), REQUEST)


def test_a_list_without_a_finish_gets_one_that_fits() -> None:
    calls = FunctionModel(lambda r: [ToolCallChunk(0, "c1", "add", "{}")])
    assert drain(calls, REQUEST)[-1] == Finish(FinishReason.TOOL_CALLS)
    assert drain(FunctionModel(lambda r: [TextChunk("x")]), REQUEST)[-1] == Finish(FinishReason.STOP)


def test_a_response_is_streamed_as_the_events_that_make_it() -> None:
    response = Response(
        "ab",
        calls=(ToolCall(CallId("c9"), "add", '{"a":1}'),),
        usage=Usage(1, 1),
        response_id="r1",
        text_parts=("a", "b"),
    )
    assert drain(FunctionModel(lambda r: response), REQUEST) == [
        TextChunk("a"),
        TextBreak(),
        TextChunk("b"),
        ToolCallChunk(0, "c9", "add", '{"a":1}'),
        Usage(1, 1),
        Finish(FinishReason.TOOL_CALLS, "r1"),
    ]


def test_the_function_sees_the_settings() -> None:
    seen: list[ModelSettings] = []

    def record(request: ModelRequest) -> ModelReply:
        seen.append(request.settings)
        return "ok"

    drain(FunctionModel(record), ModelRequest((user_text("hi"),), settings=ModelSettings(temperature=0.5)))
    assert seen == [ModelSettings(temperature=0.5)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_error_from_the_function_fails_the_run_with_it(backend: str) -> None:
    def overloaded(request: ModelRequest) -> ModelReply:
        raise ModelError.unavailable("overloaded")

    agent = LlmAgent(name="a", model=FunctionModel(overloaded))

    with pytest.raises(RunError) as info:
        anyio.run(lambda: collect(agent.run(None, "go")), backend=backend)
    assert info.value.error == ModelFailed(Unavailable("overloaded"))


def test_an_answer_of_the_wrong_type_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="FunctionModel's function returned int"):
        drain(FunctionModel(lambda r: 42), REQUEST)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="not a model event"):
        drain(FunctionModel(lambda r: ["text"]), REQUEST)  # type: ignore[list-item]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pause_ends_early_when_the_run_is_cancelled(backend: str) -> None:
    ctx: RunContext[Any] = RunContext.ephemeral(None)
    agent = LlmAgent(name="a", model=FunctionModel(lambda r: [TextChunk("a"), Pause(30), TextChunk("b")]))

    async def scenario() -> tuple[list[Any], float]:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as group:

            async def cancel_soon() -> None:
                await anyio.sleep(0.05)
                ctx.cancel.cancel()

            group.start_soon(cancel_soon)
            events = [e async for e in agent.run(ctx, "go")]
        return events, time.perf_counter() - t0

    events, elapsed = anyio.run(scenario, backend=backend)

    assert elapsed < 2
    assert type(events[-1]) is RunFailed


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slow_async_function_is_interrupted_by_the_timeout(backend: str) -> None:
    async def slow(request: ModelRequest) -> ModelReply:
        await anyio.sleep(30)
        return "never"

    agent = LlmAgent(name="a", model=FunctionModel(slow), config=RunConfig(timeout=0.2))

    async def scenario() -> tuple[list[Any], float]:
        t0 = time.perf_counter()
        events = [e async for e in agent.run(None, "go")]
        return events, time.perf_counter() - t0

    events, elapsed = anyio.run(scenario, backend=backend)

    assert elapsed < 2
    assert events[-1] == RunFailed(TimedOut(0.2))
