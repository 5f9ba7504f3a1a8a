"""The synchronous test interpreter (``TestInterpreter``): scripted model turns,
plain-function tools, recorded steps, resumption."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from helikon.codec import from_json, to_json
from helikon.effects import (
    CallModel,
    ExecuteTools,
    ModelCallFailed,
    ModelResponded,
    ToolRaised,
    ToolsExecuted,
)
from helikon.errors import (
    Denied,
    ModelError,
    ModelFailed,
    OtherModelFailure,
    StepError,
    ToolCrashed,
    ToolError,
    Unavailable,
)
from helikon.events import (
    MessageOutput,
    RunCompleted,
    RunFailed,
    RunStarted,
    TokenDelta,
    ToolCallDelta,
    ToolOutputItem,
    TurnStarted,
)
from helikon.ids import CallId, RunId
from helikon.items import AgentInput, AssistantMessage, TextPart, ToolResult
from helikon.loop import AgentSpec, Done, RunState, resume, start, transition
from helikon.model import TextChunk, ToolDef, Usage
from helikon.testing import TestInterpreter, call_tools, say

ADD = ToolDef(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
LOOKUP = ToolDef("lookup", "Look a key up.", {"type": "object", "properties": {"key": {"type": "string"}}})
SPEC = AgentSpec("helper", tools=(ADD, LOOKUP))


def add(args: Any) -> Any:
    return args["a"] + args["b"]


def tool_results(events: tuple[Any, ...]) -> list[ToolResult]:
    return [e.item for e in events if type(e) is ToolOutputItem]


def test_a_plain_answer_streams_its_deltas_then_the_message() -> None:
    run = TestInterpreter([say("Hi there")]).run(SPEC, "hello", "r1")
    assert run.events == (
        RunStarted("helper", RunId("r1")),
        TurnStarted(1),
        TokenDelta("Hi "),
        TokenDelta("there"),
        MessageOutput(AssistantMessage((TextPart("Hi there"),), "helper")),
        RunCompleted(Usage()),
    )
    assert run.state.phase == Done("Hi there")


def test_tool_call_deltas_come_before_the_tool_call_item() -> None:
    run = TestInterpreter([call_tools(("c1", "add", {"a": 1, "b": 2})), say("3")], {"add": add}).run(
        SPEC, "1+2?"
    )
    kinds = [type(e).__name__ for e in run.events[:5]]
    assert kinds == ["RunStarted", "TurnStarted", "ToolCallDelta", "ToolCallItem", "ToolOutputItem"]
    assert run.events[2] == ToolCallDelta("c1", "add", '{"a":1,"b":2}', 0)


def test_tools_get_the_parsed_arguments_and_their_return_value_is_json_encoded() -> None:
    seen: list[Any] = []

    def lookup(args: Any) -> Any:
        seen.append(args)
        return {"value": [1, 2]}

    run = TestInterpreter([call_tools(("c1", "lookup", {"key": "k"})), say("ok")], {"lookup": lookup}).run(
        SPEC, "?"
    )
    assert seen == [{"key": "k"}]
    assert tool_results(run.events) == [ToolResult(CallId("c1"), "lookup", '{"value":[1,2]}')]


def test_a_string_return_value_is_passed_as_is() -> None:
    run = TestInterpreter([call_tools(("c1", "lookup", {})), say("ok")], {"lookup": lambda _: "plain"}).run(
        SPEC, "?"
    )
    assert tool_results(run.events)[0].content == "plain"


def test_a_tool_error_becomes_an_error_result() -> None:
    def refuse(args: Any) -> Any:
        raise ToolError.denied("read only")

    run = TestInterpreter([call_tools(("c1", "lookup", {})), say("ok")], {"lookup": refuse}).run(SPEC, "?")
    assert run.steps[1].result == ToolsExecuted((ToolRaised(CallId("c1"), Denied("read only")),))
    assert tool_results(run.events) == [
        ToolResult(CallId("c1"), "lookup", "denied: read only", is_error=True)
    ]


def test_any_other_exception_becomes_a_crashed_tool() -> None:
    def broken(args: Any) -> Any:
        raise ValueError("boom")

    run = TestInterpreter([call_tools(("c1", "lookup", {})), say("ok")], {"lookup": broken}).run(SPEC, "?")
    assert run.steps[1].result == ToolsExecuted((ToolRaised(CallId("c1"), ToolCrashed("ValueError: boom")),))
    assert type(run.events[-1]) is RunCompleted


def test_a_tool_without_an_implementation_crashes_but_the_run_goes_on() -> None:
    run = TestInterpreter([call_tools(("c1", "lookup", {})), say("ok")]).run(SPEC, "?")
    assert tool_results(run.events)[0].content == "tool 'lookup' has no implementation"
    assert run.state.phase == Done("ok")


def test_a_model_error_in_a_script_fails_the_call_after_what_streamed() -> None:
    error = ModelError.unavailable("overloaded")
    run = TestInterpreter([[TextChunk("Par"), Usage(5, 1), error, TextChunk("never")]]).run(SPEC, "?")
    assert run.steps[0].result == ModelCallFailed(Unavailable("overloaded"), (TextChunk("Par"), Usage(5, 1)))
    assert run.events[-2:] == (
        TokenDelta("Par"),
        RunFailed(ModelFailed(Unavailable("overloaded")), Usage(5, 1)),
    )


def test_running_out_of_scripts_fails_the_model_call() -> None:
    run = TestInterpreter([call_tools(("c1", "lookup", {}))], {"lookup": lambda _: "v"}).run(SPEC, "?")
    assert run.events[-1] == RunFailed(ModelFailed(OtherModelFailure("the model script ran out")))


def test_dynamic_instructions_are_rendered_per_turn_by_the_function() -> None:
    spec = AgentSpec("helper", tools=(LOOKUP,), dynamic_instructions=True)
    turns: list[int] = []

    def instructions(turn: int) -> str:
        turns.append(turn)
        return f"Turn {turn}."

    run = TestInterpreter(
        [call_tools(("c1", "lookup", {})), say("ok")], {"lookup": lambda _: "v"}, instructions
    )
    result = run.run(spec, "?")
    assert turns == [1, 2]
    requests = [s.effect.request for s in result.steps if type(s.effect) is CallModel]
    assert [r.instructions for r in requests] == ["Turn 1.", "Turn 2."]


def test_dynamic_instructions_without_a_function_are_a_step_error() -> None:
    spec = AgentSpec("helper", dynamic_instructions=True)
    with pytest.raises(StepError, match="no instructions function"):
        TestInterpreter([say("hi")]).run(spec, "?")


def test_every_performed_effect_is_recorded_with_its_result() -> None:
    script = [call_tools(("c1", "add", {"a": 2, "b": 2})), say("4")]
    run = TestInterpreter(script, {"add": add}).run(SPEC, "2+2?")
    assert [type(s.effect) for s in run.steps] == [CallModel, ExecuteTools, CallModel]
    assert [type(s.result) for s in run.steps] == [ModelResponded, ToolsExecuted, ModelResponded]


def test_a_run_resumed_from_a_reloaded_state_finishes_like_the_original() -> None:
    # ``add`` may be re-run (idempotent): a checkpoint taken after its call was
    # started resumes by running it again, with the same call id.
    spec = attrs.evolve(SPEC, idempotent_tools=("add",))
    script = [call_tools(("c1", "add", {"a": 2, "b": 3})), say("5")]
    whole = TestInterpreter(script, {"add": add}).run(spec, "2+3?", "r1")

    # A checkpoint after the model's first turn holds only the state, as JSON.
    begun = start(spec, AgentInput.from_user_text("2+3?"), RunId("r1"))
    first = transition(begun.state, whole.steps[0].result, spec).unwrap()
    state = from_json(to_json(first.state), RunState)

    rest = TestInterpreter(script[1:], {"add": add}).resume(spec, resume(state, spec).unwrap())
    deltas = [ToolCallDelta("c1", "add", '{"a":2,"b":3}', 0)]
    assert whole.events == (*begun.events, *deltas, *first.events, *rest.events)
    assert rest.steps == whole.steps[1:]
    assert rest.state == whole.state


# -- governance: the machine's, so the scripted interpreter applies it like the live one --------


def test_the_scripted_interpreter_applies_governance_like_the_live_one() -> None:
    import anyio

    from helikon import Deny, DenyRule, HookRegistry, LlmAgent, PreToolUse, RunContext, prepare, tool
    from helikon.testing import MockModel, call_tools, say

    def no_big(ctx: object, event: object) -> object:
        if isinstance(event, PreToolUse) and event.args.get("n", 0) > 5:
            return Deny("too big")
        return None

    @tool
    async def double(n: int) -> int:
        """Double.

        Args:
            n: a number.
        """
        return 2 * n

    script = [call_tools(("c1", "double", {"n": 9}), ("c2", "double", {"n": 2}), ("c3", "rm", {})), say("ok")]
    ctx = (
        RunContext.ephemeral(None)
        .with_hooks(HookRegistry(hooks=[no_big]))
        .with_deny_rules([DenyRule.tool("rm")])
    )
    agent = LlmAgent(name="d", model=MockModel(list(script)), tools=[double])

    async def live() -> list[object]:
        from helikon.interpreters import LiveInterpreter

        return [e async for e in agent.run(ctx, "go", interpreter=LiveInterpreter("run-1"))]

    spec = prepare(agent, ctx, run_id="run-1").spec
    scripted = TestInterpreter(
        list(script), tools={"double": lambda args: 2 * args["n"]}, hooks=[no_big], ctx=ctx
    ).run(spec, "go", run_id="run-1")

    assert list(scripted.events) == anyio.run(live)
