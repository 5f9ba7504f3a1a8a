"""The transition table: every ``(phase, result)`` pair the loop accepts.

Everything that decides which rule runs lives here (after h11's
``_state.py`` and h2's ``_transitions``). A pair missing from the table is
invalid input and :func:`transition` returns ``Failure(StepError)``; it never
raises. Terminal phases accept nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeAlias, TypeVar, cast

from returns.result import Failure, Result, Success

from helikon.effects import (
    ApprovalsGiven,
    EffectResult,
    GuardrailsChecked,
    HandoffCompleted,
    HooksRan,
    InstructionsFailed,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    ToolsExecuted,
)
from helikon.errors import StepError
from helikon.loop import _transition as rules
from helikon.loop._model_form import model_answer, model_form_problem
from helikon.loop._outcome import Outcome, set_inner
from helikon.loop._round import Step, answered_before, on_approvals_given, on_tools_executed, settle_one
from helikon.loop._spec import AgentSpec
from helikon.loop._states import (
    ApplyingHandoff,
    CallingModel,
    CheckingInput,
    CheckingOutput,
    Compacting,
    ExecutingTools,
    Finalizing,
    NeedsApproval,
    RepairingOutput,
    RunState,
    StartingTurn,
)

R = TypeVar("R", bound=EffectResult)
#: A rule: the current state, the result of the pending effect, the spec.
Handler: TypeAlias = Callable[[RunState, EffectResult, AgentSpec], Result[Outcome, StepError]]


def _rule(result: type[R], handler: Callable[[RunState, R, AgentSpec], Step]) -> Handler:
    """``handler`` as a table entry for results of type ``result`` (the table
    looks a handler up by the result's exact type, so the narrowing holds)."""

    # The handler itself, not a wrapper around it: a rule runs at every step.
    return cast(Handler, handler)


_interrupted = _rule(RunInterrupted, rules.on_interrupted)

#: (phase type, result type) -> the rule that handles it.
TABLE: Final[Mapping[tuple[type, type], Handler]] = {
    (CallingModel, InstructionsRendered): _rule(InstructionsRendered, rules.on_instructions_rendered),
    (CallingModel, InstructionsFailed): _rule(InstructionsFailed, rules.on_instructions_failed),
    (CallingModel, ModelResponded): _rule(ModelResponded, rules.on_model_responded),
    (CallingModel, ModelCallFailed): _rule(ModelCallFailed, rules.on_model_call_failed),
    (ExecutingTools, ToolsExecuted): _rule(ToolsExecuted, on_tools_executed),
    (ApplyingHandoff, HandoffCompleted): _rule(HandoffCompleted, rules.on_handoff_completed),
    (CheckingInput, GuardrailsChecked): _rule(GuardrailsChecked, rules.on_input_checked),
    (CheckingOutput, GuardrailsChecked): _rule(GuardrailsChecked, rules.on_output_checked),
    (StartingTurn, HooksRan): _rule(HooksRan, rules.on_hooks_ran),
    (NeedsApproval, ApprovalsGiven): _rule(ApprovalsGiven, on_approvals_given),
    (Finalizing, ModelResponded): _rule(ModelResponded, rules.on_final_response),
    (Finalizing, ModelCallFailed): _rule(ModelCallFailed, rules.on_model_call_failed),
    (RepairingOutput, ModelResponded): _rule(ModelResponded, rules.on_final_response),
    (RepairingOutput, ModelCallFailed): _rule(ModelCallFailed, rules.on_model_call_failed),
    **{
        (phase, RunInterrupted): _interrupted
        for phase in (
            CallingModel,
            CheckingInput,
            CheckingOutput,
            StartingTurn,
            ExecutingTools,
            ApplyingHandoff,
            Finalizing,
            RepairingOutput,
            NeedsApproval,
            Compacting,
        )
    },
}


def transition(state: RunState, result: EffectResult, spec: AgentSpec) -> Result[Outcome, StepError]:
    """Feed the pending effect's ``result`` to the machine: the next outcome.

    Returns ``Failure(StepError)`` when the result does not answer the
    pending effect (or the run is over); never raises.

    >>> from helikon.items import AgentInput
    >>> from helikon.ids import RunId
    >>> from helikon.model import TextChunk
    >>> from helikon.effects import ModelResponded
    >>> spec = AgentSpec("a")
    >>> out = rules.start(spec, AgentInput.from_user_text("hi"), RunId("r"))
    >>> nxt = transition(out.state, ModelResponded((TextChunk("hello"),)), spec).unwrap()
    >>> type(nxt.state.phase).__name__, type(nxt.events[-1]).__name__
    ('Done', 'RunCompleted')
    """
    phase = state.phase
    # The hot paths of a tool loop first: each gives what its rule would, or None.
    if type(result) is ModelResponded:
        if type(phase) is CallingModel and phase.rendered:
            fast = one_call_turn(state, phase.turn, result, spec)
            if fast is not None:
                made: Success[Outcome] = _new(Success)  # ``ok(fast)``, inline
                set_inner(made, fast)
                return made
        if model_form_problem(result.events) is not None:
            result = model_answer(result)  # a model's values enter in normal form, or fail the call
    elif type(result) is ToolsExecuted and type(phase) is ExecutingTools:
        fast = settle_one(state, phase, result, spec)
        if fast is not None:
            made = _new(Success)  # ``ok(fast)``, inline
            set_inner(made, fast)
            return made
    handler = TABLE.get((type(state.phase), type(result)))
    if handler is None and type(result) is ApprovalsGiven and answered_before(state, result):
        # The same answers delivered again change nothing: consumed once.
        return rules.resume(state, spec)
    if handler is None:
        return Failure(
            StepError(f"phase {type(state.phase).__name__} does not accept {type(result).__name__}")
        )
    return handler(state, result, spec)


one_call_turn = rules.one_call_turn
_new = object.__new__

__all__ = ["TABLE", "transition"]
