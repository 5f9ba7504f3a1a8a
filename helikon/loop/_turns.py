"""What every rule of the loop shares: starting a turn, failing, completing.

These helpers build the next :class:`~helikon.loop.Outcome` from a state and
the events and items a rule has gathered so far; the rules themselves live in
:mod:`helikon.loop._transition` (model turns, handoffs, guardrails) and
:mod:`helikon.loop._round` (a round of tool calls).
"""

from __future__ import annotations

import attrs

from helikon._conversation import Conversation
from helikon.effects import CallModel, CheckGuardrails, Effect, RenderInstructions, RunHooks, Terminate
from helikon.errors import AgentError
from helikon.events import AgentEvent, RunCompleted, RunFailed, TurnStarted
from helikon.items import Item, ToolCall, UserMessage
from helikon.loop._hot import set_state
from helikon.loop._limits import exceeded
from helikon.loop._outcome import Outcome
from helikon.loop._spec import AgentSpec
from helikon.loop._states import (
    CallingModel,
    CheckingOutput,
    Done,
    Failed,
    Finalizing,
    LoopState,
    RepairingOutput,
    RunState,
    StartingTurn,
)
from helikon.model import JsonSchema, ModelRequest, ToolChoiceNamed, ToolChoiceRequired, Usage

#: The fields of :class:`RunState` (:func:`evolve` carries every field over; a test checks this list).
EVOLVED_FIELDS = (
    "run_id",
    "agent",
    "phase",
    "conversation",
    "usage",
    "instructions",
    "strikes",
    "depth",
    "definition",
    "deadline",
    "timeout",
)


def evolve(
    state: RunState,
    *,
    phase: LoopState | None = None,
    conversation: Conversation | None = None,
    usage: Usage | None = None,
    strikes: int | None = None,
) -> RunState:
    """``attrs.evolve`` for the loop's hot path (the loop makes one or two per
    step, and a copy of the fields is several times faster than a constructor
    call). Every field not named is carried over, whatever fields
    :class:`RunState` has."""
    # A copy of the state's fields, then the changed ones: what ``RunState.__init__``
    # gives (the conversation is one already: its converter would return it as it is),
    # set at once (``RunState`` is a dict class for this: see ``_hot.set_state``).
    fields = state.__dict__.copy()
    if phase is not None:
        fields["phase"] = phase
    if conversation is not None:
        fields["conversation"] = conversation
    if usage is not None:
        fields["usage"] = usage
    if strikes is not None:
        fields["strikes"] = strikes
    new: RunState = _new(RunState)
    set_state(new, fields)
    return new


_new = object.__new__


def request(state: RunState, spec: AgentSpec) -> ModelRequest:
    messages = state.conversation  # shared, not copied: it only grows (see helikon._conversation)
    if type(state.phase) is CallingModel or spec.output is None:
        settings = spec.settings
        choice = settings.tool_choice
        if type(choice) in _FORCED and not choice.keep and _forced_tool_called(state.conversation, choice):  # type: ignore[union-attr]
            settings = attrs.evolve(settings, tool_choice=None)
        return ModelRequest(messages, spec.model_tools, settings, state.instructions)
    output = spec.output
    settings = attrs.evolve(
        spec.settings,
        response_format=JsonSchema(output.name, output.schema, strict=True),
        tool_choice=None,
    )
    return ModelRequest(messages, (), settings, state.instructions)


_FORCED = (ToolChoiceRequired, ToolChoiceNamed)


def _forced_tool_called(conversation: Conversation, choice: object) -> bool:
    """Whether the model called the tool a forced ``choice`` asks for since the
    latest user message (then the choice has done its work: the model chooses)."""
    name = choice.name if type(choice) is ToolChoiceNamed else None
    for item in reversed(conversation):
        if type(item) is UserMessage:
            return False
        if type(item) is ToolCall and (name is None or item.name == name):
            return True
    return False


def begin_turn(state: RunState, spec: AgentSpec, events: list[AgentEvent], appended: list[Item]) -> Outcome:
    """Emit TurnStarted and ask for the turn's first effect — unless the
    model call would break a usage limit: then the run fails here."""
    phase = state.phase
    assert isinstance(phase, CallingModel | Finalizing | RepairingOutput)
    limits = spec.config.usage_limits
    broken = None if limits.unlimited else exceeded(limits, state.usage, requests=1, agent=spec.name)
    if broken is not None:
        # ``appended`` is in the conversation already: only reported here.
        failed = fail(state, broken, events, [], state.usage)
        return Outcome(failed.state, failed.events, failed.effect, tuple(appended))
    events.append(TurnStarted(phase.turn))
    if spec.hooks:
        starting = evolve(state, phase=StartingTurn(phase.turn, phase))
        return Outcome(starting, tuple(events), RunHooks(phase.turn), tuple(appended))
    if type(phase) is CallingModel and not spec.dynamic_instructions:  # the hot path of turn_effect
        return Outcome(state, tuple(events), CallModel(request(state, spec), phase.turn), tuple(appended))
    return turn_effect(state, spec, events, appended)


def turn_effect(state: RunState, spec: AgentSpec, events: list[AgentEvent], appended: list[Item]) -> Outcome:
    """Ask for a model turn's first effect (instructions, or the model)."""
    phase = state.phase
    assert isinstance(phase, CallingModel | Finalizing | RepairingOutput)
    effect: Effect
    if type(phase) is CallingModel and spec.dynamic_instructions:
        state = evolve(state, phase=CallingModel(phase.turn, rendered=False))
        effect = RenderInstructions(phase.turn)
    else:
        effect = CallModel(request(state, spec), phase.turn)
    return Outcome(state, tuple(events), effect, tuple(appended))


def fail(
    state: RunState, error: AgentError, events: list[AgentEvent], appended: list[Item], usage: Usage
) -> Outcome:
    events.append(RunFailed(error, usage))
    final = evolve(state, phase=Failed(error), conversation=state.conversation.append(appended), usage=usage)
    return Outcome(final, tuple(events), Terminate(), tuple(appended))


def complete(
    state: RunState,
    spec: AgentSpec,
    output: str,
    events: list[AgentEvent],
    appended: list[Item],
    usage: Usage,
    conversation: Conversation,
) -> Outcome:
    """Finish with ``output`` — after the output guardrails, if any."""
    if spec.output_guardrails:
        checking = evolve(state, phase=CheckingOutput(output), conversation=conversation, usage=usage)
        return Outcome(checking, tuple(events), CheckGuardrails("output", output), tuple(appended))
    events.append(RunCompleted(usage))
    final = evolve(state, phase=Done(output), conversation=conversation, usage=usage)
    return Outcome(final, tuple(events), Terminate(), tuple(appended))


def next_turn(
    state: RunState,
    spec: AgentSpec,
    turn: int,
    events: list[AgentEvent],
    appended: list[Item],
    *,
    strikes: int | None = None,
    usage: Usage | None = None,
) -> Outcome:
    state = evolve(
        state,
        phase=CallingModel(turn + 1),
        conversation=state.conversation.append(appended),
        usage=usage,
        strikes=strikes,
    )
    return begin_turn(state, spec, events, appended)


__all__ = ["begin_turn", "complete", "evolve", "fail", "next_turn", "request", "turn_effect"]
