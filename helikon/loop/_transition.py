"""The agent loop's rules: how each phase answers each effect result.

Each handler takes the current state, the result of the pending effect and
the agent's spec, and returns the next :class:`Outcome`. Handlers are pure:
the same arguments always give the same outcome. They are wired to
``(phase, result)`` pairs in :mod:`helikon.loop._table`, which is the only
place that decides which handler runs.

The rules, after the book:

- each model turn emits ``TurnStarted``; a turn that asks for tools runs them
  and starts the next turn; a turn that asks for none ends the run (or, with
  an output schema, moves to the finalizing turn);
- asking for tools on the last allowed turn (``turn == max_turns``) fails
  with ``MaxTurnsExceeded`` without running them;
- a call to an unknown tool is answered with an error result;
- arguments that are not JSON or break the tool's schema are answered with
  the schema errors; a second round in a row with invalid arguments fails
  the run with ``InvalidToolArgs``;
- tool results join the conversation in call order;
- a structured-output run validates the finalizing turn's text against the
  schema, repairs once, then fails with ``InvalidStructuredOutput``;
- a failed model call fails the run; an interruption (cancel, timeout) fails
  it from any phase.
"""

from __future__ import annotations

from typing import Final

import attrs
import msgspec
from returns.result import Failure, Result, Success

from helikon._conversation import EMPTY
from helikon._json import JsonValue
from helikon.effects import (
    CallModel,
    CheckGuardrails,
    Effect,
    ExecuteTools,
    GuardrailsChecked,
    Handoff,
    HandoffCompleted,
    HooksRan,
    InstructionsFailed,
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
    InvalidArgs,
    InvalidStructuredOutput,
    InvalidToolArgs,
    MaxAgentDepthExceeded,
    MaxTurnsExceeded,
    ModelFailed,
    OtherError,
    StepError,
    describe,
)
from helikon.events import (
    AgentEvent,
    AgentUpdated,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    RepairStarted,
    RunCompleted,
    RunStarted,
    StructuredOutputFailed,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.ids import CallId, RunId, derive_call_id
from helikon.items import (
    AgentInput,
    AssistantMessage,
    ContentPart,
    Item,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    text_of,
    user_text,
)
from helikon.loop._aggregate import Response, aggregate
from helikon.loop._calls import RUNNING, ToolCallState, open_call, settled
from helikon.loop._check import state_problems
from helikon.loop._hot import check_of, facts, memo, set_state
from helikon.loop._limits import exceeded, spend, turn_usage
from helikon.loop._outcome import Outcome, ok
from helikon.loop._round import advance_round, round_effect
from helikon.loop._spec import AgentSpec, HandoffSpec
from helikon.loop._states import (
    ApplyingHandoff,
    CallingModel,
    CheckingInput,
    CheckingOutput,
    Done,
    ExecutingTools,
    Failed,
    Finalizing,
    NeedsApproval,
    RepairingOutput,
    RunState,
    StartingTurn,
)
from helikon.loop._turns import begin_turn, complete, evolve, fail, request, turn_effect
from helikon.loop._validate import decode, parse_json, schema_errors
from helikon.model import Finish, ModelEvent, ToolCallChunk, ToolDef, Usage

#: Asked after a plain-text answer when the agent has an output schema.
FINALIZE_PROMPT = (
    "Now give your final answer as a single JSON value matching the `{name}` schema, with no other text."
)
#: Asked once when the final answer failed validation.
REPAIR_PROMPT = (
    "Your previous answer did not match the `{name}` schema:\n{errors}\n"
    "Reply again with only a JSON value that matches the schema."
)

Step = Result[Outcome, StepError]


def start(spec: AgentSpec, input: AgentInput, run_id: RunId, depth: int = 0) -> Outcome:
    """Begin a run: the first state, events and effect.

    ``depth`` is how deeply the run is nested in handoffs and sub-agent runs;
    beyond ``max_agent_depth`` the run fails at once.

    >>> out = start(AgentSpec("a"), AgentInput.from_user_text("hi"), RunId("r"))
    >>> out.events
    (RunStarted(agent='a', run_id='r', path=()), TurnStarted(turn=1, path=()))
    >>> type(out.effect).__name__
    'CallModel'
    """
    phase = _first_phase(spec)
    state = RunState(run_id, spec.name, phase, input.items, instructions=spec.instructions, depth=depth)
    if depth > spec.config.max_agent_depth:
        error = MaxAgentDepthExceeded(spec.config.max_agent_depth)
        empty = evolve(state, conversation=EMPTY)
        return fail(empty, error, [RunStarted(spec.name, run_id)], list(input.items), state.usage)
    if spec.input_guardrails:
        text = "\n".join(text_of(i.content) for i in input.items if isinstance(i, UserMessage))
        checking = evolve(state, phase=CheckingInput())
        return Outcome(
            checking, (RunStarted(spec.name, run_id),), CheckGuardrails("input", text), input.items
        )
    return begin_turn(state, spec, [RunStarted(spec.name, run_id)], list(input.items))


def _first_phase(spec: AgentSpec) -> CallingModel | Finalizing:
    return Finalizing(1) if spec.output is not None and not spec.model_tools else CallingModel(1)


def resume(state: RunState, spec: AgentSpec) -> Step:
    """The outcome to continue a run from a stored ``state``: its pending effect.

    The pending effect is a function of the state, so a state saved at any
    effect boundary is all it takes to pick the run up again (with the same
    agent definition). Resuming emits no events.

    >>> out = start(AgentSpec("a"), AgentInput.from_user_text("hi"), RunId("r"))
    >>> resume(out.state, AgentSpec("a")).unwrap().effect == out.effect
    True
    """
    problems = state_problems(state, spec)
    if problems:
        return Failure(StepError(f"the state does not fit agent {spec.name!r}: " + "; ".join(problems)))
    effect: Effect
    match state.phase:
        case CallingModel(turn=turn, rendered=False):
            effect = RenderInstructions(turn)
        case CallingModel(turn=turn) | Finalizing(turn=turn) | RepairingOutput(turn=turn):
            effect = CallModel(request(state, spec), turn)
        case ExecutingTools() | NeedsApproval():
            effect = round_effect(state.phase, spec)
        case ApplyingHandoff(target=target, transcript=transcript):
            effect = Handoff(target, transcript, state.depth + 1)
        case StartingTurn(turn=turn):
            effect = RunHooks(turn)
        case CheckingInput():
            text = "\n".join(text_of(i.content) for i in state.conversation if isinstance(i, UserMessage))
            effect = CheckGuardrails("input", text)
        case CheckingOutput(output=output):
            effect = CheckGuardrails("output", output)
        case Done() | Failed():
            effect = Terminate()
        case _:
            return Failure(StepError(f"cannot resume a run in phase {type(state.phase).__name__}"))
    return Success(Outcome(state, (), effect))


def _assistant_message(response: Response, spec: AgentSpec) -> AssistantMessage | None:
    if not response.reasoning and not response.text_parts:
        return None  # tool calls only
    content: tuple[ContentPart, ...] = response.reasoning
    content = (*content, *(TextPart(text) for text in response.text_parts))
    return AssistantMessage(content, spec.name) if content else None


def _check_call(
    call: ToolCall, spec: AgentSpec
) -> tuple[ToolResult | None, tuple[str, ...], JsonValue, ToolDef | None]:
    """Answer a call the loop rejects itself: ``(error result, schema errors,
    arguments, tool)``.

    A runnable call gives ``(None, (), its parsed arguments, its tool)``; an
    unknown tool an error result and no schema errors; invalid arguments an
    error result and their errors.
    """
    tool = spec.tool(call.name)
    if tool is None:
        available = ", ".join(t.name for t in spec.tools) or "none"
        message = f"unknown tool {call.name!r}; available tools: {available}"
        return ToolResult(call.call_id, call.name, message, is_error=True), (), None, None
    value, error = parse_json(call.arguments or "{}")
    errors = (error,) if error is not None else schema_errors(value, tool.parameters)
    if not errors:
        return None, (), value, tool
    return (
        ToolResult(call.call_id, call.name, describe(InvalidArgs(errors)), is_error=True),
        errors,
        None,
        tool,
    )


# -- handlers ------------------------------------------------------------------


def on_instructions_rendered(state: RunState, result: InstructionsRendered, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not CallingModel or phase.rendered:
        return Failure(StepError("instructions were not asked for"))
    state = attrs.evolve(state, phase=CallingModel(phase.turn), instructions=result.text)
    return Success(Outcome(state, (), CallModel(request(state, spec), phase.turn)))


def on_instructions_failed(state: RunState, result: InstructionsFailed, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not CallingModel or phase.rendered:
        return Failure(StepError("instructions were not asked for"))
    error = OtherError(f"the instructions of agent {spec.name!r} failed: {result.message}")
    return Success(fail(state, error, [], [], state.usage))


def on_model_responded(state: RunState, result: ModelResponded, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not CallingModel or not phase.rendered:
        return Failure(StepError("the model was not called"))
    turn = phase.turn
    response = aggregate(result.events, state.run_id, turn)
    cost, usage = spend(state.usage, response.usage, spec.price)
    events: list[AgentEvent] = []
    appended: list[Item] = []
    message = _assistant_message(response, spec)
    if message is not None:
        appended.append(message)
        # The turn's cost on the event that closes it (its last tool call's, else this).
        events.append(MessageOutput(message, cost=None if response.calls else cost))
    if not response.calls:
        if spec.output is not None:
            output = spec.output
            appended.append(user_text(FINALIZE_PROMPT.format(name=output.name)))
            state = evolve(
                state,
                phase=Finalizing(turn + 1),
                conversation=state.conversation.append(appended),
                usage=usage,
            )
            return Success(begin_turn(state, spec, events, appended))
        conversation = state.conversation.append(appended)
        return ok(complete(state, spec, response.text, events, appended, usage, conversation))

    for call in response.calls:
        appended.append(call)
        events.append(ToolCallItem(call))
    if cost is not None:
        events[-1] = ToolCallItem(response.calls[-1], cost=cost)
    if turn >= spec.config.max_turns:
        return Success(fail(state, MaxTurnsExceeded(spec.config.max_turns), events, appended, usage))

    if spec.handoffs:
        for call in response.calls:
            handoff = spec.handoff(call.name)
            if handoff is not None:
                return Success(_hand_off(state, spec, handoff, response.calls, events, appended, usage))

    calls: list[ToolCallState] = []
    invalid = False
    pipeline_events: list[AgentEvent] = []
    runnable = 0
    for call in response.calls:
        rejected, arg_errors, args, tool = _check_call(call, spec)
        if rejected is None:
            opened, more = open_call(call, spec, args, tool)
            calls.append(opened)
            runnable += 1
            pipeline_events.extend(more)
            continue
        calls.append(settled(call, rejected))
        if arg_errors:
            if state.strikes >= 1:
                return Success(fail(state, InvalidToolArgs(call.name, arg_errors), events, appended, usage))
            invalid = True
    if runnable:
        # Before the round of tool calls: the model's turn is spent already.
        limits = spec.config.usage_limits
        broken = None if limits.unlimited else exceeded(limits, usage, tool_calls=runnable, agent=spec.name)
        if broken is not None:
            return Success(fail(state, broken, events, appended, usage))
        usage = Usage(  # ``usage + Usage(tool_calls=runnable)``, made once
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.reasoning_tokens,
            usage.cache_creation_input_tokens,
            usage.requests,
            usage.tool_calls + runnable,
            usage.cost,
        )
    events.extend(pipeline_events)
    return ok(advance_round(state, spec, turn, tuple(calls), invalid, events, appended, usage))


def in_pieces(
    events: tuple[ModelEvent, ...],
) -> tuple[str | None, str, str, Usage | None, Finish] | None:
    """One tool call streamed in pieces, as live providers stream it (a chunk
    with its id and name, then its arguments chunk by chunk, all of one
    index), with at most one usage, then the finish: the call's id, name and
    arguments as :func:`~helikon.loop._aggregate.aggregate` merges them (the
    first id given, the first name given, the arguments joined), the usage
    and the finish; None for any other answer, and for one with an id or a
    name that is not ASCII in any piece (the general rule checks every
    piece's for normal form, the ids and names it drops included)."""
    finish = events[-1]
    first = events[0]
    if type(finish) is not Finish:
        return None
    if type(first) is Usage:  # the usage first: the call from the next event
        first = events[1]
    if type(first) is not ToolCallChunk or first.index is None:
        return None
    index = first.index
    call_id: str | None = None
    name = ""
    arguments: list[str] = []
    reported: Usage | None = None
    for event in events[:-1]:
        kind = type(event)
        if kind is ToolCallChunk:
            piece: ToolCallChunk = event  # type: ignore[assignment]
            if piece.index != index:
                return None  # another call (or one found by its id): the general rule
            given_id, given_name = piece.call_id, piece.name
            if (given_id is not None and not given_id.isascii()) or (
                given_name is not None and not given_name.isascii()
            ):
                return None  # maybe not in normal form: the general rule reads every piece's
            if call_id is None:
                call_id = piece.call_id
            if not name and piece.name:
                name = piece.name
            if piece.arguments:
                arguments.append(piece.arguments)
        elif kind is Usage and reported is None:
            reported = event  # type: ignore[assignment]
        else:
            return None
    return call_id, name, "".join(arguments), reported, finish


def one_call_turn(state: RunState, turn: int, result: ModelResponded, spec: AgentSpec) -> Outcome | None:
    """:func:`on_model_responded` for the commonest answer, or None for any other.

    The answer is one tool call (a single :class:`~helikon.model.ToolCallChunk`,
    or one streamed in pieces as live providers stream it: see :func:`in_pieces`)
    and its finish, with the usage the model reported (one
    :class:`~helikon.model.Usage`, before, between or after the chunks) or none (a model
    that reports none, a replayed one), in normal form; the agent has no
    handoffs, no price, no usage limit and no hooks, the call's tool exists,
    its arguments fit, and the rules allow it whatever its arguments. The
    outcome is the one the general rule gives (the same state, events, effect
    and items), made without aggregating a response or stepping through the
    round: the hot path of a tool loop. ``turn`` is the state's turn (its
    phase a rendered :class:`CallingModel`).

    Its carriers are built straight into their ``__dict__`` (see
    :data:`~helikon.loop._hot.BUILT_RAW`): what their ``__init__`` does, one
    Python call fewer each.
    """
    events = result.events
    size = len(events)
    chunk: object = None
    reported: Usage | None = None
    finish: object = None
    if size == 3:
        chunk, second, finish = events
        if type(chunk) is Usage:  # the usage first: the same response
            chunk, second = second, chunk
        if type(second) is Usage:
            reported = second
        else:
            chunk = None  # a call in pieces, maybe
    elif size == 2:
        chunk, finish = events
    call_id: str | None
    name: str | None
    if type(chunk) is ToolCallChunk and type(finish) is Finish:
        call_id, name, arguments = chunk.call_id, chunk.name, chunk.arguments
    else:
        pieces = in_pieces(events) if size > 2 else None
        if pieces is None:
            return None
        call_id, name, arguments, reported, finish = pieces
    assert type(finish) is Finish
    rid = finish.response_id
    if not (  # in normal form (see ``_model_form``): ASCII text is
        (call_id is None or call_id.isascii())
        and (name is None or name.isascii())
        and arguments.isascii()
        and (rid is None or rid.isascii())
    ):
        return None
    hot = memo.get(id(spec))  # ``facts(spec)``, its hit inline
    if hot is None or hot.spec() is not spec:
        hot = facts(spec)  # no handoffs, price, usage limit or tool hooks, if it has calls
    name = name or ""
    entry = hot.calls.get(name)  # the tool, if the rules allow a call of it whatever its arguments
    if entry is None or turn >= hot.max_turns:
        return None
    try:
        args = decode(arguments or "{}")
    except msgspec.DecodeError:
        return None  # not JSON: the general rule answers it (before it reads the schema)
    fits = entry[1]
    if fits is None:
        fits = check_of(hot, name)
    if not fits(args):
        return None
    # ``CallId(call_id)``, without the ``NewType`` call
    made: CallId = call_id if call_id else derive_call_id(state.run_id, turn, 0)  # type: ignore[assignment]
    call = ToolCall(made, name, arguments)
    # ``spend`` with the one tool call counted (what the general rule makes in two usages)
    _, usage = spend(state.usage, _NO_USAGE if reported is None else reported, None, 1)
    appended = (call,)
    # ``ToolCallState(call, args, RUNNING)`` and ``ExecutingTools(turn, (that,))``
    opened: ToolCallState = _new(ToolCallState)
    fields = opened.__dict__
    fields["call"] = call
    fields["args"] = args
    fields["stage"] = RUNNING
    fields["injected"] = ()
    phase: ExecutingTools = _new(ExecutingTools)
    fields = phase.__dict__
    fields["turn"] = turn
    fields["calls"] = (opened,)
    fields["invalid_args"] = False
    # ``evolve(state, phase=..., conversation=..., usage=...)``
    running: RunState = _new(RunState)
    fields = state.__dict__.copy()
    fields["phase"] = phase
    fields["conversation"] = state.conversation.append(appended)
    fields["usage"] = usage
    set_state(running, fields)
    # ``ExecuteTools((InvokeTool(made, name, args),))``
    invoke: InvokeTool = _new(InvokeTool)
    fields = invoke.__dict__
    fields["call_id"] = made
    fields["tool"] = name
    fields["args"] = args
    effect: ExecuteTools = _new(ExecuteTools)
    effect.__dict__["steps"] = (invoke,)
    outcome: Outcome = _new(Outcome)
    fields = outcome.__dict__
    fields["state"] = running
    fields["events"] = (ToolCallItem(call),)
    fields["effect"] = effect
    fields["appended"] = appended
    return outcome


_new = object.__new__
#: The usage of an answer that reports none (the general rule counts it as this).
_NO_USAGE: Final = Usage()


def _hand_off(
    state: RunState,
    spec: AgentSpec,
    handoff: HandoffSpec,
    calls: tuple[ToolCall, ...],
    events: list[AgentEvent],
    appended: list[Item],
    usage: Usage,
) -> Outcome:
    """The first transfer call of a turn wins; the turn's other calls are not run."""
    target = handoff.target
    winner = next(call.call_id for call in calls if call.name == handoff.tool_name)
    for call in calls:
        if call.call_id == winner:
            result = ToolResult(call.call_id, call.name, f"Transferred to {target}.")
        else:
            message = f"Not run: the conversation was handed off to {target}."
            result = ToolResult(call.call_id, call.name, message, is_error=True)
        appended.append(result)
        events.append(ToolOutputItem(result))
    events.append(HandoffItem(spec.name, target))
    events.append(AgentUpdated(target))
    conversation = state.conversation.append(appended)
    transcript = tuple(conversation)
    state = evolve(state, phase=ApplyingHandoff(target, transcript), conversation=conversation, usage=usage)
    return Outcome(state, tuple(events), Handoff(target, transcript, state.depth + 1), tuple(appended))


def on_handoff_completed(state: RunState, result: HandoffCompleted, spec: AgentSpec) -> Step:
    if type(state.phase) is not ApplyingHandoff:
        return Failure(StepError("no handoff was running"))
    usage = state.usage + result.usage
    if result.error is not None:
        return Success(fail(state, result.error, [], [], usage))
    final = evolve(state, phase=Done(result.output), usage=usage)
    return Success(Outcome(final, (RunCompleted(usage),), Terminate()))


def on_input_checked(state: RunState, result: GuardrailsChecked, spec: AgentSpec) -> Step:
    if type(state.phase) is not CheckingInput:
        return Failure(StepError("no input check was running"))
    if result.tripwire is not None:
        trip = result.tripwire
        return Success(fail(state, trip, [GuardrailTriggered(trip.kind, trip.info)], [], state.usage))
    return Success(begin_turn(evolve(state, phase=_first_phase(spec)), spec, [], []))


def on_output_checked(state: RunState, result: GuardrailsChecked, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not CheckingOutput:
        return Failure(StepError("no output check was running"))
    if result.tripwire is not None:
        trip = result.tripwire
        return Success(fail(state, trip, [GuardrailTriggered(trip.kind, trip.info)], [], state.usage))
    final = evolve(state, phase=Done(phase.output))
    return Success(Outcome(final, (RunCompleted(state.usage),), Terminate()))


def on_hooks_ran(state: RunState, result: HooksRan, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not StartingTurn:
        return Failure(StepError("no hooks were running"))
    if result.denied is not None:
        error = OtherError(f"a hook stopped the run before turn {phase.turn}: {result.denied}")
        return Success(fail(state, error, [], [], state.usage))
    injected: list[Item] = [system_text(text) for text in result.injected]
    state = evolve(state, phase=phase.next, conversation=state.conversation.append(injected))
    return Success(turn_effect(state, spec, [], injected))


def on_final_response(state: RunState, result: ModelResponded, spec: AgentSpec) -> Step:
    phase = state.phase
    if type(phase) is not Finalizing and type(phase) is not RepairingOutput:
        return Failure(StepError("no final answer was asked for"))
    output = spec.output
    if output is None:
        return Failure(StepError("the agent has no output schema"))
    response = aggregate(result.events, state.run_id, phase.turn)
    cost, usage = spend(state.usage, response.usage, spec.price)
    events: list[AgentEvent] = []
    appended: list[Item] = []
    message = _assistant_message(response, spec)
    if message is not None:
        appended.append(message)
        events.append(MessageOutput(message, cost=cost))
    value, error = parse_json(response.text)
    errors = (error,) if error is not None else schema_errors(value, output.schema)
    conversation = state.conversation.append(appended)
    if not errors:
        return Success(complete(state, spec, response.text, events, appended, usage, conversation))
    if type(phase) is Finalizing:
        prompt = user_text(REPAIR_PROMPT.format(name=output.name, errors="\n".join(errors)))
        appended.append(prompt)
        events.append(RepairStarted(1))
        state = evolve(
            state,
            phase=RepairingOutput(phase.turn + 1),
            conversation=conversation.append((prompt,)),
            usage=usage,
        )
        return Success(begin_turn(state, spec, events, appended))
    events.append(StructuredOutputFailed(errors, response.text))
    error_value = InvalidStructuredOutput(errors, response.text)
    return Success(fail(state, error_value, events, appended, usage))


def on_model_call_failed(state: RunState, result: ModelCallFailed, spec: AgentSpec) -> Step:
    if type(state.phase) is CallingModel and not state.phase.rendered:
        return Failure(StepError("the model was not called"))
    partial = aggregate(result.events, state.run_id, 0)
    usage = state.usage + turn_usage(partial.usage, spec.price)
    return Success(fail(state, ModelFailed(result.failure), [], [], usage))


def on_interrupted(state: RunState, result: RunInterrupted, spec: AgentSpec) -> Step:
    return Success(fail(state, result.reason, [], [], state.usage))


__all__ = [
    "FINALIZE_PROMPT",
    "REPAIR_PROMPT",
    "on_final_response",
    "on_hooks_ran",
    "on_input_checked",
    "on_output_checked",
    "on_handoff_completed",
    "on_instructions_failed",
    "on_instructions_rendered",
    "on_interrupted",
    "on_model_call_failed",
    "on_model_responded",
    "resume",
    "start",
]
