"""The session recorder: a run's events in, session events out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from helikon import AgentEvent, LlmAgent, RunCompleted, RunStarted, collect, tool
from helikon.errors import Cancelled
from helikon.events import (
    AgentUpdated,
    HandoffItem,
    MessageOutput,
    RunFailed,
    TokenDelta,
    ToolCallDelta,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    system_text,
    user_text,
)
from helikon.model import Usage
from helikon.sessions import (
    INTERRUPTED_RESULT,
    AssistantMessageEvent,
    HandoffOccurred,
    SessionRecorder,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
    conversation_problems,
    project,
)
from helikon.sessions._recorder import RecorderState, drain_events, record_event, seed_recording, take_events
from helikon.testing import MockModel, call_tools, say


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def call(call_id: str, name: str = "f") -> ToolCall:
    return ToolCall(CallId(call_id), name, "{}")


def result(call_id: str, content: str = "ok", name: str = "f") -> ToolResult:
    return ToolResult(CallId(call_id), name, content)


def test_seed_items_map_one_to_one_and_system_messages_are_not_history() -> None:
    state = seed_recording(
        [
            system_text("be brief"),
            user_text("hi"),
            AssistantMessage((TextPart("yo"),)),
            call("a"),
            result("a"),
        ],
        at=5,
        agent="bot",
    )
    assert state.pending == (
        UserMessageEvent.from_text("hi", at=5),
        AssistantMessageEvent.from_text("yo", "bot", at=5),
        ToolCallRecorded(CallId("a"), "f", "{}", at=5),
        ToolResultRecorded(CallId("a"), "ok", "f", at=5),
    )
    assert state.open_calls == ()


def test_the_conversation_events_are_recorded_and_the_rest_ignored() -> None:
    state = RecorderState()
    events: list[AgentEvent] = [
        RunStarted("triage", "r1"),  # type: ignore[arg-type]
        TurnStarted(1),
        TokenDelta("hel"),
        ToolCallDelta("a", "f", "{"),
        MessageOutput(AssistantMessage((TextPart("hello"),))),
        ToolCallItem(call("a")),
        ToolOutputItem(result("a")),
        HandoffItem("triage", "billing"),
        AgentUpdated("billing"),
        MessageOutput(AssistantMessage((TextPart("billing here"),))),
        RunCompleted(Usage()),
    ]
    for at, event in enumerate(events):
        state = record_event(state, event, at)
    assert state.pending == (
        AssistantMessageEvent.from_text("hello", "triage", at=4),
        ToolCallRecorded(CallId("a"), "f", "{}", at=5),
        ToolResultRecorded(CallId("a"), "ok", "f", at=6),
        HandoffOccurred("triage", "billing", at=7),
        AssistantMessageEvent.from_text("billing here", "billing", at=9),
    )
    assert state.agent == "billing"


def test_a_message_keeps_its_own_agent() -> None:
    state = record_event(RecorderState(agent="a"), MessageOutput(AssistantMessage((), "b")), 0)
    assert state.pending[0].agent == "b"  # type: ignore[union-attr]


def test_drain_answers_every_open_call_with_an_interruption() -> None:
    state = RecorderState()
    events: list[AgentEvent] = [
        ToolCallItem(call("a", "slow")),
        ToolCallItem(call("b")),
        ToolOutputItem(result("b")),
    ]
    for event in events:
        state = record_event(state, event, 1)
    assert [c.call_id for c in state.open_calls] == ["a"]
    drained, state = drain_events(state, at=9)
    assert drained[-1] == ToolResultRecorded(CallId("a"), INTERRUPTED_RESULT, "slow", True, at=9)
    assert state == RecorderState()


def test_take_hands_over_without_closing_calls() -> None:
    state = record_event(RecorderState(), ToolCallItem(call("a")), 1)
    taken, state = take_events(state)
    assert taken == (ToolCallRecorded(CallId("a"), "f", "{}", at=1),)
    assert state.pending == () and [c.call_id for c in state.open_calls] == ["a"]
    drained, _ = drain_events(state, at=2)
    assert drained == (ToolResultRecorded(CallId("a"), INTERRUPTED_RESULT, "f", True, at=2),)


def test_the_facade_stamps_with_its_clock_unless_told() -> None:
    clock = Clock()
    recorder = SessionRecorder([user_text("hi")], clock=clock)
    recorder.observe(ToolCallItem(call("a")))
    recorder.observe(ToolOutputItem(result("a")), at=5)
    assert [e.at for e in recorder.take()] == [1001, 1002, 5]
    recorder.observe(ToolCallItem(call("b")))
    assert [c.call_id for c in recorder.open_calls] == ["b"]
    drained = recorder.drain(at=77)
    assert [(type(e).__name__, e.at) for e in drained] == [
        ("ToolCallRecorded", 1003),
        ("ToolResultRecorded", 77),
    ]
    assert recorder.drain() == ()
    assert recorder.state == RecorderState()


def test_a_failed_run_mid_tool_still_projects_to_a_valid_conversation() -> None:
    recorder = SessionRecorder([user_text("go")], clock=Clock())
    events: list[AgentEvent] = [ToolCallItem(call("a")), ToolCallItem(call("b")), RunFailed(Cancelled())]
    for event in events:
        recorder.observe(event)
    log = recorder.drain()
    assert conversation_problems(project(log)) == ()
    assert [type(e).__name__ for e in log][-2:] == ["ToolResultRecorded", "ToolResultRecorded"]


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_the_log_of_a_real_run_projects_to_the_runs_conversation(backend: str) -> None:
    model = MockModel(
        [
            call_tools(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4}), text="Let me add."),
            say("3 and 7."),
        ]
    )
    agent: LlmAgent[None] = LlmAgent(name="calc", model=model, instructions="You add.", tools=[add])
    recorder = SessionRecorder([user_text("add things")], clock=Clock())

    async def run() -> None:
        async def observed() -> AsyncIterator[AgentEvent]:
            async for event in agent.run(None, "add things"):
                recorder.observe(event)
                yield event

        await collect(observed())

    anyio.run(run, backend=backend)
    log = recorder.drain()
    last_request = [m for m in model.requests[-1].messages if type(m) is not SystemMessage]
    assert project(log) == (*last_request, AssistantMessage((TextPart("3 and 7."),), "calc"))
    assert conversation_problems(project(log)) == ()
