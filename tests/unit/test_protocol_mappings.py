"""The protocol mappings on their own: AG-UI input -> items, helikon events
-> AG-UI events (validated by the ``ag-ui-protocol`` types), A2A answers ->
decisions."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ag_ui")
pytest.importorskip("a2a")

from a2a.helpers import new_data_part, new_text_part
from ag_ui.core import Event, EventType, RunAgentInput
from pydantic import TypeAdapter

from helikon.effects import ApprovalRequest
from helikon.errors import OtherError
from helikon.events import (
    ApprovalRequested,
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
from helikon.items import (
    AssistantMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.model import Usage
from helikon.protocols.a2a import decisions_from, request_text
from helikon.protocols.a2a._server import message_text
from helikon.protocols.agui import AguiEvents, encode, input_items, interrupt_id

EVENT = TypeAdapter(Event)


def wire(events: list[object]) -> list[dict[str, object]]:
    """Each event through SSE encoding and back, validated by the official types."""
    out = []
    for event in events:
        line = encode(event).decode()  # type: ignore[arg-type]
        assert line.startswith("data: ") and line.endswith("\n\n")
        data = json.loads(line[6:])
        EVENT.validate_python(data)
        out.append(data)
    return out


def test_input_messages_become_items() -> None:
    input = RunAgentInput.model_validate(
        {
            "threadId": "t",
            "runId": "r",
            "context": [{"description": "timezone", "value": "Europe/Paris"}],
            "messages": [
                {"id": "1", "role": "system", "content": "Be brief."},
                {"id": "2", "role": "user", "content": "where?"},
                {
                    "id": "3",
                    "role": "assistant",
                    "content": "Looking.",
                    "toolCalls": [
                        {"id": "c1", "type": "function", "function": {"name": "loc", "arguments": "{}"}}
                    ],
                },
                {"id": "4", "role": "tool", "toolCallId": "c1", "content": "Lyon"},
                {"id": "5", "role": "tool", "toolCallId": "c2", "content": "", "error": "no GPS"},
                {"id": "6", "role": "reasoning", "content": "hm"},
            ],
        }
    )
    assert input_items(input) == (
        SystemMessage((TextPart("timezone: Europe/Paris"),)),
        SystemMessage((TextPart("Be brief."),)),
        UserMessage((TextPart("where?"),)),
        AssistantMessage((TextPart("Looking."),)),
        ToolCall(CallId("c1"), "loc", "{}"),
        ToolResult(CallId("c1"), "loc", "Lyon", False),
        ToolResult(CallId("c2"), "", "no GPS", True),
    )


def test_text_reasoning_tools_and_the_end_map_to_balanced_events() -> None:
    mapper = AguiEvents("t", "r", frontend=frozenset({"ui_tool"}), agent="a")
    events = [*mapper.start(None, {"k": 1})]
    for event in [
        ReasoningDelta("thinking"),
        TokenDelta("Hi"),
        MessageOutput(AssistantMessage((TextPart("Hi"),))),
        ToolCallItem(ToolCall(CallId("c1"), "lookup", '{"q":1}')),
        ToolOutputItem(ToolResult(CallId("c1"), "lookup", "42")),
        ToolCallItem(ToolCall(CallId("c2"), "ui_tool", "{}")),
        ApprovalRequested(CallId("c3"), "pay", {"amount": 1}),
        PermissionDenied("rm", "no"),
        MessageOutput(AssistantMessage((TextPart("Not streamed."),))),
        RunCompleted(Usage(input_tokens=3, output_tokens=2)),
    ]:
        events += mapper.map(event)
    data = wire(events)
    assert [d["type"] for d in data] == [
        "RUN_STARTED", "STATE_SNAPSHOT",
        "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END", "REASONING_END",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
        "CUSTOM", "CUSTOM",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]  # fmt: skip
    assert data[1]["snapshot"] == {"k": 1, "agent": "a"}
    assert data[10]["parentMessageId"] == data[7]["messageId"]
    finished = data[-1]
    assert finished["result"] == "Not streamed."
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["c2"]}
    assert finished["usage"][0]["totalTokens"] == 5


def test_a_failed_run_is_a_run_error() -> None:
    (event,) = AguiEvents("t", "r").map(RunFailed(OtherError("boom")))
    (data,) = wire([event])
    assert data["type"] == EventType.RUN_ERROR.value and "boom" in str(data["message"])


def test_a_parked_run_ends_with_interrupts_or_pending_calls() -> None:
    ask = ApprovalRequest(CallId("c1"), "pay", '{"amount":1}', "Pay?", ("billing",))
    front = ApprovalRequest(CallId("c2"), "ui_tool", "{}", "run this front-end tool in the client")
    (interrupted,) = wire(AguiEvents("t", "r").parked((ask, front)))
    assert interrupted["outcome"]["type"] == "interrupt"  # type: ignore[index]
    (interrupt,) = interrupted["outcome"]["interrupts"]  # type: ignore[index]
    assert interrupt["id"] == interrupt_id(ask) == "billing/c1" and interrupt["toolCallId"] == "c1"
    (pending,) = wire(AguiEvents("t", "r").parked((front,)))
    assert pending["outcome"] == {"type": "success", "pendingToolCallIds": ["c2"]}


REQUESTS = (
    ApprovalRequest(CallId("c1"), "pay", "{}", "?"),
    ApprovalRequest(CallId("c2"), "pay", "{}", "?", ("sub",)),
)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([new_text_part("Yes.")], [(True, ""), (True, "")]),
        ([new_text_part("no, too much")], [(False, "no, too much"), (False, "no, too much")]),
        ([new_data_part({"approved": False, "reason": "later"})], [(False, "later"), (False, "later")]),
        (
            [new_data_part({"decisions": [{"callId": "c2", "approved": True}]})],
            [(True, "")],
        ),
    ],
)
def test_a2a_answers_become_decisions(parts: list[object], expected: list[tuple[bool, str]]) -> None:
    decisions = decisions_from(parts, REQUESTS)  # type: ignore[arg-type]
    assert [(d.approved, d.reason) for d in decisions] == expected
    if len(decisions) == 1:
        assert decisions[0].path == ("sub",)


def test_a_remote_agent_is_asked_the_last_user_message() -> None:
    items = (
        UserMessage((TextPart("first"),)),
        AssistantMessage((TextPart("ok"),)),
        UserMessage((TextPart("last"),)),
    )
    assert request_text(items) == "last"
    assert request_text((SystemMessage((TextPart("only this"),)),)) == "only this"


def test_an_a2a_message_with_data_is_asked_as_text() -> None:
    parts = [new_text_part("Summarise:"), new_data_part({"b": 2, "a": 1})]
    assert message_text(parts) == 'Summarise:\n{"a": 1, "b": 2}'
