"""The scripted model (``MockModel``) and the turn builders ``say`` and ``call_tools``."""

from __future__ import annotations

import time

import anyio
import pytest

from helikon.cancel import CancellationToken
from helikon.errors import ModelError, OtherModelFailure, Unavailable
from helikon.ids import CallId
from helikon.items import AssistantMessage, Item, TextPart, ToolCall, ToolResult, user_text
from helikon.loop import REPAIR_PROMPT
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk, ToolCallChunk, Usage
from helikon.protocols import Model
from helikon.testing import MockModel, Pause, ScriptItem, call_tools, say

REQUEST = ModelRequest((user_text("hi"),))
BACKENDS = ["asyncio", "trio"]


async def drain(model: MockModel, cancel: CancellationToken | None = None) -> list[ModelEvent]:
    return [event async for event in model.invoke(REQUEST, cancel or CancellationToken())]


# -- the turn builders -----------------------------------------------------------------


def test_say_streams_word_by_word_and_finishes() -> None:
    assert say("Hello big world") == [
        TextChunk("Hello "),
        TextChunk("big "),
        TextChunk("world"),
        Finish(FinishReason.STOP),
    ]


def test_say_unchunked_with_usage() -> None:
    assert say("Hello world", usage=Usage(3, 2), chunked=False) == [
        TextChunk("Hello world"),
        Usage(3, 2),
        Finish(FinishReason.STOP),
    ]


def test_call_tools_numbers_calls_and_encodes_arguments() -> None:
    assert call_tools(("add", {"a": 1}), ("c9", "clock", {})) == [
        ToolCallChunk(index=0, call_id=None, name="add", arguments='{"a":1}'),
        ToolCallChunk(index=1, call_id="c9", name="clock", arguments="{}"),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_call_tools_passes_string_arguments_through_unparsed() -> None:
    (chunk, _) = call_tools(("add", '{"a": 1'))
    assert chunk == ToolCallChunk(index=0, name="add", arguments='{"a": 1')


def test_call_tools_with_text_and_usage() -> None:
    assert call_tools(("clock", {}), text="Checking.", usage=Usage(1, 1)) == [
        TextChunk("Checking."),
        ToolCallChunk(index=0, name="clock", arguments="{}"),
        Usage(1, 1),
        Finish(FinishReason.TOOL_CALLS),
    ]


# -- the model -------------------------------------------------------------------------


def test_a_mock_model_is_a_model() -> None:
    assert isinstance(MockModel(), Model)
    assert MockModel(model_id="m1").model_id == "m1"


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_call_plays_the_next_script_and_keeps_the_request(backend: str) -> None:
    model = MockModel([say("one"), say("two")])
    assert anyio.run(drain, model, backend=backend) == say("one")
    assert anyio.run(drain, model, backend=backend) == say("two")
    assert model.requests == [REQUEST, REQUEST]
    assert model.calls == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_out_of_scripts_raises_a_model_error(backend: str) -> None:
    model = MockModel([say("only once")])
    anyio.run(drain, model, backend=backend)
    with pytest.raises(ModelError) as info:
        anyio.run(drain, model, backend=backend)
    assert info.value.failure == OtherModelFailure("MockModel has no script left for call 2")


def test_add_appends_scripts() -> None:
    model = MockModel([say("one")]).add(say("two"), say("three"))
    assert len(model.remaining) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_error_in_a_script_is_raised_after_what_came_before(backend: str) -> None:
    model = MockModel([[TextChunk("Par"), ModelError.unavailable("overloaded"), TextChunk("never")]])
    seen: list[ModelEvent] = []

    async def consume() -> None:
        async for event in model.invoke(REQUEST, CancellationToken()):
            seen.append(event)

    with pytest.raises(ModelError) as info:
        anyio.run(consume, backend=backend)
    assert info.value.failure == Unavailable("overloaded")
    assert seen == [TextChunk("Par")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pause_ends_the_stream_when_the_token_fires(backend: str) -> None:
    script: list[ScriptItem] = [TextChunk("before"), Pause(30.0), TextChunk("after")]
    model = MockModel([script])
    cancel = CancellationToken()
    seen: list[ModelEvent] = []

    async def main() -> None:
        async def consume() -> None:
            async for event in model.invoke(REQUEST, cancel):
                seen.append(event)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(consume)
                await anyio.sleep(0.05)
                cancel.cancel()

    began = time.monotonic()
    anyio.run(main, backend=backend)
    assert seen == [TextChunk("before")]
    assert time.monotonic() - began < 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_token_streams_nothing(backend: str) -> None:
    cancel = CancellationToken()
    cancel.cancel()
    assert anyio.run(drain, MockModel([say("hello")]), cancel, backend=backend) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_short_pause_without_cancellation_just_waits(backend: str) -> None:
    model = MockModel([[TextChunk("a"), Pause(0.01), TextChunk("b")]])
    assert anyio.run(drain, model, backend=backend) == [TextChunk("a"), TextChunk("b")]


# -- the position, read from the request ---------------------------------------------

SCRIPTS: list[list[ScriptItem]] = [
    call_tools(("add", {"a": 1, "b": 2}), text="Adding."),
    call_tools(("add", {"a": 3, "b": 4})),
    say("7"),
]


def conversation(*turns: Item) -> ModelRequest:
    return ModelRequest((user_text("add"), *turns))


ADD_1 = (AssistantMessage((TextPart("Adding."),)), ToolCall(CallId("c0"), "add", '{"b": 2, "a": 1}'))
ADD_2 = (ToolCall(CallId("c1"), "add", '{"a":3,"b":4}'),)


def first_event(model: MockModel, request: ModelRequest) -> ModelEvent:
    async def go() -> ModelEvent:
        events = [e async for e in model.invoke(request, CancellationToken())]
        return events[0]

    return anyio.run(go)


def test_a_fresh_model_continues_after_the_turns_it_finds_in_the_request() -> None:
    request = conversation(
        *ADD_1, ToolResult(CallId("c0"), "add", "3"), *ADD_2, ToolResult(CallId("c1"), "add", "7")
    )
    fresh = MockModel(SCRIPTS)
    assert fresh.position(request) == 2
    assert first_event(fresh, request) == TextChunk("7")
    assert fresh.remaining == []


def test_turns_no_script_made_are_skipped() -> None:
    history = (AssistantMessage((TextPart("Hello from an earlier chat."),)), user_text("and now?"))
    model = MockModel(SCRIPTS)
    assert model.position(conversation(*history)) == 0
    assert model.position(conversation(*history, *ADD_1, ToolResult(CallId("c0"), "add", "3"))) == 1


def test_a_failed_script_leaves_no_turn_and_is_stepped_over_when_the_next_one_shows() -> None:
    model = MockModel([[ModelError.unavailable("busy")], *SCRIPTS])
    assert model.position(conversation()) == 0  # cannot tell that the error was played
    assert model.position(conversation(*ADD_1, ToolResult(CallId("c0"), "add", "3"))) == 2


def test_its_own_count_wins_when_it_is_further() -> None:
    # One model shared by a parent and a sub-agent: the sub-agent's request
    # does not hold the parent's turns, the count does.
    model = MockModel([say("a"), say("b"), say("c")])
    assert first_event(model, conversation()) == TextChunk("a")
    assert first_event(model, conversation()) == TextChunk("b")
    assert model.position(conversation()) == 2


def test_only_the_current_run_counts_so_a_new_model_on_a_session_starts_over() -> None:
    # A session's earlier run said "7" with another MockModel; this run's input follows.
    earlier = (*ADD_1, ToolResult(CallId("c0"), "add", "3"), AssistantMessage((TextPart("7"),)))
    model = MockModel([say("7")])
    assert model.position(conversation(*earlier, user_text("and again?"))) == 0


def test_the_loops_own_prompts_do_not_start_a_run() -> None:
    model = MockModel([say("not json"), say('{"total": 1}')])
    prompt = user_text(REPAIR_PROMPT.format(name="Sum", errors="$: expected an object"))
    assert model.position(conversation(AssistantMessage((TextPart("not json"),)), prompt)) == 1


async def invoke(model: MockModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.invoke(request, CancellationToken())]


def test_estimate_usage_counts_a_token_per_four_characters_in_and_out() -> None:
    from helikon.model import ToolDef

    request = ModelRequest(
        (user_text("Where is A1?"),),  # 12 characters
        (ToolDef("look", "Look up", {"type": "object"}),),  # 4 + 7 + 17 characters
    )
    model = MockModel([say("Shipped today."), say("Said.", usage=Usage(3, 2))], estimate_usage=True)
    played = anyio.run(invoke, model, request)
    usage = [e for e in played if isinstance(e, Usage)]
    assert usage == [Usage(-(-40 // 4), -(-14 // 4))]  # (12 + 4 + 7 + 17) / 4 in, 14 / 4 out
    assert played.index(usage[0]) == len(played) - 2  # just before the Finish
    # A script's own usage is reported as it is.
    assert [e for e in anyio.run(invoke, model, request) if isinstance(e, Usage)] == [Usage(3, 2)]
    # Off by default: a script without usage reports none.
    assert not [e for e in anyio.run(invoke, MockModel([say("x")]), request) if isinstance(e, Usage)]
