"""The step API as a custom scheduler uses it: the pending effect of a loaded
state, snapshots that refuse what does not fit, and recording a run driven
step by step."""

from __future__ import annotations

from typing import Any

import attrs
import msgspec
import pytest
import trio

from helikon import (
    LlmAgent,
    StepError,
    Trace,
    advance,
    dump_state,
    load_state,
    pending,
    perform,
    start,
    tool,
)
from helikon.effects import ExecuteTools, ReconcileTool, Terminate
from helikon.ids import CallId, RunId
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.items import ToolCall, ToolResult, user_text
from helikon.loop import ExecutingTools, Running, RunState, ToolCallState
from helikon.loop._check import state_problems
from helikon.snapshots import StateFormatError
from helikon.steps import pending_effect
from helikon.testing import MockModel, call_tools, say


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def make_agent(instructions: str = "Add.", name: str = "calc") -> LlmAgent[Any]:
    model = MockModel([call_tools(("add", {"a": 1, "b": 2})), say("3")])
    return LlmAgent(name=name, model=model, instructions=instructions, tools=[add])


def state_before_tools(agent: LlmAgent[Any]) -> Any:
    outcome = start(agent, "1+2?", run_id="r")

    async def go() -> Any:
        nonlocal outcome
        while not isinstance(outcome.effect, ExecuteTools):
            _, result = await perform(agent, outcome.effect, run_id="r")
            outcome = advance(agent, outcome.state, result)
        return outcome

    return trio.run(go)


def test_pending_effect_of_a_loaded_state_is_the_effect_it_stopped_at() -> None:
    agent = make_agent().with_tools(tool(add, idempotent=True))
    outcome = state_before_tools(agent)

    loaded = load_state(dump_state(outcome.state))

    assert pending_effect(agent, loaded) == outcome.effect
    assert pending(agent, loaded) == outcome.effect


def test_a_loaded_state_with_a_started_call_reconciles_it() -> None:
    # ``add`` is not declared idempotent: its call was started when the state
    # was stored, so the loaded state asks what became of it.
    agent = make_agent()
    outcome = state_before_tools(agent)

    effect = pending_effect(agent, load_state(dump_state(outcome.state)))

    assert effect == ExecuteTools((ReconcileTool(CallId("call_r_1_0"), "add", {"a": 1, "b": 2}),))


def test_a_state_of_another_agent_is_refused() -> None:
    state = state_before_tools(make_agent()).state
    other = LlmAgent(name="other", model=MockModel([]), instructions="Hi.")

    with pytest.raises(StepError, match="the state belongs to agent 'calc', not 'other'"):
        pending(other, state)

    async def go() -> None:
        async for _ in other.resume(None, state):
            pass

    with pytest.raises(StepError, match="belongs to agent 'calc'"):
        trio.run(go)


def test_a_state_of_another_definition_is_refused_unless_allowed() -> None:
    state = load_state(dump_state(state_before_tools(make_agent()).state))
    changed = make_agent(instructions="Add, then double-check.")

    with pytest.raises(StepError, match="saved by a run of another definition of agent 'calc'"):
        pending(changed, state)
    with pytest.raises(StepError, match="allow_changed_definition=True"):
        trio.run(_drain, changed.resume(None, state))

    assert isinstance(pending(changed, state, allow_changed_definition=True), ExecuteTools)
    events = trio.run(_drain, changed.resume(None, state, allow_changed_definition=True))
    assert type(events[-1]).__name__ == "RunCompleted"


async def _drain(stream: Any) -> list[Any]:
    return [event async for event in stream]


def test_a_state_that_does_not_fit_its_conversation_is_a_clear_error() -> None:
    agent = make_agent()
    state = state_before_tools(agent).state
    cut = attrs.evolve(state, conversation=state.conversation[:1])

    with pytest.raises(StepError, match=r"phase.calls\[0\]: tool call '.*' is not in the conversation"):
        pending(agent, load_state(dump_state(cut)))


def test_a_malformed_snapshot_names_the_field_path() -> None:
    data = msgspec.json.decode(dump_state(state_before_tools(make_agent()).state))
    data["state"]["usage"]["input_tokens"] = "many"
    data["state"]["conversation"][1]["type"] = "Bogus"

    with pytest.raises(StateFormatError) as caught:
        load_state(msgspec.json.encode(data))

    message = str(caught.value)
    assert "expected an integer, got a string ('many') @ state.usage.input_tokens" in message
    assert "@ state.conversation[1]" in message


def test_a_run_driven_step_by_step_can_be_recorded_as_agent_run_records_it() -> None:
    recorder = RecordingInterpreter(LiveInterpreter())
    agent = make_agent()

    async def stepped() -> None:
        outcome = start(agent, "1+2?", run_id="r", recorder=recorder)
        while not isinstance(outcome.effect, Terminate):
            _, result = await perform(agent, outcome.effect, run_id="r", interpreter=recorder)
            outcome = advance(agent, outcome.state, result, recorder=recorder)

    trio.run(stepped)
    by_steps = recorder.trace

    whole = RecordingInterpreter(LiveInterpreter("r"))
    trio.run(_drain, make_agent().run(None, "1+2?", interpreter=whole))

    assert by_steps.to_bytes() == whole.trace.to_bytes()
    replayed = trio.run(_drain, make_agent().run(None, "1+2?", interpreter=ReplayInterpreter(by_steps)))
    assert tuple(replayed) == Trace.from_bytes(by_steps.to_bytes()).events


def test_a_call_id_reused_in_a_later_turn_still_fits() -> None:
    call = ToolCall(CallId("c1"), "add", '{"a":1,"b":2}')
    pending_round = ExecutingTools(2, (ToolCallState(call, {"a": 1, "b": 2}, Running()),))
    spec = make_agent().spec
    history = (user_text("hi"), call, ToolResult(CallId("c1"), "add", "3"))

    fits = RunState(RunId("r"), "calc", pending_round, (*history, call))
    answered = RunState(
        RunId("r"), "calc", pending_round, (*history, call, ToolResult(CallId("c1"), "add", "3"))
    )

    assert state_problems(fits, spec) == ()
    assert state_problems(answered, spec) == (
        "phase.calls[0]: tool call 'c1' already has its result in the conversation",
    )
