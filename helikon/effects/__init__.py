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

from helikon.errors import AgentError, Cancelled, ModelFailure, TimedOut, ToolFailure
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
    """Run these tool calls (concurrently); answer in call order."""

    calls: tuple[ToolCall, ...]


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
Effect: TypeAlias = RenderInstructions | CallModel | ExecuteTools | Handoff | RunAgents | Terminate

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


#: How one tool call ended.
ToolOutcome: TypeAlias = ToolReturned | ToolRaised


@attrs.frozen
class ToolsExecuted:
    """The tool calls ended; ``outcomes`` are in call order."""

    outcomes: tuple[ToolOutcome, ...]


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
    | RunInterrupted
)

__all__ = [
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
