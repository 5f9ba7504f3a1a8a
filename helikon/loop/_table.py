"""The transition table: every ``(phase, result)`` pair the loop accepts.

Everything that decides which rule runs lives here (after h11's
``_state.py`` and h2's ``_transitions``). A pair missing from the table is
invalid input and :func:`transition` returns ``Failure(StepError)``; it never
raises. Terminal phases accept nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeAlias, TypeVar

from returns.result import Failure, Result

from helikon.effects import (
    ApprovalsGiven,
    EffectResult,
    GuardrailsChecked,
    HandoffCompleted,
    HooksRan,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    ToolsExecuted,
)
from helikon.errors import StepError
from helikon.loop import _transition as rules
from helikon.loop._outcome import Outcome
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
Handler: TypeAlias = Callable[[RunState, R, AgentSpec], Result[Outcome, StepError]]

#: (phase type, result type) -> the rule that handles it.
TABLE: Final[Mapping[tuple[type, type], Handler[EffectResult]]] = {
    (CallingModel, InstructionsRendered): rules.on_instructions_rendered,  # type: ignore[dict-item]
    (CallingModel, ModelResponded): rules.on_model_responded,  # type: ignore[dict-item]
    (CallingModel, ModelCallFailed): rules.on_model_call_failed,  # type: ignore[dict-item]
    (ExecutingTools, ToolsExecuted): rules.on_tools_executed,  # type: ignore[dict-item]
    (ApplyingHandoff, HandoffCompleted): rules.on_handoff_completed,  # type: ignore[dict-item]
    (CheckingInput, GuardrailsChecked): rules.on_input_checked,  # type: ignore[dict-item]
    (CheckingOutput, GuardrailsChecked): rules.on_output_checked,  # type: ignore[dict-item]
    (StartingTurn, HooksRan): rules.on_hooks_ran,  # type: ignore[dict-item]
    (NeedsApproval, ApprovalsGiven): rules.on_approvals_given,  # type: ignore[dict-item]
    (CheckingInput, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (CheckingOutput, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (StartingTurn, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (Finalizing, ModelResponded): rules.on_final_response,  # type: ignore[dict-item]
    (Finalizing, ModelCallFailed): rules.on_model_call_failed,  # type: ignore[dict-item]
    (RepairingOutput, ModelResponded): rules.on_final_response,  # type: ignore[dict-item]
    (RepairingOutput, ModelCallFailed): rules.on_model_call_failed,  # type: ignore[dict-item]
    (CallingModel, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (ExecutingTools, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (ApplyingHandoff, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (Finalizing, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (RepairingOutput, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (NeedsApproval, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
    (Compacting, RunInterrupted): rules.on_interrupted,  # type: ignore[dict-item]
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
    handler = TABLE.get((type(state.phase), type(result)))
    if handler is None:
        return Failure(
            StepError(f"phase {type(state.phase).__name__} does not accept {type(result).__name__}")
        )
    return handler(state, result, spec)


__all__ = ["TABLE", "transition"]
