"""Agent events: the one stream every agent run emits.

Lifecycle (:class:`RunStarted`, :class:`TurnStarted`), raw deltas as the model
streams them (:class:`TokenDelta`, :class:`ReasoningDelta`,
:class:`ToolCallDelta`), semantic items once a turn settles
(:class:`MessageOutput`, :class:`ToolCallItem`, :class:`ToolOutputItem`,
:class:`HandoffItem`), transitions (:class:`AgentUpdated`), control signals,
and exactly one terminal event last: :class:`RunCompleted` or
:class:`RunFailed`. All are frozen and serializable, so a stream can be
recorded and compared.

Every event says which member of an agent tree emitted it: ``path`` is that
sub-machine's path, one key per level, as :class:`helikon.effects.AtPath`
and :class:`helikon.effects.ApprovalRequest` name it (``()``: the run's own
agent; a handoff target's events carry ``("target",)``, a workflow child's
its key). It is keyword-only with a default, so traces written before it
existed read as the root's events; a trace writes it only when not empty.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TypeAlias

import attrs

from helikon._json import JsonValue
from helikon.errors import AgentError
from helikon.ids import CallId, RunId
from helikon.items import AssistantMessage, ToolCall, ToolResult
from helikon.model import Usage


@attrs.frozen
class RunStarted:
    """The run of ``agent`` began."""

    agent: str
    run_id: RunId
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class TurnStarted:
    """Model turn ``turn`` (1-based) began."""

    turn: int
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class TokenDelta:
    """Answer text as the model streams it."""

    text: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class ReasoningDelta:
    """Reasoning text as the model streams it."""

    text: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class ToolCallDelta:
    """A tool-call fragment as the model streams it."""

    call_id: str | None
    name: str | None
    args_delta: str
    index: int | None = None
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class MessageOutput:
    """A complete assistant message.

    ``cost`` is the cost of the model turn this event closes (see
    :class:`ToolCallItem`), or None.
    """

    item: AssistantMessage
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    cost: Decimal | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ToolCallItem:
    """A complete tool call the model requested.

    ``cost`` is the cost of the model turn whose last event this is, when
    the turn's model has a price (None otherwise, and on every other item):
    a model turn ends in the stream with its last ``ToolCallItem``, or with
    its ``MessageOutput`` when it asked for no tools. A trace writes it only
    when known (docs/observability.md).
    """

    item: ToolCall
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    cost: Decimal | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ToolOutputItem:
    """The result of a tool call, as the model will see it."""

    item: ToolResult
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class HandoffItem:
    """Control passed from agent ``from_agent`` to ``to_agent``."""

    from_agent: str
    to_agent: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class AgentUpdated:
    """``agent`` is now the one speaking."""

    agent: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class GuardrailTriggered:
    """A guardrail tripped (``kind`` is input or output or the guardrail's kind)."""

    kind: str
    info: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class ApprovalRequested:
    """A tool call waits for approval."""

    call_id: CallId
    tool: str
    args: JsonValue
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class PermissionDenied:
    """A tool call was denied by the permission pipeline."""

    tool: str
    reason: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class RepairStarted:
    """The structured-output repair turn ``attempt`` began."""

    attempt: int
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class StructuredOutputFailed:
    """The final answer did not validate against the output schema."""

    schema_errors: tuple[str, ...]
    final_text: str
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class RunCompleted:
    """Terminal: the run succeeded; ``usage`` sums every model call."""

    usage: Usage
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)


@attrs.frozen
class RunFailed:
    """Terminal: the run failed with ``error``."""

    error: AgentError
    usage: Usage = Usage()
    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)



#: Every event an agent run emits.
AgentEvent: TypeAlias = (
    RunStarted
    | TurnStarted
    | TokenDelta
    | ReasoningDelta
    | ToolCallDelta
    | MessageOutput
    | ToolCallItem
    | ToolOutputItem
    | HandoffItem
    | AgentUpdated
    | GuardrailTriggered
    | ApprovalRequested
    | PermissionDenied
    | RepairStarted
    | StructuredOutputFailed
    | RunCompleted
    | RunFailed
)

def emitted_at(path: tuple[str, ...], event: AgentEvent) -> AgentEvent:
    """``event`` of the sub-machine at ``path`` (``event.path`` is below it),
    as the tree's stream shows it: marked with the whole path.

    >>> emitted_at(("desk", "writer"), TokenDelta("hi", path=("x",))).path
    ('desk', 'writer', 'x')
    """
    if not path:
        return event
    marked: AgentEvent = attrs.evolve(event, path=(*path, *event.path))
    return marked


#: The terminal event types.
TERMINAL_EVENTS = (RunCompleted, RunFailed)

__all__ = [
    "TERMINAL_EVENTS",
    "AgentEvent",
    "AgentUpdated",
    "ApprovalRequested",
    "GuardrailTriggered",
    "HandoffItem",
    "MessageOutput",
    "PermissionDenied",
    "ReasoningDelta",
    "RepairStarted",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "StructuredOutputFailed",
    "TokenDelta",
    "ToolCallDelta",
    "ToolCallItem",
    "ToolOutputItem",
    "TurnStarted",
    "emitted_at",
]
