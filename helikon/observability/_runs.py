"""One agent run's open spans, and the events that open and close them.

A run is an ``invoke_agent {name}`` span holding one ``agent.turn`` span per
model turn (a :class:`~helikon.events.TurnStarted` event). Under a turn go
the turn's ``chat {model}`` and ``execute_tool {tool}`` spans, and the runs
of the agents it hands off to; a workflow's children go straight under its
run span (a workflow has no turns).

A run is seen one of two ways:

- **directly**: the observer sees its outcomes and performs its effects, so
  its chat and tool spans come from the effects and their results, with the
  model's token counts and the tools' own timings;
- **through its events**: a child run that the wrapped interpreter drives by
  itself (today every handoff target and workflow child) is seen only
  through the events forwarded to its parent's stream — the same events a
  replay re-emits. Its turns are its ``TurnStarted`` events; a turn's chat
  span lasts until the turn's first answer or tool call; a tool span lasts
  from the call (``ToolCallItem``) to its result (``ToolOutputItem``),
  except handoff calls and denied calls, which run no tool (as for a run seen
  directly). Token counts are known only for the whole child run (its
  result's usage).

Timestamps are nanoseconds since the epoch, taken by the caller.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from helikon.effects import RunInterrupted
from helikon.errors import describe
from helikon.events import (
    AgentEvent,
    ApprovalRequested,
    GuardrailTriggered,
    MessageOutput,
    PermissionDenied,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.model import Usage
from helikon.observability import _semconv as sc
from helikon.observability._telemetry import Signals

Attributes = dict[str, AttributeValue]


def now() -> int:
    """The current time as a span timestamp."""
    return time.time_ns()


@attrs.define(eq=False)
class Pending:
    """A tool call seen through events, waiting for its result."""

    call_id: str
    name: str
    start: int


@attrs.define(eq=False)
class RunSpans:
    """One run's open spans.

    ``key`` is the run's id as helikon names it (a child's is its parent's id,
    a slash and its key); ``agent`` is the agent's definition when the
    observer knows it (children: to tell their handoff calls and their own
    children apart); ``stamps`` are the trace attributes of the run's
    :class:`~helikon.context.TracerHandle`; ``secrets`` the values scrubbed
    from every text the run's spans carry.
    """

    key: str
    name: str
    span: Span
    signals: Signals
    stamps: Attributes
    provider: str | None
    model: str | None
    start: int
    parent: RunSpans | None = None
    agent: Any = None
    direct: bool = False
    secrets: tuple[str, ...] = ()
    turn: Span | None = None
    children: list[RunSpans] = attrs.field(factory=list)
    chat: int | None = None
    calls: list[Pending] = attrs.field(factory=list)
    closed: bool = False

    def current(self) -> Span:
        """The span the run's next operation nests under."""
        return self.turn or self.span

    def context(self) -> Context:
        """An OpenTelemetry context whose current span is :meth:`current`."""
        return trace.set_span_in_context(self.current())


def stamps_of(handle: object) -> Attributes:
    """The trace attributes of a :class:`~helikon.context.TracerHandle`."""
    stamps: Attributes = {}
    session_id = getattr(handle, "session_id", None)
    user_id = getattr(handle, "user_id", None)
    tags = getattr(handle, "tags", ())
    if session_id:
        stamps[sc.SESSION_ID] = session_id
        stamps[sc.CONVERSATION_ID] = session_id
    if user_id:
        stamps[sc.USER_ID] = user_id
    if tags:
        stamps[sc.TAGS] = tuple(tags)
    return stamps


def model_of(agent: Any) -> tuple[str | None, str | None]:
    """The provider and model id of an agent's model, if it has a real one."""
    model = getattr(agent, "model", None)
    provider = getattr(model, "provider", None)
    model_id = getattr(model, "model_id", None)
    if not isinstance(provider, str) or provider == "none":
        return None, None
    return provider, model_id if isinstance(model_id, str) and model_id else None


def open_run(
    signals: Signals,
    *,
    key: str,
    name: str,
    parent: RunSpans | None,
    stamps: Attributes,
    provider: str | None,
    model: str | None,
    at: int,
    agent: Any = None,
    direct: bool = False,
    secrets: tuple[str, ...] = (),
) -> RunSpans:
    """Start a run's ``invoke_agent`` span: under ``parent``'s current span,
    or, for a root run, under the caller's current span (so a run started
    from inside a tool nests under that tool's span)."""
    attributes: Attributes = {sc.OPERATION_NAME: sc.INVOKE_AGENT, sc.AGENT_NAME: name, sc.RUN_ID: key}
    if provider is not None:
        attributes[sc.PROVIDER_NAME] = provider
    if model is not None:
        attributes[sc.REQUEST_MODEL] = model
    attributes.update(stamps)
    span = signals.tracer.start_span(
        f"{sc.INVOKE_AGENT} {name}",
        context=parent.context() if parent is not None else None,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=at,
    )
    run = RunSpans(key, name, span, signals, stamps, provider, model, at, parent, agent, direct, secrets)
    if parent is not None and not direct:
        parent.children.append(run)
    return run


def begin_turn(run: RunSpans, turn: int, at: int) -> None:
    """Model turn ``turn`` of ``run`` began: the previous turn ends."""
    _end_turn(run, at)
    attributes: Attributes = {sc.TURN: turn, sc.AGENT_NAME: run.name}
    attributes.update(run.stamps)
    run.turn = run.signals.tracer.start_span(
        sc.TURN_SPAN, context=trace.set_span_in_context(run.span), attributes=attributes, start_time=at
    )
    if not run.direct:
        run.chat = at


def close_children(run: RunSpans, at: int) -> None:
    """End ``run``'s open child runs (seen through events) at ``at``."""
    for child in run.children:
        close_run(child, at=at)
    run.children.clear()


def close_run(
    run: RunSpans,
    *,
    at: int,
    usage: Usage | None = None,
    error: object = None,
    suspended: bool = False,
) -> None:
    """End ``run``: its open children, its turn, then its span, with its
    usage and, on failure, the error's type and description."""
    if run.closed:
        return
    run.closed = True
    close_children(run, at)
    for pending in run.calls:  # calls still waiting for a result when the run ended
        _tool_from_events(run, pending, False, at)
    run.calls.clear()
    _end_turn(run, at)
    span = run.span
    if usage is not None:
        span.set_attribute(sc.INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(sc.OUTPUT_TOKENS, usage.output_tokens)
    if suspended:
        span.set_attribute(sc.SUSPENDED, True)
    attributes: Attributes = {sc.OPERATION_NAME: sc.INVOKE_AGENT, sc.AGENT_NAME: run.name}
    if run.provider is not None:
        attributes[sc.PROVIDER_NAME] = run.provider
    if error is not None:
        kind = sc.error_type(error)
        span.set_attribute(sc.ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, sc.scrub(describe_failure(error), run.secrets)))
        attributes[sc.ERROR_TYPE] = kind
    span.end(end_time=at)
    run.signals.duration.record((at - run.start) / 1e9, attributes)


def describe_failure(error: object) -> str:
    """A failure value's description, or an exception's type and message."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, RunInterrupted):
        error = error.reason
    try:
        text = describe(error)  # type: ignore[arg-type]
    except Exception:  # not one of helikon's failure values
        text = None
    return text if isinstance(text, str) else str(error)


def _end_turn(run: RunSpans, at: int) -> None:
    if run.chat is not None:
        _chat_from_events(run, at)
    if run.turn is not None:
        run.turn.end(end_time=at)
        run.turn = None


def note(run: RunSpans, event: AgentEvent, at: int) -> None:
    """Record a governance event on the run's current span (as a span event)."""
    match event:
        case PermissionDenied(tool=tool, reason=reason):
            attributes: Attributes = {sc.TOOL_NAME: tool, "reason": sc.scrub(reason, run.secrets)}
            run.current().add_event("helikon.permission_denied", attributes, at)
        case GuardrailTriggered(kind=kind, info=info):
            attributes = {"kind": kind, "info": sc.scrub(info, run.secrets)}
            run.current().add_event("helikon.guardrail_triggered", attributes, at)
        case ApprovalRequested(call_id=call_id, tool=tool):
            attributes = {sc.TOOL_NAME: tool, sc.TOOL_CALL_ID: call_id}
            run.current().add_event("helikon.approval_requested", attributes, at)
        case _:
            pass


def on_event(run: RunSpans, event: AgentEvent, at: int) -> None:
    """One event of a run seen through its events."""
    match event:
        case TurnStarted(turn=turn):
            begin_turn(run, turn, at)
        case MessageOutput():
            if run.chat is not None:
                _chat_from_events(run, at)
        case ToolCallItem(item=call):
            if run.chat is not None:
                _chat_from_events(run, at)
            if call.name not in handoff_tools(run.agent):
                run.calls.append(Pending(call.call_id, call.name, at))
        case ToolOutputItem(item=result):
            pending = next((p for p in run.calls if p.call_id == result.call_id), None)
            if pending is not None:
                run.calls.remove(pending)
                _tool_from_events(run, pending, result.is_error, at)
        case PermissionDenied(tool=tool):
            # A denied call runs no tool: no span, as in a run seen directly.
            denied = next((p for p in run.calls if p.name == tool), None)
            if denied is not None:
                run.calls.remove(denied)
            note(run, event, at)
        case _:
            note(run, event, at)


def handoff_tools(agent: Any) -> frozenset[str]:
    """The tool names of an agent's handoffs (calls that run no tool)."""
    spec = getattr(agent, "spec", None)
    handoffs = getattr(spec, "handoffs", ())
    return frozenset(getattr(h, "tool_name", "") for h in handoffs)


def resolve(entry: Any) -> Any:
    """The agent behind a registry entry (a ``Handoff`` resolves lazily)."""
    resolver = getattr(entry, "resolve", None)
    return resolver() if callable(resolver) else entry


def definition_of(agent: Any, name: str) -> Any:
    """The definition of the child or handoff target ``name`` of ``agent``,
    if ``agent``'s definition has one."""
    children = getattr(agent, "children", None)
    if isinstance(children, tuple):
        for entry in children:
            if isinstance(entry, tuple) and len(entry) == 2:
                child = resolve(entry[1])
                if name in (entry[0], getattr(child, "name", None)):
                    return child
    for handoff in getattr(agent, "handoffs", ()):
        if getattr(handoff, "target_name", None) == name:
            return resolve(handoff)
    return None


def child_names(agent: Any) -> frozenset[str]:
    """The names of a workflow's children (empty for any other agent)."""
    children = getattr(agent, "children", None)
    if not isinstance(children, tuple):
        return frozenset()
    names: set[str] = set()
    for entry in children:
        if isinstance(entry, tuple) and len(entry) == 2:
            key, child = entry
            names.add(str(getattr(child, "name", key)))
            names.add(str(key))
    return frozenset(names)


def _chat_from_events(run: RunSpans, at: int) -> None:
    start, run.chat = run.chat, None
    attributes: Attributes = {sc.OPERATION_NAME: sc.CHAT}
    if run.provider is not None:
        attributes[sc.PROVIDER_NAME] = run.provider
    if run.model is not None:
        attributes[sc.REQUEST_MODEL] = run.model
    if sc.CONVERSATION_ID in run.stamps:
        attributes[sc.CONVERSATION_ID] = run.stamps[sc.CONVERSATION_ID]
    span = run.signals.tracer.start_span(
        f"{sc.CHAT} {run.model}" if run.model else sc.CHAT,
        context=run.context(),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start,
    )
    span.end(end_time=at)


def _tool_from_events(run: RunSpans, pending: Pending, failed: bool, at: int) -> None:
    attributes: Attributes = {
        sc.OPERATION_NAME: sc.EXECUTE_TOOL,
        sc.TOOL_NAME: pending.name,
        sc.TOOL_CALL_ID: pending.call_id,
        sc.TOOL_TYPE: "function",
    }
    span = run.signals.tracer.start_span(
        f"{sc.EXECUTE_TOOL} {pending.name}",
        context=run.context(),
        attributes=attributes,
        start_time=pending.start,
    )
    if failed:
        span.set_attribute(sc.ERROR_TYPE, "tool_error")
        span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
    span.end(end_time=at)


def parent_of(run_id: str, runs: Mapping[str, RunSpans]) -> RunSpans | None:
    """The open run a run with id ``run_id`` nests under.

    This is the one place that knows how helikon names child runs: a handoff
    target's or a workflow child's run id is its parent's id, a slash and
    its key (``"r1/billing"``), so the parent is the open run with the longest
    such prefix. A root run has none (it nests under the caller's current
    span instead). Keep this in step with how the interpreters name
    children.

    >>> parent_of("r1/seq/a", {"r1": "root", "r1/seq": "seq"})
    'seq'
    >>> parent_of("r2", {"r1": "root"}) is None
    True
    """
    head = run_id
    while "/" in head:
        head = head.rpartition("/")[0]
        found = runs.get(head)
        if found is not None:
            return found
    return None


__all__ = [
    "Attributes",
    "Pending",
    "RunSpans",
    "begin_turn",
    "child_names",
    "close_children",
    "close_run",
    "definition_of",
    "describe_failure",
    "handoff_tools",
    "model_of",
    "note",
    "now",
    "on_event",
    "open_run",
    "parent_of",
    "resolve",
    "stamps_of",
]
