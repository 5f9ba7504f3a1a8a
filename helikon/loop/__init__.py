"""The pure agent-loop machine.

``start(spec, input, run_id)`` gives the first :class:`Outcome`;
``transition(state, result, spec)`` feeds the pending effect's result and
gives the next. Nothing here does IO, reads the clock or draws random
numbers: interpreters do that and feed the results back.
"""

from helikon._conversation import Conversation
from helikon.loop import _answers
from helikon.loop._aggregate import Response, aggregate
from helikon.loop._answers import *  # noqa: F403  (the answer table: its names are listed once, in its __all__)
from helikon.loop._calls import (
    MAX_RECONCILES,
    CallStage,
    Permitting,
    PostHooks,
    PreHooks,
    Reconciling,
    Running,
    Settled,
    ToolCallState,
    approval_request,
    may_rerun,
    pending_step,
    resumed_step,
)
from helikon.loop._clock import Timed, deadline_after, on_time
from helikon.loop._deltas import delta_event
from helikon.loop._limits import ORDER as ORDER_OF_LIMITS
from helikon.loop._limits import exceeded, turn_usage
from helikon.loop._outcome import Outcome
from helikon.loop._spec import AgentSpec, ApprovalRoute, Governance, HandoffSpec, OutputSchema, handoff_slug
from helikon.loop._states import (
    TERMINAL,
    ApplyingHandoff,
    CallingModel,
    CheckingInput,
    CheckingOutput,
    Compacting,
    Done,
    ExecutingTools,
    Failed,
    Finalizing,
    LoopState,
    NeedsApproval,
    RepairingOutput,
    RunState,
    StartingTurn,
)
from helikon.loop._table import TABLE, transition
from helikon.loop._transition import FINALIZE_PROMPT, REPAIR_PROMPT, resume, start
from helikon.loop._validate import parse_json, schema_errors, schema_problem

__all__ = [
    "ORDER_OF_LIMITS",
    "exceeded",
    "turn_usage",
    "Conversation",
    "Timed",
    "deadline_after",
    "on_time",
    "ApprovalRoute",
    "CallStage",
    "Governance",
    "Permitting",
    "PostHooks",
    "PreHooks",
    "Reconciling",
    "MAX_RECONCILES",
    "Running",
    "Settled",
    "ToolCallState",
    "approval_request",
    "may_rerun",
    "pending_step",
    "resumed_step",
    "FINALIZE_PROMPT",
    "HandoffSpec",
    "handoff_slug",
    "REPAIR_PROMPT",
    "TABLE",
    "TERMINAL",
    "AgentSpec",
    "ApplyingHandoff",
    "CallingModel",
    "CheckingInput",
    "CheckingOutput",
    "Compacting",
    "Done",
    "ExecutingTools",
    "Failed",
    "Finalizing",
    "LoopState",
    "NeedsApproval",
    "Outcome",
    "OutputSchema",
    "RepairingOutput",
    "Response",
    "RunState",
    "StartingTurn",
    "aggregate",
    "delta_event",
    "parse_json",
    "resume",
    "schema_errors",
    "schema_problem",
    "start",
    "transition",
]
__all__ += _answers.__all__
