"""Properties of the agent loop that hold for any agent, any model and any tools.

Each test states one promise of the book or the design and lets Hypothesis
look for a counterexample: totality of ``transition``, determinism, exact
reassembly of streamed tool calls, the tool-argument, max-turns and
structured-output rules, lossless serialization of every carrier, and
resumption from a reloaded state at any step.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success
from strategies import (
    PHASES,
    RESULTS,
    CallKind,
    agent_specs,
    arg_schemas,
    carriers,
    final_answers,
    handoff_lists,
    instructions_fn,
    matching_args,
    non_matching_args,
    output_schemas,
    run_configs,
    run_ids,
    scaled,
    scripts,
    tool_def_lists,
    tool_outcomes,
    tools_for,
    turn_plans,
)

from helikon.codec import from_json, structure, to_json, unstructure
from helikon.effects import (
    ApprovalDecision,
    ApprovalsGiven,
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    ModelCallFailed,
    ModelResponded,
    Terminate,
    ToolsExecuted,
)
from helikon.errors import (
    AgentError,
    InvalidStructuredOutput,
    InvalidToolArgs,
    MaxTurnsExceeded,
    ModelFailure,
    StepError,
    ToolFailure,
)
from helikon.events import (
    AgentEvent,
    RepairStarted,
    RunCompleted,
    RunFailed,
    StructuredOutputFailed,
    ToolOutputItem,
)
from helikon.ids import RunId
from helikon.interpreters import ScriptedRun, TestInterpreter
from helikon.items import AgentInput, ContentPart, Item
from helikon.loop import (
    TABLE,
    TERMINAL,
    AgentSpec,
    Done,
    ExecutingTools,
    LoopState,
    NeedsApproval,
    Outcome,
    RunState,
    aggregate,
    delta_event,
    parse_json,
    resume,
    schema_errors,
    start,
    transition,
)
from helikon.model import ModelEvent, ToolDef

# -- helpers -------------------------------------------------------------------


def interpreter(spec: AgentSpec, model: list[list[Any]], tools: dict[str, Any]) -> TestInterpreter:
    return TestInterpreter(model=model, tools=tools, instructions=instructions_fn)


def model_calls(run: ScriptedRun) -> int:
    return sum(type(step.effect) is CallModel for step in run.steps)


def arg_errors(arguments: str, tool: ToolDef) -> tuple[str, ...]:
    """The errors the loop reports for ``arguments`` (empty when they are valid)."""
    value, error = parse_json(arguments or "{}")
    return (error,) if error is not None else schema_errors(value, tool.parameters)


# -- totality --------------------------------------------------------------------


@st.composite
def results_for(draw: st.DrawFn, result_type: type, state: RunState, spec: AgentSpec) -> EffectResult:
    """A result of ``result_type``: arbitrary, or shaped to get past the handler's checks."""
    phase = state.phase
    if draw(st.booleans()):
        if result_type is ModelResponded:
            return ModelResponded(draw(turn_plans(spec.model_tools)).events)
        if result_type is ToolsExecuted and type(phase) is ExecutingTools:
            runnable = [c for c, p in zip(phase.calls, phase.prefilled, strict=True) if p is None]
            return ToolsExecuted(tuple(draw(tool_outcomes(c.call_id, approvals=True)) for c in runnable))
        if result_type is ApprovalsGiven and type(phase) is NeedsApproval:
            return ApprovalsGiven(
                tuple(ApprovalDecision(r.call_id, draw(st.booleans())) for r in phase.pending)
            )
    result: EffectResult = draw(carriers(result_type))
    return result


def states_in(phase_type: type) -> st.SearchStrategy[RunState]:
    return st.builds(attrs.evolve, carriers(RunState), phase=carriers(phase_type))


ACCEPTED = [(p, r) for p in PHASES for r in RESULTS if (p, r) in TABLE]
REFUSED = [(p, r) for p in PHASES for r in RESULTS if (p, r) not in TABLE]


def pair_id(pair: tuple[type, type]) -> str:
    return f"{pair[0].__name__}-{pair[1].__name__}"


@pytest.mark.parametrize("pair", ACCEPTED, ids=pair_id)
@scaled(0.05)  # x 23 pairs: >= 500 examples for the property in the ci profile
@given(data=st.data())
def test_transition_is_total(pair: tuple[type, type], data: st.DataObject) -> None:
    """Every pair of the table gives Success or Failure(StepError) for any state; nothing raises."""
    phase_type, result_type = pair
    spec = data.draw(agent_specs(handoffs=handoff_lists(), governance=st.booleans()), label="spec")
    state = data.draw(states_in(phase_type), label="state")
    result = data.draw(results_for(result_type, state, spec), label="result")
    outcome = transition(state, result, spec)
    match outcome:
        case Success(Outcome() as nxt):
            assert nxt.state.terminal == isinstance(nxt.effect, Terminate)
        case Failure(StepError()):
            pass
        case _:
            raise AssertionError(f"not a step: {outcome!r}")


@pytest.mark.parametrize("pair", REFUSED, ids=pair_id)
@scaled(0.012)  # x 97 pairs: >= 500 examples for the property in the ci profile
@given(data=st.data())
def test_pairs_missing_from_the_table_are_refused(pair: tuple[type, type], data: st.DataObject) -> None:
    """Terminal phases accept nothing, and no phase accepts a result the table does not pair it with."""
    phase_type, result_type = pair
    state = RunState(RunId("r"), "a", data.draw(carriers(phase_type), label="phase"))
    outcome = transition(state, data.draw(carriers(result_type), label="result"), AgentSpec("a"))
    assert isinstance(outcome, Failure) and isinstance(outcome.failure(), StepError)


def test_terminal_phases_accept_nothing() -> None:
    assert not [pair for pair in TABLE if pair[0] in TERMINAL]


# -- determinism -------------------------------------------------------------------


@st.composite
def scripted_runs(draw: st.DrawFn) -> tuple[AgentSpec, list[list[Any]], dict[str, Any], str]:
    spec = draw(agent_specs(), label="spec")
    return spec, draw(scripts(spec), label="scripts"), draw(tools_for(spec), label="tools"), draw(run_ids())


@scaled(1.0)
@given(scripted_runs(), st.text(max_size=20))
def test_identical_inputs_give_identical_event_streams(
    run: tuple[AgentSpec, list[list[Any]], dict[str, Any], str], text: str
) -> None:
    spec, model, tools, run_id = run
    first = interpreter(spec, model, tools).run(spec, text, run_id)
    second = interpreter(spec, model, tools).run(spec, text, run_id)
    assert first.events == second.events
    assert first.steps == second.steps
    assert first.state == second.state
    assert to_json(first.events, tuple[AgentEvent, ...]) == to_json(second.events, tuple[AgentEvent, ...])


# -- aggregation -----------------------------------------------------------------


@scaled(1.0)
@given(tool_def_lists(), run_ids(), st.integers(1, 20), st.data())
def test_aggregate_reassembles_interleaved_fragmented_calls(
    tools: tuple[ToolDef, ...], run_id: RunId, turn: int, data: st.DataObject
) -> None:
    plan = data.draw(turn_plans(tools, max_calls=4), label="turn")
    response = aggregate(plan.events, run_id, turn)
    assert response.calls == plan.tool_calls(run_id, turn)
    assert response.text == plan.text
    assert response.text_parts == plan.text_parts
    assert response.reasoning == plan.reasoning
    assert response.usage == plan.usage
    assert response.finish == plan.finish


@scaled(1.0)
@given(tool_def_lists(min_size=1), st.data())
def test_generated_arguments_are_what_their_kind_says(
    tools: tuple[ToolDef, ...], data: st.DataObject
) -> None:
    """The strategies' own contract: a VALID call's arguments pass, the others do not."""
    plan = data.draw(turn_plans(tools, min_calls=1), label="turn")
    by_name = {t.name: t for t in tools}
    for call in plan.calls:
        if call.kind is CallKind.UNKNOWN_TOOL:
            assert call.name not in by_name
        else:
            assert (arg_errors(call.arguments, by_name[call.name]) == ()) == (call.kind is CallKind.VALID)


@scaled(1.0)
@given(arg_schemas(), st.data())
def test_matching_and_non_matching_args(schema: dict[str, Any], data: st.DataObject) -> None:
    assert schema_errors(data.draw(matching_args(schema), label="good"), schema) == ()
    assert schema_errors(data.draw(non_matching_args(schema), label="bad"), schema) != ()


# -- tool arguments and unknown tools ------------------------------------------------

INVALID = (CallKind.MALFORMED_JSON, CallKind.SCHEMA_VIOLATION)


@scaled(1.0)
@given(
    spec=agent_specs(
        tools=tool_def_lists(min_size=1), output=st.none(), config=run_configs(st.integers(3, 6))
    ),
    data=st.data(),
)
def test_invalid_arguments_are_fed_back_once_then_fail_the_run(spec: AgentSpec, data: st.DataObject) -> None:
    rounds = [
        data.draw(turn_plans(spec.tools, min_calls=1, kinds=INVALID), label=f"round {n}") for n in (1, 2)
    ]
    tools = data.draw(tools_for(spec, raises=False), label="tools")
    run = interpreter(spec, [list(r.events) for r in rounds], tools).run(spec, "go", "r")
    by_name = {t.name: t for t in spec.tools}
    first_round = rounds[0].tool_calls(RunId("r"), 1)
    fed_back = [e.item for e in run.events if type(e) is ToolOutputItem]
    for call in first_round:
        (result,) = [r for r in fed_back if r.call_id == call.call_id]
        assert result.is_error
        assert result.content.startswith("invalid arguments: ")
        assert all(error in result.content for error in arg_errors(call.arguments, by_name[call.name]))
    culprit = rounds[1].tool_calls(RunId("r"), 2)[0]
    error = InvalidToolArgs(culprit.name, arg_errors(culprit.arguments, by_name[culprit.name]))
    assert run.events[-1] == RunFailed(error, run.state.usage)
    assert model_calls(run) == 2


@scaled(1.0)
@given(spec=agent_specs(output=st.none(), config=run_configs(st.integers(2, 6))), data=st.data())
def test_unknown_tools_get_an_error_result_and_the_run_continues(
    spec: AgentSpec, data: st.DataObject
) -> None:
    unknown = data.draw(turn_plans(spec.tools, min_calls=1, kinds=[CallKind.UNKNOWN_TOOL]), label="unknown")
    answer = data.draw(turn_plans(spec.tools, max_calls=0), label="answer")
    run = interpreter(spec, [list(unknown.events), list(answer.events)], {}).run(spec, "go", "r")
    results = [e.item for e in run.events if type(e) is ToolOutputItem]
    assert [r.call_id for r in results] == [c.call_id for c in unknown.tool_calls(RunId("r"), 1)]
    assert all(r.is_error and r.content.startswith(f"unknown tool {r.name!r}") for r in results)
    assert not any(type(step.effect) is ExecuteTools for step in run.steps)
    assert type(run.events[-1]) is RunCompleted
    assert run.state.phase == Done(answer.text)


# -- max turns ---------------------------------------------------------------------


@scaled(1.0)
@given(
    spec=agent_specs(
        tools=tool_def_lists(min_size=1), output=st.none(), config=run_configs(st.integers(1, 5))
    ),
    data=st.data(),
)
def test_asking_for_tools_past_max_turns_fails_the_run(spec: AgentSpec, data: st.DataObject) -> None:
    max_turns = spec.config.max_turns
    turn = turn_plans(spec.tools, min_calls=1, kinds=[CallKind.VALID]).map(lambda p: list(p.events))
    model = [data.draw(turn, label=f"turn {n}") for n in range(max_turns + 2)]
    run = interpreter(spec, model, data.draw(tools_for(spec, raises=False), label="tools")).run(spec, "go")
    assert run.events[-1] == RunFailed(MaxTurnsExceeded(max_turns), run.state.usage)
    assert model_calls(run) == max_turns
    assert sum(type(step.effect) is ExecuteTools for step in run.steps) == max_turns - 1


# -- structured output -------------------------------------------------------------


def answer_turn(schema: Any, valid: bool) -> st.SearchStrategy[list[ModelEvent]]:
    return turn_plans(text=final_answers(schema, valid), max_calls=0).map(lambda p: list(p.events))


def final_run(spec: AgentSpec, answers: list[list[ModelEvent]], data: st.DataObject) -> ScriptedRun:
    """Run ``spec`` to its final answers (after a tool-free turn if it has tools)."""
    lead = [data.draw(turn_plans(spec.tools, max_calls=0), label="lead").events] if spec.tools else []
    return interpreter(spec, [*map(list, lead), *answers], {}).run(spec, "go")


structured = agent_specs(output=output_schemas(), config=run_configs(st.integers(2, 6)))


@scaled(1.0)
@given(spec=structured, data=st.data())
def test_valid_structured_output_completes(spec: AgentSpec, data: st.DataObject) -> None:
    assert spec.output is not None
    run = final_run(spec, [data.draw(answer_turn(spec.output.schema, True), label="answer")], data)
    assert type(run.state.phase) is Done
    value, error = parse_json(run.state.phase.output)
    assert error is None and schema_errors(value, spec.output.schema) == ()
    assert type(run.events[-1]) is RunCompleted
    assert not any(type(e) is RepairStarted for e in run.events)


@scaled(1.0)
@given(spec=structured, data=st.data())
def test_invalid_then_valid_structured_output_repairs_once(spec: AgentSpec, data: st.DataObject) -> None:
    assert spec.output is not None
    answers = [data.draw(answer_turn(spec.output.schema, v), label=f"valid={v}") for v in (False, True)]
    run = final_run(spec, answers, data)
    assert [e for e in run.events if type(e) is RepairStarted] == [RepairStarted(1)]
    assert type(run.state.phase) is Done
    assert type(run.events[-1]) is RunCompleted


@scaled(1.0)
@given(spec=structured, data=st.data())
def test_invalid_structured_output_twice_fails(spec: AgentSpec, data: st.DataObject) -> None:
    assert spec.output is not None
    answers = [data.draw(answer_turn(spec.output.schema, False), label=f"answer {n}") for n in (1, 2)]
    run = final_run(spec, answers, data)
    text = aggregate(tuple(answers[1]), RunId("x"), 1).text
    value, error = parse_json(text)
    errors = (error,) if error is not None else schema_errors(value, spec.output.schema)
    assert errors
    assert run.events[-2:] == (
        StructuredOutputFailed(errors, text),
        RunFailed(InvalidStructuredOutput(errors, text), run.state.usage),
    )
    assert [e for e in run.events if type(e) is RepairStarted] == [RepairStarted(1)]


# -- serialization -----------------------------------------------------------------

CARRIER_UNIONS: list[Any] = [
    AgentEvent,
    Effect,
    EffectResult,
    LoopState,
    RunState,
    Outcome,
    Item,
    ContentPart,
    ModelEvent,
    AgentError,
    ModelFailure,
    ToolFailure,
    AgentSpec,
]


@pytest.mark.parametrize("union", CARRIER_UNIONS, ids=lambda u: getattr(u, "__name__", repr(u)))
@scaled(0.2)
@given(data=st.data())
def test_every_carrier_round_trips_through_the_codec(union: Any, data: st.DataObject) -> None:
    value = data.draw(carriers(union), label="value")
    assert structure(unstructure(value, union), union) == value
    assert from_json(to_json(value, union), union) == value
    assert to_json(from_json(to_json(value, union), union), union) == to_json(value, union)


# -- resumption ----------------------------------------------------------------------


def replay(spec: AgentSpec, run: ScriptedRun, input: AgentInput, steps: int) -> tuple[Outcome, list[Any]]:
    """The outcome after the first ``steps`` recorded steps, and every event emitted up to it."""
    outcome = start(spec, input, run.state.run_id)
    emitted: list[Any] = list(outcome.events)
    for step in run.steps[:steps]:
        if isinstance(step.result, ModelResponded | ModelCallFailed):
            emitted.extend(d for d in map(delta_event, step.result.events) if d is not None)
        outcome = transition(outcome.state, step.result, spec).unwrap()
        emitted.extend(outcome.events)
    return outcome, emitted


@scaled(1.0)
@given(scripted_runs(), st.text(max_size=20))
def test_resuming_a_reloaded_state_at_any_step_gives_the_same_events(
    recorded: tuple[AgentSpec, list[list[Any]], dict[str, Any], str], text: str
) -> None:
    """Dump the state after any step, load it (and the spec), resume: the same run."""
    spec, model, tools, run_id = recorded
    input = AgentInput.from_user_text(text)
    whole = interpreter(spec, model, tools).run(spec, input, run_id)
    for k in range(len(whole.steps) + 1):
        outcome, emitted = replay(spec, whole, input, k)
        loaded_spec = from_json(to_json(spec), AgentSpec)
        pending = resume(from_json(to_json(outcome.state), RunState), loaded_spec).unwrap()
        assert pending.effect == outcome.effect
        remaining = model[sum(type(s.effect) is CallModel for s in whole.steps[:k]) :]
        resumed = interpreter(spec, remaining, tools).resume(loaded_spec, pending)
        assert [*emitted, *resumed.events] == list(whole.events)
        assert resumed.state == whole.state
        assert resumed.steps == whole.steps[k:]
