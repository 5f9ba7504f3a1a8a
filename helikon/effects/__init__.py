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

from helikon.errors import AgentError, Cancelled, GuardrailTripped, ModelFailure, TimedOut, ToolFailure
from helikon.ids import CallId
from helikon.items import Item, ToolCall
from helikon.model import ModelEvent, ModelRequest, Usage

# -- effects -----------------------------------------------------------------


@attrs.frozen
class RenderInstructions:
    """Render the agent's dynamic instructions for model turn ``turn``."""

    turn: int


@attrs.frozen
class CallModel:
    """Call the agent's model with ``request`` (for model turn ``turn``)."""

    request: ModelRequest
    turn: int


@attrs.frozen
class ExecuteTools:
    """Run these tool calls (concurrently); answer in call order.

    ``approved`` lists calls a human already approved (after a suspension):
    the permission pipeline does not ask about them again.
    """

    calls: tuple[ToolCall, ...]
    approved: tuple[CallId, ...] = ()


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
    """A tool call waiting for a human's decision."""

    call_id: CallId
    tool: str
    arguments: str
    prompt: str


@attrs.frozen
class AwaitApproval:
    """Stop here until these calls are approved or denied (a suspension)."""

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
class Terminate:
    """Nothing more to do: the run is over."""


#: Everything the core can ask for.
Effect: TypeAlias = (
    RenderInstructions
    | CallModel
    | ExecuteTools
    | CheckGuardrails
    | RunHooks
    | AwaitApproval
    | Handoff
    | RunAgents
    | Terminate
)

# -- results -----------------------------------------------------------------


@attrs.frozen
class InstructionsRendered:
    """The instructions rendered to ``text``."""

    text: str


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
class ToolReturned:
    """Tool call ``call_id`` returned ``content`` (the text the model sees)."""

    call_id: CallId
    content: str


@attrs.frozen
class ToolRaised:
    """Tool call ``call_id`` failed with ``failure``."""

    call_id: CallId
    failure: ToolFailure


@attrs.frozen
class ApprovalPending:
    """Tool call ``call_id`` needs a human's approval and no handler was
    installed (the run suspends)."""

    call_id: CallId
    prompt: str


#: How one tool call ended.
ToolOutcome: TypeAlias = ToolReturned | ToolRaised | ApprovalPending


@attrs.frozen
class ToolsExecuted:
    """The tool calls ended; ``outcomes`` are in call order. ``injected``
    are system messages hooks asked to add before the next model call."""

    outcomes: tuple[ToolOutcome, ...]
    injected: tuple[str, ...] = ()


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
    """A human's answer about tool call ``call_id``."""

    call_id: CallId
    approved: bool
    reason: str = ""


@attrs.frozen
class ApprovalsGiven:
    """The answers to an ``AwaitApproval``."""

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
class RunInterrupted:
    """The run was cancelled or timed out before the effect completed."""

    reason: Cancelled | TimedOut


#: Everything an interpreter feeds back.
EffectResult: TypeAlias = (
    InstructionsRendered
    | ModelResponded
    | ModelCallFailed
    | ToolsExecuted
    | HandoffCompleted
    | AgentsRan
    | GuardrailsChecked
    | HooksRan
    | ApprovalsGiven
    | RunInterrupted
)

__all__ = [
    "ApprovalDecision",
    "ApprovalPending",
    "ApprovalRequest",
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
    "InstructionsRendered",
    "ModelCallFailed",
    "ModelResponded",
    "RenderInstructions",
    "RunAgents",
    "RunInterrupted",
    "Terminate",
    "ToolOutcome",
    "ToolRaised",
    "ToolReturned",
    "ToolsExecuted",
]
