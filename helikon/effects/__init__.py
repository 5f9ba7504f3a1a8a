"""Effect descriptions and their results: data only.

An effect is what the pure core asks of the world; its result says, in the
past tense, what happened. Effects are imperative (:class:`CallModel`,
:class:`ExecuteTools`), results past tense (:class:`ModelResponded`,
:class:`ToolsExecuted`). Neither holds a callable: user code is named (a tool
by its name), never captured, so effects compare, record and replay.

Interpreters perform effects; :func:`helikon.loop.transition` consumes
results. :class:`RunInterrupted` is the one result an interpreter may feed at
any step: the run was cancelled or timed out.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from helikon._json import JsonValue
from helikon._normal import normal_form
from helikon.errors import (
    AgentError,
    Cancelled,
    GuardrailTripped,
    ModelFailure,
    TimedOut,
    ToolFailure,
    UsageLimitExceeded,
)
from helikon.governance import (
    HookDecision,
    OnHandoff,
    OnRunComplete,
    OnSubagentStop,
    PermissionDecision,
    PostToolUse,
    PreToolUse,
)
from helikon.ids import CallId
from helikon.items import Item
from helikon.model import ModelEvent, ModelRequest, Usage

# -- effects -----------------------------------------------------------------


@attrs.frozen
class RenderInstructions:
    """Render the agent's dynamic instructions for model turn ``turn``.

    ``state`` is the run-scoped state (``ctx.state``) the run has written so
    far (workflow children's outputs, key and text, in the order written):
    an agent tree's state holds it, so a process performing this effect
    with a fresh context puts it in ``ctx.state`` before the instructions
    read it.
    """

    turn: int
    state: tuple[tuple[str, str], ...] = ()


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class CallModel:
    """Call the agent's model with ``request`` (for model turn ``turn``)."""

    request: ModelRequest
    turn: int


@attrs.frozen
class FireHook:
    """Fire hook number ``hook`` (in fire order: the agent's, then the run's)
    on ``event``, for tool call ``call_id``; answer with :class:`HookAnswered`."""

    call_id: CallId
    hook: int
    event: PreToolUse | PostToolUse


@attrs.frozen
class AskPolicy:
    """Ask the permission policy about tool call ``call_id`` of ``tool`` with
    ``args``; answer with :class:`PolicyAnswered`."""

    call_id: CallId
    tool: str
    args: JsonValue


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class InvokeTool:
    """Run tool ``tool`` with ``args`` for call ``call_id``; answer with
    :class:`ToolReturned` or :class:`ToolRaised`."""

    call_id: CallId
    tool: str
    args: JsonValue


@attrs.frozen
class ReconcileTool:
    """Find out what became of tool call ``call_id`` (tool ``tool``, arguments
    ``args``): it was started and its result is lost (the run was resumed
    from a state saved while it ran, or the worker running it was lost).

    Perform it by calling the tool's ``reconcile`` callback. Answer with
    :class:`ToolReturned` or :class:`ToolRaised` (it happened, with that
    outcome), :class:`ToolNotPerformed` (it did not happen: the machine runs
    it now), or :class:`CallbackRaised` (the tool has no reconcile callback,
    or it failed: the outcome stays unknown, and the model is told so).
    """

    call_id: CallId
    tool: str
    args: JsonValue


#: One step of one tool call's pipeline that calls user code.
CallStep: TypeAlias = FireHook | AskPolicy | InvokeTool | ReconcileTool


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class ExecuteTools:
    """Perform these steps of the round's tool-call pipelines, at most one per
    call, concurrently (under ``parallel_tool_call_limit``); answer with one
    result per step, in the order of ``steps`` — or feed each step's result
    as it comes (a :class:`ToolsExecuted` answering any subset of the steps,
    in any order): the steps not answered stay pending, and the next effect
    lists them again beside the answered calls' next steps.

    Every decision between the steps (hook folds, the permission pipeline,
    argument checks, redaction) is the machine's; a step only calls user code.
    """

    steps: tuple[CallStep, ...]


@attrs.frozen
class CheckGuardrails:
    """Run the agent's and the run's guardrails of ``stage`` ("input" or
    "output") on ``text``."""

    stage: str
    text: str


@attrs.frozen
class RunHooks:
    """Fire the turn-start hooks (and, on turn 1, the run-start hooks)."""

    turn: int


@attrs.frozen
class ApprovalRequest:
    """A tool call waiting for a human's decision.

    ``path`` is the path of the sub-machine whose call it is in an agent
    tree (``()``: the run's own agent): the call id names a call within its
    path, so answer with :meth:`decide`, which keeps both.
    """

    call_id: CallId
    tool: str
    arguments: str
    prompt: str
    path: tuple[str, ...] = ()

    def decide(self, approved: bool, reason: str = "") -> ApprovalDecision:
        """The decision answering exactly this request."""
        return ApprovalDecision(self.call_id, approved, reason, self.path)


@attrs.frozen
class AskApprovals:
    """Ask the approval handler about these calls (concurrently); answer with
    :class:`ApprovalsGiven`. An approval stands in for the "ask" step of that
    call's permission pipeline and nothing else."""

    requests: tuple[ApprovalRequest, ...]


@attrs.frozen
class AwaitApproval:
    """Stop here until these calls are approved or denied (a suspension);
    resume with :class:`ApprovalsGiven`."""

    requests: tuple[ApprovalRequest, ...]


@attrs.frozen
class Handoff:
    """Hand the conversation to agent ``target``, which finishes the run.

    ``transcript`` is the conversation so far; ``depth`` the nesting depth the
    target runs at.
    """

    target: str
    transcript: tuple[Item, ...]
    depth: int = 1


@attrs.frozen
class AgentRun:
    """One child agent to run: ``key`` names it within its parent."""

    key: str
    agent: str
    input: tuple[Item, ...]


@attrs.frozen
class RunAgents:
    """Run these child agents (concurrently); answer with every result."""

    runs: tuple[AgentRun, ...]
    depth: int = 1


@attrs.frozen
class NotifyHooks:
    """Fire the hooks that only observe (``OnHandoff``, ``OnSubagentStop``,
    ``OnRunComplete``) on ``event``; their decisions are ignored (the book).
    Answer with :class:`HooksNotified`."""

    event: OnHandoff | OnSubagentStop | OnRunComplete


@attrs.frozen
class StoreOutput:
    """Write a workflow child's final text to the run-scoped state under
    ``key`` (``ctx.state[key]``, where later agents' dynamic instructions can
    read it). Answer with :class:`OutputStored`."""

    key: str
    text: str


@attrs.frozen
class AtPath:
    """``effect``, asked by the sub-machine at ``path`` of an agent tree (a
    handoff target, a workflow child: one key per level)."""

    path: tuple[str, ...]
    effect: Effect


@attrs.frozen
class PerformAll:
    """Perform the effects of several sub-machines of an agent tree
    (concurrently); answer with :class:`AllPerformed`, one result per
    effect, in the same order — or feed each path's result as it comes (an
    ``AllPerformed`` answering any of the paths, in any order): the paths
    not answered stay pending, and the next ``PerformAll`` lists them again
    beside the answered paths' next effects. An effect still listed is the
    one already being performed (perform each path's effect once, when it
    first appears or after its path was answered)."""

    effects: tuple[AtPath, ...]


@attrs.frozen
class Terminate:
    """Nothing more to do: the run is over."""


#: Everything the core can ask for.
Effect: TypeAlias = (
    RenderInstructions
    | CallModel
    | ExecuteTools
    | CheckGuardrails
    | RunHooks
    | AskApprovals
    | AwaitApproval
    | Handoff
    | RunAgents
    | NotifyHooks
    | StoreOutput
    | PerformAll
    | Terminate
)

# -- results -----------------------------------------------------------------


@attrs.frozen
class InstructionsRendered:
    """The instructions rendered to ``text``."""

    text: str


@attrs.frozen
class InstructionsFailed:
    """The instructions function raised (``message`` describes it): the
    turn cannot start and the run fails (see :mod:`helikon.loop._answers`)."""

    message: str


@attrs.frozen
class ModelResponded:
    """The model streamed ``events`` and finished."""

    events: tuple[ModelEvent, ...]


@attrs.frozen
class ModelCallFailed:
    """The model call failed; ``events`` is what streamed before it did."""

    failure: ModelFailure
    events: tuple[ModelEvent, ...] = ()


@attrs.frozen
class HookAnswered:
    """The hook of a :class:`FireHook` answered ``decision`` (``None``
    allows, as a hook that returns nothing does)."""

    call_id: CallId
    decision: HookDecision | None


@attrs.frozen
class PolicyAnswered:
    """The permission policy answered ``decision`` about call ``call_id``."""

    call_id: CallId
    decision: PermissionDecision


@attrs.frozen
class ToolReturned:
    """Tool call ``call_id`` returned ``output``: text, or a JSON value the
    machine encodes for the model, taken in normal form
    (:func:`helikon.normal_form`; a value with no JSON form raises
    ``NormalFormError``: an interpreter reports it as a :class:`ToolRaised`)."""

    call_id: CallId
    output: JsonValue = attrs.field(converter=normal_form)


@attrs.frozen
class ToolRaised:
    """Tool call ``call_id`` failed with ``failure``."""

    call_id: CallId
    failure: ToolFailure


@attrs.frozen
class CallbackRaised:
    """The hook or policy of a step of call ``call_id`` raised; ``message``
    says what (the machine denies the call: governance fails closed)."""

    call_id: CallId
    message: str


@attrs.frozen
class Reconciled:
    """What a tool's ``reconcile`` callback found out about a started call
    whose result was lost: it ``happened`` (with ``output``, as the tool
    would have returned it), or not (the machine then runs it).

    >>> Reconciled(True, {"receipt": "r-1"}), Reconciled(False)
    (Reconciled(happened=True, output={'receipt': 'r-1'}), Reconciled(happened=False, output=None))
    """

    happened: bool
    output: JsonValue = None


@attrs.frozen
class ToolNotPerformed:
    """Tool call ``call_id``, asked about by a :class:`ReconcileTool`, did not
    happen: the machine runs it now."""

    call_id: CallId


@attrs.frozen
class ToolOutcomeUnknown:
    """Tool call ``call_id`` was started and did not come back: its worker
    was lost, or the call did not complete (``reason`` says how). Whether it
    happened is unknown: the machine asks its ``reconcile`` callback
    (:class:`ReconcileTool`), and without one tells the model so."""

    call_id: CallId
    reason: str = ""


#: How one step of a tool call's pipeline ended.
StepResult: TypeAlias = (
    HookAnswered
    | PolicyAnswered
    | ToolReturned
    | ToolRaised
    | CallbackRaised
    | ToolNotPerformed
    | ToolOutcomeUnknown
)


@attrs.frozen
class ToolsExecuted:
    """Steps of an :class:`ExecuteTools` ended; ``results`` name their calls
    (all of the steps in their order, or any of them in any order).
    ``escalated``: a tool asked an enclosing loop agent to stop
    (``ctx.actions.escalate()``)."""

    results: tuple[StepResult, ...]
    escalated: bool = False


@attrs.frozen
class GuardrailsChecked:
    """The guardrails passed (``tripwire`` None) or one tripped."""

    tripwire: GuardrailTripped | None = None


@attrs.frozen
class HooksRan:
    """The hooks ran: one denied (``denied`` is its reason), or not;
    ``injected`` system messages go before the model call."""

    denied: str | None = None
    injected: tuple[str, ...] = ()


@attrs.frozen
class ApprovalDecision:
    """A human's answer about tool call ``call_id`` of the sub-machine at
    ``path`` (see :class:`ApprovalRequest`). A decision without a path
    answers the one pending call with that id; when calls of several paths
    share the id, it is refused as ambiguous."""

    call_id: CallId
    approved: bool
    reason: str = ""
    path: tuple[str, ...] = ()


@attrs.frozen
class ApprovalsGiven:
    """The answers to an ``AskApprovals`` or an ``AwaitApproval``."""

    decisions: tuple[ApprovalDecision, ...]


@attrs.frozen
class HandoffCompleted:
    """The handoff target finished with ``output`` (or failed with ``error``)."""

    output: str
    usage: Usage
    error: AgentError | None = None


@attrs.frozen
class AgentRunResult:
    """How child ``key`` ended; ``escalated`` if one of its tools escalated."""

    key: str
    output: str
    usage: Usage
    error: AgentError | None = None
    escalated: bool = False


@attrs.frozen
class AgentsRan:
    """The children of a ``RunAgents`` ended (results in any order)."""

    results: tuple[AgentRunResult, ...]


@attrs.frozen
class HooksNotified:
    """The observing hooks were fired."""


@attrs.frozen
class OutputStored:
    """The child's output was written to the run-scoped state."""


@attrs.frozen
class PathResult:
    """The result of the effect the sub-machine at ``path`` asked for."""

    path: tuple[str, ...]
    result: EffectResult


@attrs.frozen
class AllPerformed:
    """Results of a :class:`PerformAll`: every path's in the order of its
    effects, or any of the paths, in any order (see :class:`PerformAll`)."""

    results: tuple[PathResult, ...]


@attrs.frozen
class RunInterrupted:
    """The run was cancelled or timed out before the effect completed (or,
    inside an agent tree only, went past the tree's usage limits)."""

    reason: Cancelled | TimedOut | UsageLimitExceeded


#: Everything an interpreter feeds back.
EffectResult: TypeAlias = (
    InstructionsRendered
    | InstructionsFailed
    | ModelResponded
    | ModelCallFailed
    | ToolsExecuted
    | HandoffCompleted
    | AgentsRan
    | GuardrailsChecked
    | HooksRan
    | ApprovalsGiven
    | HooksNotified
    | OutputStored
    | AllPerformed
    | RunInterrupted
)

__all__ = [
    "StoreOutput",
    "PerformAll",
    "PathResult",
    "OutputStored",
    "NotifyHooks",
    "HooksNotified",
    "AtPath",
    "AllPerformed",
    "ApprovalDecision",
    "ApprovalRequest",
    "AskApprovals",
    "AskPolicy",
    "CallStep",
    "CallbackRaised",
    "FireHook",
    "HookAnswered",
    "InvokeTool",
    "PolicyAnswered",
    "ReconcileTool",
    "Reconciled",
    "StepResult",
    "ToolNotPerformed",
    "ToolOutcomeUnknown",
    "ApprovalsGiven",
    "AwaitApproval",
    "CheckGuardrails",
    "GuardrailsChecked",
    "HooksRan",
    "RunHooks",
    "AgentRun",
    "AgentRunResult",
    "AgentsRan",
    "CallModel",
    "Effect",
    "EffectResult",
    "ExecuteTools",
    "Handoff",
    "HandoffCompleted",
    "InstructionsFailed",
    "InstructionsRendered",
    "ModelCallFailed",
    "ModelResponded",
    "RenderInstructions",
    "RunAgents",
    "RunInterrupted",
    "Terminate",
    "ToolRaised",
    "ToolReturned",
    "ToolsExecuted",
]
