"""The pure agent-loop machine.

``start(spec, input, run_id)`` gives the first :class:`Outcome`;
``transition(state, result, spec)`` feeds the pending effect's result and
gives the next. Nothing here does IO, reads the clock or draws random
numbers: interpreters do that and feed the results back.
"""

from helikon._conversation import Conversation
from helikon.loop._aggregate import Response, aggregate
from helikon.loop._answers import (
    ANSWERS,
    Answer,
    MissingCallback,
    NoAnswer,
    Raised,
    Returned,
    TurnHookFold,
    approval_decision,
    described,
    fold_turn_hooks,
    guardrail_verdict,
    guardrails_checked,
    hook_step,
    hooks_unanswered,
    instructions_result,
    policy_step,
    tool_raised,
    turn_hook_decision,
)
from helikon.loop._calls import (
    CallStage,
    Permitting,
    PostHooks,
    PreHooks,
    Running,
    Settled,
    ToolCallState,
    approval_request,
    pending_step,
)
from helikon.loop._clock import Timed, deadline_after, on_time
from helikon.loop._deltas import delta_event
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
    "Conversation",
    "Timed",
    "deadline_after",
    "on_time",
    "ANSWERS",
    "Answer",
    "MissingCallback",
    "NoAnswer",
    "hooks_unanswered",
    "Raised",
    "Returned",
    "TurnHookFold",
    "approval_decision",
    "described",
    "fold_turn_hooks",
    "guardrail_verdict",
    "guardrails_checked",
    "hook_step",
    "instructions_result",
    "policy_step",
    "tool_raised",
    "turn_hook_decision",
    "ApprovalRoute",
    "CallStage",
    "Governance",
    "Permitting",
    "PostHooks",
    "PreHooks",
    "Running",
    "Settled",
    "ToolCallState",
    "approval_request",
    "pending_step",
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
