"""A round of tool calls: the pipelines of one turn's calls, joined in call order.

A model turn that asks for tools opens a round. Each runnable call enters its
own pipeline (:mod:`helikon.loop._calls`); the round asks for the pending step
of every call that has one, in one :class:`~helikon.effects.ExecuteTools`, and
feeds each result to its call as it comes: a result may answer any subset of
the steps, in any order, and the calls not answered keep waiting on their
step (so no call's pipeline waits for a sibling's step). Calls that need a human wait at a barrier:
once no call has a step left to run, the round asks every pending question at
once, of the approval handler (``AskApprovals``) or by suspending the run
(``AwaitApproval``) — the same questions, the same answers, the same events
either way. When every call is settled, the results join the conversation in
call order, then any system messages the hooks injected, and the next turn
starts (or the run fails: a second round in a row with invalid arguments).
"""

from __future__ import annotations

from returns.result import Failure, Result, Success

from helikon.effects import (
    ApprovalRequest,
    ApprovalsGiven,
    AskApprovals,
    AwaitApproval,
    CallModel,
    CallStep,
    Effect,
    ExecuteTools,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import AgentError, InvalidToolArgs, StepError
from helikon.events import AgentEvent, ApprovalRequested, ToolOutputItem, TurnStarted
from helikon.items import Item, ToolCall, ToolResult, system_text
from helikon.loop._calls import (
    Running,
    Settled,
    ToolCallState,
    approval_request,
    feed_approval,
    feed_step,
    output_text,
    pending_step,
    resumed_step,
    waits_on_step,
)
from helikon.loop._hot import facts, memo, set_state
from helikon.loop._outcome import Outcome, ok
from helikon.loop._spec import AgentSpec, ApprovalRoute
from helikon.loop._states import CallingModel, ExecutingTools, NeedsApproval, RunState
from helikon.loop._turns import begin_turn, evolve, fail
from helikon.loop._validate import parse_json
from helikon.model import ModelRequest, Usage

Step = Result[Outcome, StepError]


def advance_round(
    state: RunState,
    spec: AgentSpec,
    turn: int,
    calls: tuple[ToolCallState, ...],
    invalid: bool,
    events: list[AgentEvent],
    appended: list[Item],
    usage: Usage | None = None,
) -> Outcome:
    """The round's next outcome: run the pending steps, ask the pending
    questions, or settle the round.

    ``appended`` are items of this step not yet in ``state.conversation``
    (the model turn's message and calls, when the round opens), ``usage``
    the run's usage when this step changed it (one new state per step).
    """
    steps: list[CallStep] = []
    for call in calls:  # a loop, not a comprehension: no frame of its own (one per step)
        step = pending_step(call)
        if step is not None:
            steps.append(step)
    requests = [] if steps else [r for r in map(approval_request, calls) if r is not None]
    if steps or requests:
        conversation = state.conversation.append(appended) if appended else None
        if steps:
            running = evolve(
                state, phase=ExecutingTools(turn, calls, invalid), conversation=conversation, usage=usage
            )
            return Outcome(running, tuple(events), ExecuteTools(tuple(steps)), tuple(appended))
        waiting = evolve(
            state, phase=NeedsApproval(turn, calls, invalid), conversation=conversation, usage=usage
        )
        for r in requests:
            events.append(ApprovalRequested(r.call_id, r.tool, parse_json(r.arguments)[0]))
        return Outcome(waiting, tuple(events), _ask(spec, tuple(requests)), tuple(appended))
    return _settle(
        state, spec, turn, calls, invalid, events, appended, state.usage if usage is None else usage
    )


def round_effect(phase: ExecutingTools | NeedsApproval, spec: AgentSpec) -> Effect:
    """The effect a stored round waits on (for resuming): a started tool
    call is re-run or reconciled, never silently run again
    (:func:`~helikon.loop._calls.resumed_step`)."""
    if type(phase) is ExecutingTools:
        steps: list[CallStep] = []
        for call in phase.calls:
            step = resumed_step(call, spec)
            if step is not None:
                steps.append(step)
        return ExecuteTools(tuple(steps))
    requests = tuple(r for r in map(approval_request, phase.calls) if r is not None)
    return _ask(spec, requests)


def _ask(spec: AgentSpec, requests: tuple[ApprovalRequest, ...]) -> Effect:
    if spec.governance.approvals is ApprovalRoute.HANDLER:
        return AskApprovals(requests)
    return AwaitApproval(requests)


def on_tools_executed(state: RunState, result: ToolsExecuted, spec: AgentSpec) -> Step:
    """Feed each step's result to its call, in the order given.

    The results may answer any of the pending steps, in any order: each
    names its call by id, and the calls not answered keep waiting on the
    same step (an interpreter feeds each call's result as it comes, so one
    call's pipeline never waits for another's step). The round's results
    still join the conversation in call order, once every call is settled.
    """
    phase = state.phase
    if type(phase) is not ExecutingTools:
        return Failure(StepError("no tools were running"))
    if not result.results:
        return Failure(StepError("no step results"))
    events: list[AgentEvent] = []
    if len(phase.calls) == 1 and len(result.results) == 1:
        # The hot path: a round of one call, answered (no index to build).
        only, answer = phase.calls[0], result.results[0]
        if answer.call_id != only.call.call_id or not waits_on_step(only):
            return Failure(StepError(f"tool call {answer.call_id!r} has no step waiting for a result"))
        fed = feed_step(only, answer, spec)
        if isinstance(fed, str):
            return Failure(StepError(fed))
        events.extend(fed[1])
        return ok(advance_round(state, spec, phase.turn, (fed[0],), phase.invalid_args, events, []))
    waiting = {c.call.call_id: i for i, c in enumerate(phase.calls) if waits_on_step(c)}
    calls = list(phase.calls)
    for answer in result.results:
        index = waiting.pop(answer.call_id, None)
        if index is None:
            return Failure(StepError(f"tool call {answer.call_id!r} has no step waiting for a result"))
        fed = feed_step(calls[index], answer, spec)
        if isinstance(fed, str):
            return Failure(StepError(fed))
        calls[index] = fed[0]
        events.extend(fed[1])
    return ok(advance_round(state, spec, phase.turn, tuple(calls), phase.invalid_args, events, []))


def settle_one(
    state: RunState, phase: ExecutingTools, result: ToolsExecuted, spec: AgentSpec
) -> Outcome | None:
    """:func:`on_tools_executed` for the commonest answer, or None for any other.

    A round of one running call, answered by its tool's output, for an agent
    with no hooks: the call settles, its result joins the conversation and the
    next model turn starts, the outcome the general rule gives (the same
    state, events, effect and items) without a settled call state or a
    round step in between: the hot path of a tool loop.
    """
    calls = phase.calls
    results = result.results
    if len(calls) != 1 or len(results) != 1:
        return None
    only, answer = calls[0], results[0]
    call = only.call
    governance = spec.governance
    if (
        type(answer) is not ToolReturned
        or type(only.stage) is not Running
        or only.injected
        or answer.call_id != call.call_id
        or governance.hooks
    ):
        return None
    item = ToolResult(call.call_id, call.name, output_text(answer.output, governance))
    turn = phase.turn + 1
    hot = memo.get(id(spec))  # ``facts(spec)``, its hit inline
    if hot is None or hot.spec() is not spec:
        hot = facts(spec)
    settings = hot.settings
    if not hot.begins or settings is None:
        strikes = state.strikes + 1 if phase.invalid_args else 0
        state = evolve(
            state, phase=CallingModel(turn), conversation=state.conversation.append((item,)), strikes=strikes
        )
        return begin_turn(state, spec, [ToolOutputItem(item)], [item])
    # ``begin_turn``'s hot path and ``request``, inline; the carriers built
    # straight into their ``__dict__`` (see :data:`~helikon.loop._hot.BUILT_RAW`)
    calling: CallingModel = _new(CallingModel)
    fields = calling.__dict__
    fields["turn"] = turn
    fields["rendered"] = True
    appended = (item,)
    conversation = state.conversation.append(appended)
    # ``evolve(state, phase=..., conversation=..., strikes=...)``
    next_state: RunState = _new(RunState)
    fields = state.__dict__.copy()
    fields["phase"] = calling
    fields["conversation"] = conversation
    fields["strikes"] = state.strikes + 1 if phase.invalid_args else 0
    set_state(next_state, fields)
    request: ModelRequest = _new(ModelRequest)
    fields = request.__dict__
    fields["messages"] = conversation
    fields["tools"] = hot.model_tools
    fields["settings"] = settings
    fields["instructions"] = state.instructions
    effect: CallModel = _new(CallModel)
    fields = effect.__dict__
    fields["request"] = request
    fields["turn"] = turn
    outcome: Outcome = _new(Outcome)
    fields = outcome.__dict__
    fields["state"] = next_state
    fields["events"] = (ToolOutputItem(item), TurnStarted(turn))
    fields["effect"] = effect
    fields["appended"] = appended
    return outcome


_new = object.__new__


def on_approvals_given(state: RunState, result: ApprovalsGiven, spec: AgentSpec) -> Step:
    """Feed the humans' answers, each to the ask step of its call."""
    phase = state.phase
    if type(phase) is not NeedsApproval:
        return Failure(StepError("no approval was asked for"))
    answers = {d.call_id: d for d in result.decisions}
    waiting = [c.call.call_id for c in phase.calls if approval_request(c) is not None]
    if answered_before(state, result):
        # Answers given again (to an earlier question of this run): consumed
        # when first given, they change nothing; the run waits on.
        return Success(Outcome(state, (), round_effect(phase, spec)))
    missing = [cid for cid in waiting if cid not in answers]
    if missing:
        return Failure(StepError(f"no decision for tool call(s) {', '.join(missing)}"))
    unknown = sorted(cid for cid in answers if cid not in waiting)
    if unknown:
        return Failure(StepError(f"no approval was asked for tool call(s) {', '.join(unknown)}"))
    events: list[AgentEvent] = []
    calls: list[ToolCallState] = []
    for call in phase.calls:
        decision = answers.get(call.call.call_id)
        if decision is None or approval_request(call) is None:
            calls.append(call)
            continue
        fed, more = feed_approval(call, decision, spec)
        calls.append(fed)
        events.extend(more)
    return ok(advance_round(state, spec, phase.turn, tuple(calls), phase.invalid_args, events, []))


def answered_before(state: RunState, result: ApprovalsGiven) -> bool:
    """Whether every decision of ``result`` is about a tool call of this run
    that no longer waits for a human: answers delivered a second time, which
    were consumed when first given and change nothing."""
    if not result.decisions:
        return False
    phase = state.phase
    known = {item.call_id for item in state.conversation if type(item) is ToolCall}
    if type(phase) is ExecutingTools or type(phase) is NeedsApproval:
        waiting = {c.call.call_id for c in phase.calls if approval_request(c) is not None}
        known.update(c.call.call_id for c in phase.calls)
        known -= waiting
    return all(d.call_id in known for d in result.decisions)


def _settle(
    state: RunState,
    spec: AgentSpec,
    turn: int,
    calls: tuple[ToolCallState, ...],
    invalid: bool,
    events: list[AgentEvent],
    appended: list[Item],
    usage: Usage,
) -> Outcome:
    """Every call has its result: add them in call order, then the hooks'
    system messages; then fail or start the next turn."""
    failed: AgentError | None = None
    injected: list[Item] = []
    for call in calls:
        stage = call.stage
        assert type(stage) is Settled
        appended.append(stage.result)
        events.append(ToolOutputItem(stage.result))
        if call.injected:
            injected.extend(system_text(text) for text in call.injected)
        if stage.invalid:
            invalid = True
            if state.strikes >= 1 and failed is None:
                failed = InvalidToolArgs(call.call.name, stage.invalid)
    appended.extend(injected)
    if failed is not None:
        return fail(state, failed, events, appended, usage)
    # ``next_turn``, inline (the hot path of every tool round)
    strikes = state.strikes + 1 if invalid else 0
    conversation = state.conversation.append(appended)
    return begin_turn(
        evolve(state, phase=CallingModel(turn + 1), conversation=conversation, usage=usage, strikes=strikes),
        spec,
        events,
        appended,
    )


__all__ = [
    "advance_round",
    "answered_before",
    "on_approvals_given",
    "on_tools_executed",
    "round_effect",
    "settle_one",
]
