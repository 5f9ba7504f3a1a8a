"""The agent loop, driven by Hypothesis as a state machine.

The test machine holds the current :class:`Outcome` and answers its pending
effect the way some interpreter might: generated model turns, final answers,
model failures, tool outcomes, rendered instructions, interruptions, and
results that do not answer the effect at all. Agents come with drawn
governance (tool hooks, a permission policy, rules, modes and approval
routes), so tool calls walk their whole pipelines: each step of an
``ExecuteTools`` is answered with a generated hook, policy or tool result, and
each approval question with a random yes or no. Each step also checks that the
transition is deterministic and survives a JSON round trip of the state; the
invariants check what must hold of a whole run at every step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from returns.result import Failure, Success
from strategies import (
    MOSTLY_VALID,
    ONE_OF_EACH_RESULT,
    RESULTS,
    agent_inputs,
    agent_specs,
    approvals_for,
    carriers,
    fed_usage,
    final_answers,
    governed,
    handoff_lists,
    interruptions,
    model_failures,
    run_ids,
    steps_answered,
    tool_def_lists,
    turn_plans,
    usages,
    wrong_step_results,
)

from helikon.codec import from_json, to_json
from helikon.effects import (
    ApprovalDecision,
    ApprovalsGiven,
    AskApprovals,
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    EffectResult,
    ExecuteTools,
    GuardrailsChecked,
    Handoff,
    HandoffCompleted,
    HooksRan,
    InstructionsRendered,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    RenderInstructions,
    RunHooks,
    RunInterrupted,
    Terminate,
)
from helikon.errors import (
    AgentError,
    GuardrailTripped,
    InvalidStructuredOutput,
    ModelFailed,
    StepError,
)
from helikon.events import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    MessageOutput,
    PermissionDenied,
    RunCompleted,
    RunFailed,
    RunStarted,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.governance import PermissionSettings
from helikon.ids import CallId, RunId
from helikon.items import AgentInput, AssistantMessage, Item, ToolCall, ToolResult, system_text
from helikon.loop import (
    TABLE,
    AgentSpec,
    ApplyingHandoff,
    ApprovalRoute,
    CallingModel,
    CheckingOutput,
    Done,
    ExecutingTools,
    Failed,
    Finalizing,
    Governance,
    NeedsApproval,
    Outcome,
    RepairingOutput,
    RunState,
    Settled,
    StartingTurn,
    ToolCallState,
    approval_request,
    parse_json,
    pending_step,
    resume,
    resumed_step,
    schema_errors,
    start,
    transition,
)
from helikon.model import Usage

Rule = TypeVar("Rule", bound=Callable[..., None])

#: Per run: whether it may fail (model errors, trips, denials), be interrupted, and how deeply it is nested.
HAZARDS = st.tuples(st.booleans(), st.booleans(), st.integers(0, 3))
#: Agents that may hand off, with drawn governance over their own tools.
SPECS = governed(
    agent_specs(
        tools=st.one_of(tool_def_lists(min_size=1), tool_def_lists()),
        handoffs=handoff_lists(max_size=1),
        governance=st.booleans(),
    )
)
#: The approval effects, by route (DENY resolves every ask inside the core).
ASKING = {ApprovalRoute.HANDLER: AskApprovals, ApprovalRoute.SUSPEND: AwaitApproval}
#: Permission settings under which every runnable call just runs.
PERMISSIVE = PermissionSettings(guard_rules=())


def after_governance(phase: Any) -> Any:
    """The phase a run is headed for once its hooks and output guardrails pass."""
    match phase:
        case StartingTurn(next=nxt):
            return nxt
        case CheckingOutput(output=output):
            return Done(output)
    return phase


def runnable(call: ToolCall, spec: AgentSpec) -> bool:
    """Whether the loop lets ``call`` into its pipeline (a known tool, valid arguments)."""
    tool = spec.tool(call.name)
    if tool is None:
        return False
    value, error = parse_json(call.arguments or "{}")
    return error is None and not schema_errors(value, tool.parameters)


def calls_of(phase: Any) -> tuple[ToolCallState, ...]:
    """The tool calls of a round in progress (none in any other phase)."""
    return phase.calls if type(phase) in (ExecutingTools, NeedsApproval) else ()


def pending(*types: type) -> Callable[[Rule], Rule]:
    """Precondition: the pending effect is one of ``types``."""
    return precondition(lambda self: isinstance(self.out.effect, types))


def answered_in_order(conversation: tuple[Item, ...], allow_open_tail: bool) -> None:
    """Each block of tool calls is followed by exactly one result per call, in call order.

    ``allow_open_tail`` lets the last block go unanswered: its calls are still
    running or waiting for approval, or the run failed meanwhile.
    """
    i, end = 0, len(conversation)
    while i < end:
        calls: list[ToolCall] = []
        while i < end and isinstance(item := conversation[i], ToolCall):
            calls.append(item)
            i += 1
        results: list[ToolResult] = []
        while i < end and isinstance(item := conversation[i], ToolResult):
            results.append(item)
            i += 1
        if not calls and not results:
            i += 1
        elif not (allow_open_tail and not results and i == end):
            assert [(r.call_id, r.name) for r in results] == [(c.call_id, c.name) for c in calls]


class LoopMachine(RuleBasedStateMachine):
    """One agent run after another, each answered effect by effect."""

    out: Outcome
    spec: AgentSpec

    def begin_run(
        self, spec: AgentSpec, input: AgentInput, run_id: RunId, hazards: tuple[bool, bool, int]
    ) -> None:
        assert from_json(to_json(spec), AgentSpec) == spec
        # Runs that never fail (model errors, guardrail trips, hook denials) or
        # get interrupted go deeper: a per-run switch (swarm testing by hand)
        # instead of a failure on offer at every step.
        self.fallible, self.interruptible, depth = hazards
        self.spec = spec
        self.run_id = run_id
        self.out = start(spec, input, run_id, depth)
        self.events = list(self.out.events)
        self.appended = list(self.out.appended)
        self.input_items = len(input.items)
        self.usage = Usage()
        self.turns: list[int] = []
        self.first_turns = 0  # model calls in the CallingModel phase
        self.note_effect()

    def note_effect(self) -> None:
        effect = self.out.effect
        if type(effect) is CallModel:
            assert not self.turns or effect.turn > self.turns[-1], (self.turns, effect.turn)
            self.turns.append(effect.turn)
            started = [e.turn for e in self.events if type(e) is TurnStarted]
            assert started[-1] == effect.turn
            if type(self.out.state.phase) is CallingModel:
                self.first_turns += 1

    def feed(self, result: EffectResult) -> Outcome:
        """Feed ``result`` and check the step is deterministic and reload-proof."""
        state, spec = self.out.state, self.spec
        assert from_json(to_json(result, EffectResult), EffectResult) == result
        first = transition(state, result, spec)
        assert transition(state, result, spec) == first
        reloaded = from_json(to_json(state), RunState)
        assert reloaded == state
        assert transition(reloaded, result, spec) == first
        if isinstance(first, Failure):
            raise AssertionError(f"{type(result).__name__} answering {self.out.effect!r}: {first.failure()}")
        nxt: Outcome = first.unwrap()
        self.usage = self.usage + fed_usage(result)
        self.events.extend(nxt.events)
        self.appended.extend(nxt.appended)
        self.out = nxt
        self.note_effect()
        phase = nxt.state.phase
        event(
            f"reached {type(phase).__name__}"
            + (f"({type(phase.error).__name__})" if type(phase) is Failed else "")
        )
        if type(nxt.effect) is ExecuteTools:
            for kind in {type(step).__name__ for step in nxt.effect.steps}:
                event(f"asked for {kind}")
        return nxt

    # -- starting ------------------------------------------------------------

    @initialize(spec=SPECS, input=agent_inputs(), run_id=run_ids(), hazards=HAZARDS)
    def begin(
        self, spec: AgentSpec, input: AgentInput, run_id: RunId, hazards: tuple[bool, bool, int]
    ) -> None:
        self.begin_run(spec, input, run_id, hazards)

    @precondition(lambda self: self.out.state.terminal)
    @rule(result=carriers(EffectResult), spec=SPECS, input=agent_inputs(), run_id=run_ids(), hazards=HAZARDS)
    def run_again(
        self,
        result: EffectResult,
        spec: AgentSpec,
        input: AgentInput,
        run_id: RunId,
        hazards: tuple[bool, bool, int],
    ) -> None:
        """A finished run refuses any result; then a new run begins."""
        outcome = transition(self.out.state, result, self.spec)
        assert isinstance(outcome, Failure) and isinstance(outcome.failure(), StepError)
        self.begin_run(spec, input, run_id, hazards)

    # -- answering the pending effect -----------------------------------------
    #
    # One rule per effect type, plus ``answer_whatever_is_pending``: Hypothesis
    # disables a random subset of rules in each test case (swarm testing), and
    # a deep run needs every effect it meets answered.

    @pending(RenderInstructions)
    @rule(data=st.data())
    def instructions_rendered(self, data: st.DataObject) -> None:
        text = data.draw(st.text(max_size=20), label="instructions")
        out = self.feed(InstructionsRendered(text))
        assert type(out.effect) is CallModel
        assert out.effect.request.instructions == text

    @precondition(lambda self: type(self.out.state.phase) is CallingModel)
    @pending(CallModel)
    @rule(data=st.data())
    def model_responds(self, data: st.DataObject) -> None:
        calling = data.draw(st.booleans(), label="calls tools") and bool(self.spec.model_tools)
        plans = turn_plans(self.spec.model_tools, min_calls=int(calling), kinds=MOSTLY_VALID)
        plan = data.draw(plans, label="turn")
        out = self.feed(ModelResponded(plan.events))
        if plan.calls and not out.state.terminal:
            # The first transfer call wins over every other call of the turn.
            transfers = [c.name for c in plan.calls if self.spec.handoff(c.name) is not None]
            if transfers:
                handoff = self.spec.handoff(transfers[0])
                assert handoff is not None and out.effect == Handoff(
                    handoff.target, out.state.conversation, out.state.depth + 1
                )
            else:
                assert type(out.effect) in (
                    ExecuteTools,
                    AskApprovals,
                    AwaitApproval,
                    CallModel,
                    RenderInstructions,
                    RunHooks,
                )
            governance = self.spec.governance
            if governance in (Governance(), Governance(PERMISSIVE)) and not transfers:
                # No hooks, no policy, no rule that asks: every runnable call just runs.
                calls = [c for c in out.appended if type(c) is ToolCall and runnable(c, self.spec)]
                expected = tuple(
                    InvokeTool(c.call_id, c.name, parse_json(c.arguments or "{}")[0]) for c in calls
                )
                if expected:
                    assert out.effect == ExecuteTools(expected)
                else:
                    assert type(out.effect) is not ExecuteTools

    @precondition(lambda self: type(self.out.state.phase) in (Finalizing, RepairingOutput))
    @pending(CallModel)
    @rule(data=st.data())
    def model_answers_finally(self, data: st.DataObject) -> None:
        assert self.spec.output is not None
        valid = data.draw(st.booleans(), label="valid")
        repairing = type(self.out.state.phase) is RepairingOutput
        text = final_answers(self.spec.output.schema, valid)
        plan = data.draw(turn_plans(text=text, max_calls=0), label="answer")
        phase = after_governance(self.feed(ModelResponded(plan.events)).state.phase)
        if valid:
            assert phase == Done(plan.text)
        elif repairing:
            assert type(phase) is Failed and type(phase.error) is InvalidStructuredOutput
        else:
            assert type(phase) is RepairingOutput

    @pending(ExecuteTools)
    @rule(data=st.data())
    def tools_executed(self, data: st.DataObject) -> None:
        effect = self.out.effect
        assert type(effect) is ExecuteTools
        before = calls_of(self.out.state.phase)
        # Through the codec, as a durable interpreter stores the results.
        drawn = data.draw(steps_answered(effect), label="results")
        answers = from_json(to_json(drawn, EffectResult), EffectResult)
        out = self.feed(answers)
        self.check_round_step(before, out)
        if isinstance(out.effect, AskApprovals | AwaitApproval):
            assert out.effect == ASKING[self.spec.governance.approvals](out.effect.requests)

    @pending(AskApprovals, AwaitApproval)
    @rule(data=st.data())
    def approvals_given(self, data: st.DataObject) -> None:
        effect = self.out.effect
        assert isinstance(effect, AskApprovals | AwaitApproval)
        before = calls_of(self.out.state.phase)
        answers = data.draw(approvals_for(effect.requests), label="decisions")
        out = self.feed(answers)
        self.check_round_step(before, out)
        after = {c.call.call_id: c for c in calls_of(out.state.phase)}
        results = {e.item.call_id: e.item for e in out.events if type(e) is ToolOutputItem}
        denials = [e for e in out.events if type(e) is PermissionDenied]
        for decision in answers.decisions:
            if decision.approved:
                continue
            # A human's no is final: the call is denied.
            call = after.get(decision.call_id)
            result = results.get(decision.call_id)
            if result is None:
                assert call is not None and type(call.stage) is Settled
                result = call.stage.result
            assert result.is_error
            assert any(d.tool == result.name for d in denials)

    def check_round_step(self, before: tuple[ToolCallState, ...], out: Outcome) -> None:
        """One step of a round: calls keep their order, settled calls stay
        settled, and the round ends when, and only when, every call is settled."""
        after = calls_of(out.state.phase)
        if after:
            assert [c.call for c in after] == [c.call for c in before]
            for old, new in zip(before, after, strict=True):
                if old.settled:
                    assert new == old
            assert not all(c.settled for c in after)
        elif not out.state.terminal:
            # The round settled: one result per call, in call order.
            results = [e.item for e in out.events if type(e) is ToolOutputItem]
            assert [(r.call_id, r.name) for r in results] == [(c.call.call_id, c.call.name) for c in before]
        asked = [e for e in out.events if type(e) is ApprovalRequested]
        if isinstance(out.effect, AskApprovals | AwaitApproval):
            assert [e.call_id for e in asked] == [r.call_id for r in out.effect.requests]
        else:
            assert asked == []

    @pending(CheckGuardrails)
    @rule(data=st.data())
    def guardrails_pass(self, data: st.DataObject) -> None:
        phase = self.out.state.phase
        nxt = self.feed(GuardrailsChecked()).state.phase
        if type(phase) is CheckingOutput:
            assert nxt == Done(phase.output)

    @pending(RunHooks)
    @rule(data=st.data())
    def hooks_ran(self, data: st.DataObject) -> None:
        injected = data.draw(st.lists(st.text(max_size=10), max_size=2), label="injected")
        out = self.feed(HooksRan(None, tuple(injected)))
        assert out.appended == tuple(system_text(text) for text in injected)

    @pending(Handoff)
    @rule(data=st.data())
    def handoff_completed(self, data: st.DataObject) -> None:
        output = data.draw(st.text(max_size=20), label="output")
        usage = data.draw(usages(), label="usage")
        assert self.feed(HandoffCompleted(output, usage)).state.phase == Done(output)

    @precondition(lambda self: not self.out.state.terminal)
    @rule(data=st.data())
    def answer_whatever_is_pending(self, data: st.DataObject) -> None:
        match self.out.effect:
            case RenderInstructions():
                self.instructions_rendered(data)
            case CallModel() if type(self.out.state.phase) is CallingModel:
                self.model_responds(data)
            case CallModel():
                self.model_answers_finally(data)
            case ExecuteTools():
                self.tools_executed(data)
            case AskApprovals() | AwaitApproval():
                self.approvals_given(data)
            case CheckGuardrails():
                self.guardrails_pass(data)
            case RunHooks():
                self.hooks_ran(data)
            case Handoff():
                self.handoff_completed(data)

    # -- failing ------------------------------------------------------------------

    @precondition(lambda self: self.fallible)
    @pending(CallModel)
    @rule(failure=model_failures(), data=st.data())
    def model_fails(self, failure: Any, data: st.DataObject) -> None:
        partial = data.draw(turn_plans(self.spec.model_tools, finish=False), label="partial").events
        streamed = partial[: data.draw(st.integers(0, len(partial)), label="cut")]
        out = self.feed(ModelCallFailed(failure, streamed))
        assert out.state.phase == Failed(ModelFailed(failure))

    @precondition(lambda self: self.fallible)
    @pending(CheckGuardrails)
    @rule(tripwire=carriers(GuardrailTripped))
    def guardrail_trips(self, tripwire: GuardrailTripped) -> None:
        assert self.feed(GuardrailsChecked(tripwire)).state.phase == Failed(tripwire)

    @precondition(lambda self: self.fallible)
    @pending(RunHooks)
    @rule(reason=st.text(max_size=10))
    def hook_denies(self, reason: str) -> None:
        assert type(self.feed(HooksRan(reason)).state.phase) is Failed

    @precondition(lambda self: self.fallible)
    @pending(Handoff)
    @rule(output=st.text(max_size=20), usage=usages(), error=carriers(AgentError))
    def handoff_fails(self, output: str, usage: Usage, error: AgentError) -> None:
        assert self.feed(HandoffCompleted(output, usage, error)).state.phase == Failed(error)

    @precondition(lambda self: self.interruptible and not self.out.state.terminal)
    @rule(result=interruptions())
    def interrupted(self, result: RunInterrupted) -> None:
        assert self.feed(result).state.phase == Failed(result.reason)

    @precondition(lambda self: not self.out.state.terminal)
    @rule(data=st.data())
    def mismatched_result_refused(self, data: st.DataObject) -> None:
        """A result that does not answer the pending effect is a StepError, not a step."""
        result = data.draw(mismatched(self.out.state, self.out.effect), label="mismatched")
        outcome = transition(self.out.state, result, self.spec)
        assert isinstance(outcome, Failure), (self.out.effect, result)
        assert isinstance(outcome.failure(), StepError)

    @rule()
    def suspended_and_resumed(self) -> None:
        """Dump the outcome and the spec to JSON and carry on from the copies."""
        self.out = from_json(to_json(self.out), Outcome)
        self.spec = from_json(to_json(self.spec), AgentSpec)

    # -- invariants -----------------------------------------------------------

    @invariant()
    def run_starts_with_run_started(self) -> None:
        assert self.events[0] == RunStarted(self.spec.name, self.run_id)

    @invariant()
    def one_terminal_event_last(self) -> None:
        terminal = [i for i, e in enumerate(self.events) if isinstance(e, TERMINAL_EVENTS)]
        if self.out.state.terminal:
            assert terminal == [len(self.events) - 1]
        else:
            assert terminal == []

    @invariant()
    def terminal_state_terminates(self) -> None:
        if not self.out.state.terminal:
            assert type(self.out.effect) is not Terminate
            return
        assert type(self.out.effect) is Terminate
        for result in ONE_OF_EACH_RESULT:
            outcome = transition(self.out.state, result, self.spec)
            assert isinstance(outcome, Failure) and isinstance(outcome.failure(), StepError)

    @invariant()
    def effect_matches_phase(self) -> None:
        phase, effect = self.out.state.phase, self.out.effect
        match phase:
            case CallingModel(rendered=False):
                assert effect == RenderInstructions(phase.turn)
            case CallingModel() | Finalizing() | RepairingOutput():
                assert type(effect) is CallModel and effect.turn == phase.turn
            case ExecutingTools(calls=calls):
                # At most one step per call, in call order, and at least one step.
                assert effect == ExecuteTools(tuple(s for s in map(pending_step, calls) if s is not None))
                assert effect.steps
            case NeedsApproval(calls=calls):
                # Every call is settled or waits for a human, and the route says how to ask.
                requests = tuple(r for r in map(approval_request, calls) if r is not None)
                assert requests
                assert all(pending_step(c) is None for c in calls)
                route = self.spec.governance.approvals
                assert route is not ApprovalRoute.DENY
                assert effect == ASKING[route](requests)
            case ApplyingHandoff(target=target, transcript=transcript):
                assert effect == Handoff(target, transcript, self.out.state.depth + 1)
                assert transcript == self.out.state.conversation

    @invariant()
    def pending_effect_is_a_function_of_the_state(self) -> None:
        """What ``resume`` derives from the state alone is the effect the step
        asked for, except that the tool steps it marked started are asked as
        a stored state's are (re-run if idempotent, else reconciled: issue 36)."""
        expected = self.out.effect
        phase = self.out.state.phase
        if type(expected) is ExecuteTools and type(phase) is ExecutingTools:
            steps = (resumed_step(call, self.spec) for call in phase.calls)
            expected = ExecuteTools(tuple(step for step in steps if step is not None))
        assert resume(self.out.state, self.spec) == Success(Outcome(self.out.state, (), expected))

    @invariant()
    def conversation_is_everything_appended(self) -> None:
        assert self.out.state.conversation == tuple(self.appended)

    @invariant()
    def semantic_events_mirror_the_conversation(self) -> None:
        # The input is in the conversation but was never emitted as an event.
        produced = self.appended[self.input_items :]
        items = [e.item for e in self.events if isinstance(e, MessageOutput | ToolCallItem | ToolOutputItem)]
        assert items == [i for i in produced if isinstance(i, AssistantMessage | ToolCall | ToolResult)]

    @invariant()
    def tool_calls_answered_before_the_next_model_call(self) -> None:
        # Calls stay open while they are being handled, or when the run failed meanwhile.
        about_to_call_model = type(self.out.effect) in (CallModel, RenderInstructions)
        open_tail = not about_to_call_model and type(self.out.state.phase) is not Done
        answered_in_order(self.out.state.conversation, allow_open_tail=open_tail)

    @invariant()
    def model_calls_within_limits(self) -> None:
        max_turns = self.spec.config.max_turns
        assert self.first_turns <= max_turns
        assert len(self.turns) <= max_turns + 2

    @invariant()
    def usage_is_the_sum_fed(self) -> None:
        assert self.out.state.usage == self.usage
        last = self.events[-1]
        if isinstance(last, RunCompleted | RunFailed):
            assert last.usage == self.usage

    @invariant()
    def outcome_round_trips(self) -> None:
        assert from_json(to_json(self.out), Outcome) == self.out


def mismatched(state: RunState, effect: Any) -> st.SearchStrategy[EffectResult]:
    """Results that do not answer ``effect``: any the phase does not accept at
    all, and the subtler ones its handler must refuse itself."""
    phase = type(state.phase)
    options = [carriers(r) for r in RESULTS if (phase, r) not in TABLE]
    match effect:
        case RenderInstructions():  # the model has not been called yet
            options += [carriers(ModelResponded), carriers(ModelCallFailed)]
        case CallModel() if phase is CallingModel:  # the instructions are already rendered
            options.append(carriers(InstructionsRendered))
        case ExecuteTools(steps=steps):
            options.append(wrong_step_results(steps))
        case AskApprovals(requests=requests) | AwaitApproval(requests=requests):
            # A decision missing, or one for a call nobody asked about.
            decisions = [ApprovalDecision(r.call_id, True) for r in requests]
            stranger = ApprovalDecision(CallId(max((r.call_id for r in requests), key=len) + "?"), True)
            options.append(st.just(ApprovalsGiven(tuple(decisions[1:]))))
            options.append(st.just(ApprovalsGiven((*decisions, stranger))))
    return st.one_of(options)


LoopMachine.TestCase.settings = settings(stateful_step_count=25)
TestLoop = LoopMachine.TestCase
