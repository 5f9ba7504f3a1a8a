"""Properties of the agent loop that hold for any agent, any model and any tools.

Each test states one promise of the book or the design and lets Hypothesis
look for a counterexample: totality of ``transition``, determinism, exact
reassembly of streamed tool calls, governed tool rounds (hooks, the
permission policy, humans and the tools answering anything), the
tool-argument, max-turns and structured-output rules, lossless serialization
of every carrier, and resumption from a reloaded state at any step. Agents
come with drawn governance, answered by deterministic scripted hooks,
policies and approval handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success
from strategies import (
    MOSTLY_VALID,
    PHASES,
    RESULTS,
    CallKind,
    TurnPlan,
    agent_specs,
    approvals_for,
    arg_schemas,
    callbacks_for,
    carriers,
    final_answers,
    governed,
    handoff_lists,
    instructions_fn,
    matching_args,
    non_matching_args,
    output_schemas,
    run_configs,
    run_ids,
    scaled,
    scripts,
    steps_answered,
    tool_def_lists,
    tools_for,
    turn_plans,
    wrong_step_results,
)

from helikon.codec import from_json, structure, to_json, unstructure
from helikon.effects import (
    ApprovalsGiven,
    AskApprovals,
    AwaitApproval,
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    ReconcileTool,
    RenderInstructions,
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
from helikon.items import AgentInput, ContentPart, Item, ToolResult
from helikon.loop import (
    TABLE,
    TERMINAL,
    AgentSpec,
    ApprovalRoute,
    Done,
    ExecutingTools,
    LoopState,
    NeedsApproval,
    Outcome,
    RunState,
    aggregate,
    approval_request,
    delta_event,
    parse_json,
    pending_step,
    resume,
    resumed_step,
    schema_errors,
    start,
    transition,
)
from helikon.model import ModelEvent, ToolDef

# -- helpers -------------------------------------------------------------------


def interpreter(
    spec: AgentSpec, model: list[list[Any]], tools: dict[str, Any], callbacks: dict[str, Any] | None = None
) -> TestInterpreter:
    """A test interpreter; ``callbacks`` are the hooks, policy and approval handler."""
    return TestInterpreter(model=model, tools=tools, instructions=instructions_fn, **(callbacks or {}))


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
            steps = tuple(step for step in map(pending_step, phase.calls) if step is not None)
            return draw(steps_answered(ExecuteTools(steps)))
        if result_type is ApprovalsGiven and type(phase) is NeedsApproval:
            return draw(approvals_for(r for r in map(approval_request, phase.calls) if r is not None))
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
    spec = data.draw(governed(agent_specs(handoffs=handoff_lists(), governance=st.booleans())), label="spec")
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


#: A scripted run: the spec, its model turns, its tools, the run id, and the
#: hooks, policy and approval handler its governance asks.
Script = tuple[AgentSpec, list[list[Any]], dict[str, Any], str, dict[str, Any]]


@st.composite
def scripted_runs(draw: st.DrawFn) -> Script:
    spec = draw(governed(agent_specs()), label="spec")
    return (
        spec,
        draw(scripts(spec), label="scripts"),
        draw(tools_for(spec), label="tools"),
        draw(run_ids()),
        draw(callbacks_for(spec), label="callbacks"),
    )


@scaled(1.0)
@given(scripted_runs(), st.text(max_size=20))
def test_identical_inputs_give_identical_event_streams(run: Script, text: str) -> None:
    spec, model, tools, run_id, callbacks = run
    first = interpreter(spec, model, tools, callbacks).run(spec, text, run_id)
    second = interpreter(spec, model, tools, callbacks).run(spec, text, run_id)
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


# -- governed tool rounds ------------------------------------------------------------

#: Agents with tools and governance that fires hooks, asks a policy and asks humans.
ROUND_SPECS = governed(
    agent_specs(tools=tool_def_lists(min_size=1), output=st.none(), config=run_configs(st.integers(2, 6)))
)
ASKS = (AskApprovals, AwaitApproval)


def fed(out: Outcome, result: EffectResult, spec: AgentSpec) -> Outcome:
    """Feed ``result``; the step is deterministic, the same from a reloaded
    state, and its pending effect is what ``resume`` derives from its state."""
    first = transition(out.state, result, spec).unwrap()
    assert transition(out.state, result, spec).unwrap() == first
    reloaded = from_json(to_json(out.state), RunState)
    assert transition(reloaded, result, from_json(to_json(spec), AgentSpec)).unwrap() == first
    stored = resume(from_json(to_json(first.state), RunState), spec).unwrap().effect
    if type(first.state.phase) is ExecutingTools:
        # A stored round re-runs or reconciles its started calls (issue 36).
        phase = first.state.phase
        assert stored == ExecuteTools(tuple(s for s in (resumed_step(c, spec) for c in phase.calls) if s))
    else:
        assert stored == first.effect
    return first


def run_round(
    spec: AgentSpec, plan: TurnPlan, answer: Callable[[Outcome], EffectResult]
) -> tuple[list[Outcome], list[EffectResult]]:
    """One model turn of ``plan`` and its round of tool calls, every effect of
    the round answered by ``answer``: the outcomes and the results fed."""
    out = start(spec, AgentInput.from_user_text("go"), RunId("r"))
    if type(out.effect) is RenderInstructions:
        out = fed(out, InstructionsRendered("be brief"), spec)
    out = fed(out, ModelResponded(plan.events), spec)
    outcomes, results = [out], []
    while type(out.effect) in (ExecuteTools, *ASKS):
        result = answer(out)
        out = fed(out, result, spec)
        outcomes.append(out)
        results.append(result)
    return outcomes, results


@scaled(1.0)
@given(spec=ROUND_SPECS, data=st.data())
def test_a_governed_round_settles_every_call_in_call_order(spec: AgentSpec, data: st.DataObject) -> None:
    """Hooks, the policy, humans and the tools answer anything: each step asks
    at most one thing per call, humans only once no call has a step left, and
    the round ends with one result per call, in call order; a result that does
    not answer the steps is refused."""
    plans = turn_plans(spec.tools, min_calls=1, kinds=MOSTLY_VALID)
    plan = data.draw(plans, label="turn")
    governance = spec.governance

    def answer(out: Outcome) -> EffectResult:
        effect, phase = out.effect, out.state.phase
        if type(effect) is ExecuteTools:
            assert type(phase) is ExecutingTools
            assert effect.steps == tuple(s for s in map(pending_step, phase.calls) if s is not None)
            assert effect.steps
            wrong = data.draw(wrong_step_results(effect.steps), label="wrong")
            refused = transition(out.state, wrong, spec)
            assert isinstance(refused, Failure) and isinstance(refused.failure(), StepError)
            drawn = data.draw(steps_answered(effect), label="results")
            # Through the codec, as a durable interpreter stores them.
            result: EffectResult = from_json(to_json(drawn, EffectResult), EffectResult)
            return result
        assert type(phase) is NeedsApproval and type(effect) in ASKS
        assert type(effect) is (
            AskApprovals if governance.approvals is ApprovalRoute.HANDLER else AwaitApproval
        )
        assert all(pending_step(c) is None for c in phase.calls)
        assert effect.requests == tuple(r for r in map(approval_request, phase.calls) if r is not None)
        assert effect.requests
        return data.draw(approvals_for(effect.requests), label="decisions")

    outcomes, results = run_round(spec, plan, answer)
    calls = plan.tool_calls(RunId("r"), 1)
    # Each effect moves at least one call one stage on; a call has only so many.
    stages = 2 * len(governance.hooks) + 3 + len(governance.permissions.guard_rules)
    assert len(results) <= len(calls) * stages
    events = [e for out in outcomes for e in out.events]
    produced = [e.item for e in events if type(e) is ToolOutputItem]
    assert [(r.call_id, r.name) for r in produced] == [(c.call_id, c.name) for c in calls]
    last = outcomes[-1]
    assert type(last.effect) in (CallModel, RenderInstructions) or last.state.terminal
    assert [i for i in last.state.conversation if type(i) is ToolResult] == produced


@scaled(0.5)
@given(spec=ROUND_SPECS, data=st.data())
def test_asking_the_handler_or_suspending_asks_and_ends_alike(spec: AgentSpec, data: st.DataObject) -> None:
    """The approval route changes only the effect that asks: the same answers
    give the same events and the same conversation."""
    plan = data.draw(turn_plans(spec.tools, min_calls=1, kinds=MOSTLY_VALID))
    governance = attrs.evolve(spec.governance, approvals=ApprovalRoute.HANDLER)
    handler = attrs.evolve(spec, governance=governance)
    suspend = attrs.evolve(spec, governance=attrs.evolve(governance, approvals=ApprovalRoute.SUSPEND))

    def answer(out: Outcome) -> EffectResult:
        if type(out.effect) is ExecuteTools:
            drawn = data.draw(steps_answered(out.effect), label="results")
            result: EffectResult = from_json(to_json(drawn, EffectResult), EffectResult)
            return result
        assert isinstance(out.effect, AskApprovals | AwaitApproval)
        return data.draw(approvals_for(out.effect.requests), label="decisions")

    asked, answers = run_round(handler, plan, answer)
    fed_back = iter(answers)
    suspended, _ = run_round(suspend, plan, lambda out: next(fed_back))
    assert [o.events for o in suspended] == [o.events for o in asked]
    assert [o.appended for o in suspended] == [o.appended for o in asked]
    assert [o.state.conversation for o in suspended] == [o.state.conversation for o in asked]
    for a, b in zip(asked, suspended, strict=True):
        if type(a.effect) is AskApprovals:
            assert b.effect == AwaitApproval(a.effect.requests)
        else:
            assert b.effect == a.effect


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
def test_resuming_a_reloaded_state_at_any_step_gives_the_same_events(recorded: Script, text: str) -> None:
    """Dump the state after any step, load it (and the spec), resume: the same run."""
    spec, model, tools, run_id, callbacks = recorded
    input = AgentInput.from_user_text(text)
    whole = interpreter(spec, model, tools, callbacks).run(spec, input, run_id)
    for k in range(len(whole.steps) + 1):
        outcome, emitted = replay(spec, whole, input, k)
        loaded_spec = from_json(to_json(spec), AgentSpec)
        pending = resume(from_json(to_json(outcome.state), RunState), loaded_spec).unwrap()
        if pending.effect != outcome.effect:
            # A tool step the state marks started may have run: a stored state
            # re-runs it only if it may be re-run, and reconciles it otherwise.
            phase = outcome.state.phase
            assert type(phase) is ExecutingTools and type(outcome.effect) is ExecuteTools
            assert pending.effect == ExecuteTools(
                tuple(s for s in (resumed_step(c, spec) for c in phase.calls) if s is not None)
            )
            assert any(type(s) is ReconcileTool for s in pending.effect.steps)
            continue
        remaining = model[sum(type(s.effect) is CallModel for s in whole.steps[:k]) :]
        resumed = interpreter(spec, remaining, tools, callbacks).resume(loaded_spec, pending)
        assert [*emitted, *resumed.events] == list(whole.events)
        assert resumed.state == whole.state
        assert resumed.steps == whole.steps[k:]
