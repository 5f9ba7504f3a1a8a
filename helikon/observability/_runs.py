"""One agent run's open spans, and how they open and close.

A run is an ``invoke_agent {name}`` span holding one ``agent.turn`` span per
model turn. Under a turn go the turn's ``chat {model}`` and ``execute_tool
{tool}`` spans, and the runs of the agents it hands off to; a workflow's
children go straight under its run span (a workflow has no turns); an agent
used as a tool goes under that tool call's ``execute_tool`` span.

A multi-agent run is one machine, the agent tree (:mod:`helikon.agents`):
its *sub-runs* (handoff targets, workflow children, agents used as tools)
are known by the path their effects are addressed to, and their run ids are
their parent's id, a slash and their key. :func:`parent_of` is the one
place that turns a run id into the run it nests under.

A sub-run's fate is not an event (the tree keeps a child's own terminal
event to itself), so it is read from what the observer sees, as the tree's
rules make it follow (see :mod:`helikon.observability._waves`):
:attr:`RunSpans.failure` is the failure its last result showed, or a
failure its children passed up to it.

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
from helikon.events import AgentEvent, ApprovalRequested, GuardrailTriggered, PermissionDenied
from helikon.model import Usage
from helikon.observability import _semconv as sc
from helikon.observability._telemetry import Signals

Attributes = dict[str, AttributeValue]


def now() -> int:
    """The current time as a span timestamp."""
    return time.time_ns()


@attrs.frozen
class UnknownFailure:
    """A sub-run failed, as its caller saw, in a way the observer cannot name
    (reported with the conventions' fallback ``error.type``, ``_OTHER``)."""

    description: str


@attrs.define(eq=False)
class AgentToolCall:
    """The ``execute_tool`` span of a tool call that runs an agent (the
    agent's run nests under it), and the tool's result once its caller saw it."""

    span: Span
    tool: str
    call_id: str
    start: int
    output: str | None = None
    failed: bool = False


@attrs.define(eq=False)
class RunSpans:
    """One run's open spans.

    ``key`` is the run's id; ``path`` its place in its agent tree (``()``
    for the run the observer was handed); ``stamps`` the trace attributes
    of the run's :class:`~helikon.context.TracerHandle`; ``secrets`` the
    values scrubbed from every text the run's spans carry.

    A sub-run also keeps what its fate is read from: ``usage`` (its own
    model calls', plus its handoff targets' and workflow children's, as the
    tree counts it), ``last`` (when the last wave that touched it ended),
    ``failure`` and ``failed`` (its failed workflow children), ``collects``
    (a parallel or graph workflow: failures are collected, not passed on)
    and ``call`` (when an agent runs it as a tool). A root run's ``tree``
    keeps its sub-runs (:class:`~helikon.observability._waves.Tree`).
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
    secrets: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    turn: Span | None = None
    turn_number: int | None = None
    children: list[RunSpans] = attrs.field(factory=list)
    closed: bool = False
    usage: Usage = Usage()
    last: int | None = None
    failure: object = None
    failed: list[tuple[str, object]] = attrs.field(factory=list)
    collects: bool = False
    call: AgentToolCall | None = None
    tree: Any = None

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


def model_of(agent: object) -> tuple[str | None, str | None]:
    """The provider and model id of an agent's (or a run environment's)
    model, if it has a real one."""
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
    secrets: tuple[str, ...] = (),
    path: tuple[str, ...] = (),
    context: Context | None = None,
    description: str | None = None,
) -> RunSpans:
    """Start a run's ``invoke_agent`` span: under ``context`` when given
    (an agent used as a tool: its call's span), else under ``parent``'s
    current span, or, for a root run, under the caller's current span (so a
    run started from inside a tool nests under that tool's span)."""
    attributes: Attributes = {sc.OPERATION_NAME: sc.INVOKE_AGENT, sc.AGENT_NAME: name, sc.RUN_ID: key}
    if provider is not None:
        attributes[sc.PROVIDER_NAME] = provider
    if model is not None:
        attributes[sc.REQUEST_MODEL] = model
    if description:
        attributes[sc.AGENT_DESCRIPTION] = description
    attributes.update(stamps)
    if context is None and parent is not None:
        context = parent.context()
    span = signals.tracer.start_span(
        f"{sc.INVOKE_AGENT} {name}",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=at,
    )
    run = RunSpans(key, name, span, signals, stamps, provider, model, at, parent, secrets, path)
    if parent is not None and path:
        parent.children.append(run)
    return run


def begin_turn(run: RunSpans, turn: int, at: int) -> None:
    """Model turn ``turn`` of ``run`` began (its first effect is being
    performed): the previous turn ends. The same turn again is no news."""
    if run.turn_number == turn and run.turn is not None:
        return
    _end_turn(run, at)
    attributes: Attributes = {sc.TURN: turn, sc.AGENT_NAME: run.name}
    attributes.update(run.stamps)
    run.turn = run.signals.tracer.start_span(
        sc.TURN_SPAN, context=trace.set_span_in_context(run.span), attributes=attributes, start_time=at
    )
    run.turn_number = turn


def close_run(
    run: RunSpans,
    *,
    at: int,
    usage: Usage | None = None,
    error: object = None,
    suspended: bool = False,
) -> None:
    """End ``run``: its open children (with no more to say about them), its
    turn, then its span, with its usage and, on failure, the error's type
    and description."""
    if run.closed:
        return
    run.closed = True
    for child in run.children:
        close_run(child, at=at, suspended=suspended)
    run.children.clear()
    _end_turn(run, at)
    span = run.span
    if usage is not None:
        span.set_attribute(sc.INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(sc.OUTPUT_TOKENS, usage.output_tokens)
        if usage.cost is not None:
            span.set_attribute(sc.COST, float(usage.cost))
    if suspended:
        span.set_attribute(sc.SUSPENDED, True)
    # The metric carries only the attributes the conventions list for it.
    attributes: Attributes = {sc.OPERATION_NAME: sc.INVOKE_AGENT}
    if run.provider is not None:
        attributes[sc.PROVIDER_NAME] = run.provider
    if run.model is not None:
        attributes[sc.REQUEST_MODEL] = run.model
    if error is not None:
        kind = error_type(error)
        span.set_attribute(sc.ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, sc.scrub(describe_failure(error), run.secrets)))
        attributes[sc.ERROR_TYPE] = kind
    span.end(end_time=at)
    run.signals.duration.record((at - run.start) / 1e9, attributes)


def error_type(error: object) -> str:
    """``error.type`` of a failure (``_OTHER`` when it has no name)."""
    return "_OTHER" if type(error) is UnknownFailure else sc.error_type(error)


def describe_failure(error: object) -> str:
    """A failure value's description, or an exception's type and message."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, UnknownFailure):
        return error.description
    if isinstance(error, RunInterrupted):
        error = error.reason
    try:
        text = describe(error)  # type: ignore[arg-type]
    except Exception:  # not one of helikon's failure values
        text = None
    return text if isinstance(text, str) else str(error)


def _end_turn(run: RunSpans, at: int) -> None:
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


#: The events :func:`note` records.
NOTED: frozenset[type] = frozenset({PermissionDenied, GuardrailTriggered, ApprovalRequested})


def parent_of(run_id: str, runs: Mapping[str, RunSpans]) -> RunSpans | None:
    """The open run a run with id ``run_id`` nests under.

    This is the one place that knows how helikon names child runs: a
    sub-run's id (a handoff target's, a workflow child's, an agent's used as
    a tool) is its parent's id, a slash and its key (``"r1/billing"``,
    ``"r1/summarize:call_7"``), so the parent is the open run with the
    longest such prefix. A root run has none (it nests under the caller's
    current span instead). Keep this in step with how the agent tree and
    :func:`~helikon.interpreters._tree_env.env_at` name sub-runs.

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
    "NOTED",
    "AgentToolCall",
    "Attributes",
    "RunSpans",
    "UnknownFailure",
    "begin_turn",
    "close_run",
    "describe_failure",
    "error_type",
    "model_of",
    "note",
    "now",
    "open_run",
    "parent_of",
    "stamps_of",
]
