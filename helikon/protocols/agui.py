"""Serve a helikon agent as an AG-UI endpoint (the ``agui`` extra).

`AG-UI <https://docs.ag-ui.com>`_ is the agent -> user-interface event
protocol: the front end POSTs a ``RunAgentInput`` (thread id, run id, the
messages so far, the tools it provides, state, forwarded props) and reads
the run as a stream of AG-UI events (Server-Sent Events).

- :class:`AguiServer` serves one agent (single, tree or workflow): ``app()``
  is a Starlette app (one route, ``POST /``) to serve alone or mount in any
  ASGI app (the agent server's included); its :meth:`~AguiServer.lifespan`
  owns the runs.
- :class:`AguiEvents` maps helikon events to AG-UI events (the table is in
  ``docs/protocols.md``); :func:`input_items` maps AG-UI messages to items.

Front-end tools and approvals use the same machinery: the run waits in
memory for an answer (the run's approval handler parks), the AG-UI run
ends (``RUN_FINISHED`` with pending tool calls, or with an ``interrupt``
outcome for approvals, which are also announced with a ``CUSTOM`` event),
and the next request of the thread carries the answer (a ``tool`` message
for a front-end tool, a ``resume`` entry for an approval): the same helikon
run goes on.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, final

try:
    from ag_ui._generated.models import AddOperation
    from ag_ui.core import (
        AssistantMessage as AguiAssistant,
    )
    from ag_ui.core import (
        BaseEvent,
        CustomEvent,
        EventType,
        Interrupt,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateDeltaEvent,
        StateSnapshotEvent,
        StepFinishedEvent,
        StepStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        TokenUsage,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )
    from ag_ui.core import (
        ToolMessage as AguiToolMessage,
    )
    from pydantic import ValidationError
    from starlette.applications import Starlette
    from starlette.requests import HTTPConnection, Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.protocols.agui needs ag-ui-protocol and Starlette: pip install 'paigasus-helikon[agui]'"
    ) from exc

import anyio

from helikon.context import RunContext
from helikon.effects import ApprovalRequest
from helikon.errors import AgentError, describe
from helikon.events import (
    AgentEvent,
    AgentUpdated,
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    ReasoningDelta,
    RunCompleted,
    RunFailed,
    TokenDelta,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.ids import CallId
from helikon.items import AgentInput, AssistantMessage, Item, TextPart, ToolCall, ToolResult, text_of
from helikon.items import SystemMessage as HSystem
from helikon.items import UserMessage as HUser
from helikon.model import Usage
from helikon.protocols._auth import Authenticated, owner
from helikon.protocols._calls import call
from helikon.protocols._frontend import FRONTEND_PROMPT, FrontendTool, asking_policy
from helikon.protocols._mount import mount_protocols
from helikon.protocols._parked import Decision, Parked, ParkedRun, ParkedRuns
from helikon.server._providers import Authenticator

log = logging.getLogger("helikon.protocols.agui")

#: The name of the ``CUSTOM`` event announcing an approval question.
APPROVAL_EVENT = "helikon.approval_requested"
#: The ``CUSTOM`` events for a denied call and a tripped guardrail.
DENIED_EVENT = "helikon.permission_denied"
GUARDRAIL_EVENT = "helikon.guardrail_triggered"
#: The ``reason`` of an approval interrupt.
APPROVAL_REASON = "tool_approval"
MAX_BODY_BYTES = 4 * 1024 * 1024

#: ``(request, input) -> RunContext`` (sync or async).
AguiContext = Callable[[HTTPConnection, RunAgentInput], Any]


# -- AG-UI input -> helikon items ---------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(getattr(p, "text", "") or "" for p in content)
    return "" if content is None else str(content)


def input_items(input: RunAgentInput) -> tuple[Item, ...]:
    """The conversation of an AG-UI input as helikon items: its context
    entries first (one system message each), then its messages (``user``,
    ``system``/``developer``, ``assistant`` with its tool calls, ``tool``);
    reasoning and activity messages are the client's own and are left out."""
    items: list[Item] = [HSystem((TextPart(f"{c.description}: {c.value}"),)) for c in input.context or ()]
    names: dict[str, str] = {}
    for message in input.messages:
        match message.role:
            case "user":
                items.append(HUser((TextPart(_text(message.content)),)))
            case "system" | "developer":
                items.append(HSystem((TextPart(_text(message.content)),)))
            case "assistant":
                assert isinstance(message, AguiAssistant)
                if message.content:
                    items.append(AssistantMessage((TextPart(message.content),)))
                for tool_call in message.tool_calls or ():
                    names[tool_call.id] = tool_call.function.name
                    items.append(
                        ToolCall(CallId(tool_call.id), tool_call.function.name, tool_call.function.arguments)
                    )
            case "tool":
                assert isinstance(message, AguiToolMessage)
                content = _text(message.content) or (message.error or "")
                call_id = message.tool_call_id
                items.append(
                    ToolResult(CallId(call_id), names.get(call_id, ""), content, message.error is not None)
                )
    return tuple(items)


# -- helikon events -> AG-UI events -------------------------------------------------------


def interrupt_id(request: ApprovalRequest) -> str:
    """The id of the interrupt asking ``request`` (its path and call id)."""
    return "/".join((*request.path, request.call_id))


NO_USAGE = Usage()


def _usage(usage: Usage) -> list[TokenUsage] | None:
    if usage == Usage():
        return None
    return [
        TokenUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens or None,
            cached_input_tokens=usage.cached_input_tokens or None,
        )
    ]


@final
class AguiEvents:
    """Maps one AG-UI run's helikon events to AG-UI events (a small state
    machine: which text message, reasoning message and step are open).

    ``frontend`` names the front-end tools (their questions are pending
    tool calls, not approvals); ids of new messages are ``{run_id}-{n}``.
    """

    def __init__(
        self, thread_id: str, run_id: str, frontend: frozenset[str] = frozenset(), agent: str = ""
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.frontend = frontend
        self.agent = agent
        self._count = 0
        self._text: str | None = None  # the open text message's id
        self._reasoning: str | None = None
        self._step: str | None = None
        self._last_message: str | None = None
        self._output: str | None = None
        self._pending_calls: list[str] = []

    def _id(self) -> str:
        self._count += 1
        return f"{self.run_id}-{self._count}"

    def start(self, input: RunAgentInput | None = None, state: Any = None) -> list[BaseEvent]:
        """``RUN_STARTED`` (echoing ``input``), then the state's snapshot."""
        events: list[BaseEvent] = [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, input=input)]
        if isinstance(state, dict):
            events.append(StateSnapshotEvent(snapshot={**state, "agent": self.agent}))
        return events

    def _close_text(self) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self._reasoning is not None:
            events += [
                ReasoningMessageEndEvent(message_id=self._reasoning),
                ReasoningEndEvent(message_id=self._reasoning),
            ]
            self._reasoning = None
        if self._text is not None:
            events.append(TextMessageEndEvent(message_id=self._text))
            self._last_message, self._text = self._text, None
        return events

    def _close_step(self) -> list[BaseEvent]:
        if self._step is None:
            return []
        step, self._step = self._step, None
        return [StepFinishedEvent(step_name=step)]

    def map(self, event: AgentEvent) -> list[BaseEvent]:
        """The AG-UI events for one helikon event."""
        match event:
            case TokenDelta(text=text) if text:
                events = []
                if self._reasoning is not None:
                    events = self._close_text()
                if self._text is None:
                    self._text = self._id()
                    events.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
                events.append(TextMessageContentEvent(message_id=self._text, delta=text))
                return events
            case ReasoningDelta(text=text) if text:
                events = []
                if self._reasoning is None:
                    self._reasoning = self._id()
                    events += [
                        ReasoningStartEvent(message_id=self._reasoning),
                        ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"),
                    ]
                events.append(ReasoningMessageContentEvent(message_id=self._reasoning, delta=text))
                return events
            case MessageOutput(item=item):
                text = text_of(item.content)
                self._output = text
                if self._text is None and text:  # a model that did not stream
                    events = self._close_text()
                    self._text = self._id()
                    events += [
                        TextMessageStartEvent(message_id=self._text, role="assistant"),
                        TextMessageContentEvent(message_id=self._text, delta=text),
                    ]
                    return events + self._close_text()
                return self._close_text()
            case ToolCallItem(item=item):
                events = self._close_text()
                if item.name in self.frontend:
                    self._pending_calls.append(item.call_id)
                events.append(
                    ToolCallStartEvent(
                        tool_call_id=item.call_id,
                        tool_call_name=item.name,
                        parent_message_id=self._last_message,
                    )
                )
                if item.arguments:
                    events.append(ToolCallArgsEvent(tool_call_id=item.call_id, delta=item.arguments))
                events.append(ToolCallEndEvent(tool_call_id=item.call_id))
                return events
            case ToolOutputItem(item=item):
                if item.call_id in self._pending_calls:
                    self._pending_calls.remove(item.call_id)
                if item.name in self.frontend and not item.is_error:
                    return []  # the client's own result: it has it already
                return [
                    *self._close_text(),
                    ToolCallResultEvent(
                        message_id=self._id(), tool_call_id=item.call_id, content=item.content, role="tool"
                    ),
                ]
            case AgentUpdated(agent=agent):
                if agent == self._step:  # a handoff says it twice (HandoffItem, AgentUpdated)
                    return []
                events = [*self._close_text(), *self._close_step(), StepStartedEvent(step_name=agent)]
                self._step = agent
                if agent != self.agent:
                    self.agent = agent
                    events.append(StateDeltaEvent(delta=[AddOperation(op="add", path="/agent", value=agent)]))
                return events
            case HandoffItem(to_agent=agent):
                return self.map(AgentUpdated(agent))
            case ApprovalRequested(call_id=call_id, tool=tool, args=args) if tool not in self.frontend:
                value = {"callId": call_id, "tool": tool, "arguments": args}
                return [*self._close_text(), CustomEvent(name=APPROVAL_EVENT, value=value)]
            case PermissionDenied(tool=tool, reason=reason):
                return [CustomEvent(name=DENIED_EVENT, value={"tool": tool, "reason": reason})]
            case GuardrailTriggered(kind=kind, info=info):
                return [CustomEvent(name=GUARDRAIL_EVENT, value={"kind": kind, "info": info})]
            case RunCompleted(usage=usage):
                return [*self._close_text(), *self._close_step(), self._finished(usage)]
            case RunFailed(error=error, usage=usage):
                return [*self._close_text(), *self._close_step(), self.error(error, usage)]
        return []

    def _finished(self, usage: Usage = NO_USAGE) -> RunFinishedEvent:
        pending = list(self._pending_calls) or None
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            result=self._output,
            outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=pending),
            usage=_usage(usage),
        )

    def error(self, error: AgentError | str, usage: Usage = NO_USAGE) -> RunErrorEvent:
        """``RUN_ERROR`` for a failed run."""
        message = error if isinstance(error, str) else describe(error)
        code = None if isinstance(error, str) else type(error).__name__
        return RunErrorEvent(message=message, code=code, usage=_usage(usage))

    def parked(self, requests: tuple[ApprovalRequest, ...]) -> list[BaseEvent]:
        """The end of an AG-UI run whose helikon run waits: pending front-end
        tool calls (a success with ``pendingToolCallIds``), or approvals (an
        ``interrupt`` outcome naming each question)."""
        events = [*self._close_text(), *self._close_step()]
        asks = [r for r in requests if r.prompt != FRONTEND_PROMPT]
        if not asks:
            calls = [str(r.call_id) for r in requests]
            events.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=calls),
                )
            )
            return events
        interrupts = [
            Interrupt(
                id=interrupt_id(r),
                reason=APPROVAL_REASON,
                message=r.prompt,
                tool_call_id=r.call_id,
                response_schema=APPROVAL_SCHEMA,
            )
            for r in asks
        ]
        events.append(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
            )
        )
        return events


#: What an approval's resume payload may say (``true``/``false`` also do).
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


def answers_of(input: RunAgentInput, run: ParkedRun) -> tuple[list[Decision], dict[str, str]]:
    """The decisions and front-end results in ``input`` for ``run``'s
    pending questions: ``resume`` entries answer approvals (by interrupt
    id), ``tool`` messages answer front-end tool calls (by call id)."""
    decisions: list[Decision] = []
    results: dict[str, str] = {}
    pending = {interrupt_id(w.request): w.request for w in run.pending.values()}
    for entry in input.resume or ():
        request = pending.get(entry.interrupt_id)
        if request is None or request.prompt == FRONTEND_PROMPT:
            continue
        approved, reason = False, "the client cancelled the question"
        if entry.status == "resolved":
            payload = entry.payload
            approved = payload is True or (isinstance(payload, dict) and payload.get("approved") is True)
            reason = str(payload.get("reason", "")) if isinstance(payload, dict) else ""
            reason = reason or ("" if approved else "a human denied the call")
        decisions.append(Decision(request.call_id, approved, reason, request.path))
    for message in input.messages:
        if message.role != "tool":
            continue
        assert isinstance(message, AguiToolMessage)
        request = run.find(message.tool_call_id)
        if request is None or request.prompt != FRONTEND_PROMPT:
            continue
        results[message.tool_call_id] = message.error or _text(message.content)
        decisions.append(Decision(request.call_id, True, "", request.path))
    return decisions, results


def encode(event: BaseEvent) -> bytes:
    """One AG-UI event as a Server-Sent Events message."""
    return f"data: {event.model_dump_json(by_alias=True)}\n\n".encode()


# -- the server ------------------------------------------------------------------------------


def _frontend_tools(agent: Any, input: RunAgentInput, results: dict[str, str]) -> tuple[Any, frozenset[str]]:
    """``agent`` with the client's tools added (an agent with ``with_tools``;
    others run without them), and their names."""
    tools = input.tools or []
    with_tools = getattr(agent, "with_tools", None)
    if not tools or with_tools is None:
        return agent, frozenset()
    own = {t.name for t in getattr(agent, "tools", ())}
    added = [
        FrontendTool(t.name, t.description, t.parameters if isinstance(t.parameters, dict) else {}, results)
        for t in tools
        if t.name not in own
    ]
    return with_tools(*added), frozenset(t.name for t in added)


@final
class AguiServer:
    """An agent behind the AG-UI protocol.

    Args:
        agent: the agent (anything with ``name`` and ``run(ctx, input)``).
        context: the run context, or ``(request, input) -> RunContext``
            (sync or async); default ``RunContext.ephemeral(None)``.
        auth: an authenticator, as the agent server's (``BearerAuth`` or
            ``(request) -> identity or None``); threads are scoped to the
            identity (another identity's thread id starts a new thread).
    """

    def __init__(
        self,
        agent: Any,
        *,
        context: RunContext[Any] | AguiContext | None = None,
        auth: Authenticator | None = None,
    ) -> None:
        self.agent = agent
        self.context = context
        self.auth = auth
        self.runs = ParkedRuns()

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Owns the runs (pass it to an outer app when mounting :meth:`app`)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.runs.serve)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    def app(self) -> Any:
        """The ASGI app: ``POST /`` runs the agent (``Accept: text/event-stream``)."""
        inner = Starlette(routes=[Route("/", self._run, methods=["POST"])], lifespan=self.lifespan)
        return Authenticated(inner, self.auth)

    async def _ctx(self, request: Request, input: RunAgentInput) -> RunContext[Any]:
        match self.context:
            case None:
                return RunContext.ephemeral(None)
            case RunContext():
                return self.context
        ctx: RunContext[Any] = await call(self.context, request, input)
        return ctx

    async def _run(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": {"code": "too_large", "message": "the body is too large"}}, 413)
        try:
            input = RunAgentInput.model_validate_json(body)
        except ValidationError as exc:
            message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            return JSONResponse({"error": {"code": "bad_input", "message": message}}, 422)
        key = (owner(request), input.thread_id)
        run = self.runs.get(key)
        events: AguiEvents | None = None
        if run is not None and run.pending:
            decisions, results = answers_of(input, run)
            if decisions:
                names: frozenset[str] = run.data.get("frontend", frozenset())
                run.data.setdefault("results", {}).update(results)
                run.answer(decisions)
                events = AguiEvents(input.thread_id, input.run_id, names, str(self.agent.name))
        if events is None:
            if run is not None:
                run.cancel()
            store: dict[str, str] = {}
            agent, names = _frontend_tools(self.agent, input, store)
            ctx = await self._ctx(request, input)
            if names:
                ctx = ctx.with_permission_policy(asking_policy(names, ctx.permission_policy))
            run = self.runs.start(key, uuid.uuid4().hex, agent, ctx, AgentInput(input_items(input)))
            run.data.update(frontend=names, results=store)
            events = AguiEvents(input.thread_id, input.run_id, names, str(self.agent.name))
        assert run is not None
        return StreamingResponse(
            self._stream(run, events, input),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _stream(self, run: ParkedRun, events: AguiEvents, input: RunAgentInput) -> AsyncIterator[bytes]:
        for event in events.start(input, input.state):
            yield encode(event)
        ended = False
        try:
            async with aclosing(run.segment()) as segment:
                async for item in segment:
                    if isinstance(item, Parked):
                        for event in events.parked(item.requests):
                            yield encode(event)
                        ended = True
                        return
                    for event in events.map(item):
                        if event.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
                            ended = True
                        yield encode(event)
            if not ended:
                yield encode(events.error("the run ended without a terminal event"))
                ended = True
        finally:
            if not ended:  # the client went away mid-run: the run stops with it
                run.cancel()


def agui_app(
    agent: Any,
    *,
    context: RunContext[Any] | AguiContext | None = None,
    auth: Authenticator | None = None,
) -> Any:
    """``AguiServer(agent, ...).app()``: an ASGI app serving ``agent`` over AG-UI."""
    return AguiServer(agent, context=context, auth=auth).app()


def parse_events(body: str) -> list[dict[str, Any]]:
    """The events of an AG-UI SSE body, as JSON objects (for tests and tools)."""
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


__all__ = [
    "APPROVAL_EVENT",
    "APPROVAL_REASON",
    "APPROVAL_SCHEMA",
    "AguiContext",
    "AguiEvents",
    "AguiServer",
    "agui_app",
    "answers_of",
    "encode",
    "input_items",
    "interrupt_id",
    "mount_protocols",
    "parse_events",
]
