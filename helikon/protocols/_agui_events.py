"""The AG-UI mappings: an AG-UI input as helikon items, helikon events as
AG-UI events (the tables are in ``docs/protocols.md``), and the answers an
input carries for a waiting run. Pure functions and a small mapper; the
server is :mod:`helikon.protocols.agui`."""

from __future__ import annotations

from typing import Any, final

try:
    from ag_ui._generated.models import AddOperation
    from ag_ui.core import AssistantMessage as AguiAssistant
    from ag_ui.core import (
        BaseEvent,
        CustomEvent,
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
    from ag_ui.core import ToolMessage as AguiToolMessage
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.protocols.agui needs ag-ui-protocol: pip install 'paigasus-helikon[agui]'"
    ) from exc


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
from helikon.items import AssistantMessage, Item, TextPart, ToolCall, ToolResult, text_of
from helikon.items import SystemMessage as HSystem
from helikon.items import UserMessage as HUser
from helikon.model import Usage
from helikon.protocols._frontend import FRONTEND_PROMPT
from helikon.protocols._parked import Decision, ParkedRun

#: The name of the ``CUSTOM`` event announcing an approval question.
APPROVAL_EVENT = "helikon.approval_requested"
#: The ``CUSTOM`` events for a denied call and a tripped guardrail.
DENIED_EVENT = "helikon.permission_denied"
GUARDRAIL_EVENT = "helikon.guardrail_triggered"
#: The ``reason`` of an approval interrupt.
APPROVAL_REASON = "tool_approval"


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


__all__ = [
    "APPROVAL_EVENT",
    "APPROVAL_REASON",
    "APPROVAL_SCHEMA",
    "DENIED_EVENT",
    "GUARDRAIL_EVENT",
    "AguiEvents",
    "answers_of",
    "encode",
    "input_items",
    "interrupt_id",
]
