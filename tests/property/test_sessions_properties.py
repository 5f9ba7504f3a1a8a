"""Sessions, driven by Hypothesis.

- Any run's events, recorded and drained, give a log in which every tool call
  is answered, and whose projection is a provider-valid conversation that
  keeps every message, in order.
- The projection of *any* log (orphan results, repeated calls, markers of any
  size) is provider-valid, and projecting is idempotent.
- Compaction never loses what came after the last marker: the projection
  ends with exactly the messages appended since; and through a
  CompactingSession every appended event stays in the log, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from helikon.errors import Cancelled, ModelError
from helikon.events import (
    AgentEvent,
    AgentUpdated,
    HandoffItem,
    MessageOutput,
    RunCompleted,
    RunFailed,
    TokenDelta,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    Item,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.model import Usage
from helikon.sessions import (
    AssistantMessageEvent,
    Compacted,
    CompactingSession,
    HandoffOccurred,
    MemorySession,
    SessionEvent,
    SessionRecorder,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
    conversation_problems,
    project,
)
from helikon.sessions._project import make_valid
from helikon.testing import MockModel, say

call_ids = st.sampled_from(["a", "b", "c", "d"]).map(CallId)
names = st.sampled_from(["lookup", "add", ""])
texts = st.text(max_size=12)
agents = st.sampled_from(["triage", "billing", "support"])
stamps = st.integers(min_value=0, max_value=2**41)

tool_calls = st.builds(ToolCall, call_ids, names, st.sampled_from(["{}", '{"a": 1}', "{oops"]))
tool_results = st.builds(ToolResult, call_ids, names, texts, st.booleans())
assistant_messages = st.builds(
    AssistantMessage, st.lists(st.builds(TextPart, texts), max_size=2).map(tuple), st.none() | agents
)
input_items: st.SearchStrategy[Item] = st.one_of(
    st.builds(user_text, texts),
    st.builds(system_text, texts),
    assistant_messages,
    tool_calls,
    tool_results,
)

#: Run events, weighted towards the ones that are conversation.
agent_events: st.SearchStrategy[AgentEvent] = st.one_of(
    st.builds(MessageOutput, assistant_messages),
    st.builds(ToolCallItem, tool_calls),
    st.builds(ToolCallItem, tool_calls),
    st.builds(ToolOutputItem, tool_results),
    st.builds(ToolOutputItem, tool_results),
    st.builds(HandoffItem, agents, agents),
    st.builds(AgentUpdated, agents),
    st.builds(TokenDelta, texts),
    st.just(RunCompleted(Usage())),
    st.just(RunFailed(Cancelled())),
)

session_events: st.SearchStrategy[SessionEvent] = st.one_of(
    st.builds(UserMessageEvent.from_text, texts, at=stamps),
    st.builds(AssistantMessageEvent.from_text, texts, st.none() | agents, at=stamps),
    st.builds(ToolCallRecorded, call_ids, names, st.just("{}"), at=stamps),
    st.builds(ToolCallRecorded, call_ids, names, st.just("{}"), at=stamps),
    st.builds(ToolResultRecorded, call_ids, texts, names, st.booleans(), at=stamps),
    st.builds(ToolResultRecorded, call_ids, texts, names, st.booleans(), at=stamps),
    st.builds(HandoffOccurred, agents, agents, at=stamps),
    st.builds(Compacted, texts, st.integers(min_value=0, max_value=12), at=stamps),
)


def messages(items: Sequence[Item]) -> list[Item]:
    """The items that are not tool traffic (the repair never adds or drops these)."""
    return [i for i in items if type(i) in (UserMessage, SystemMessage, AssistantMessage)]


def content(item: Item) -> object:
    return getattr(item, "content", None)


def open_calls_at_end(log: Sequence[SessionEvent]) -> set[str]:
    open_: set[str] = set()
    for event in log:
        if type(event) is ToolCallRecorded:
            open_.add(event.call_id)
        elif type(event) is ToolResultRecorded:
            open_.discard(event.call_id)
    return open_


@given(st.lists(input_items, max_size=5), st.lists(agent_events, max_size=30), stamps)
def test_a_drained_recording_answers_every_call_and_projects_to_a_valid_conversation(
    inputs: list[Item], events: list[AgentEvent], now: int
) -> None:
    recorder = SessionRecorder(inputs, clock=lambda: now)
    for event in events:
        recorder.observe(event)
    log = recorder.drain()

    assert open_calls_at_end(log) == set()
    conversation = project(log)
    assert conversation_problems(conversation) == ()
    # no message is lost or reordered (system inputs are not history)
    recorded = [i for i in inputs if type(i) is not SystemMessage]
    recorded += [e.item for e in events if type(e) is MessageOutput]
    assert [type(m) for m in messages(conversation)] == [type(m) for m in messages(recorded)]
    assert [content(m) for m in messages(conversation)] == [content(m) for m in messages(recorded)]
    # every call the projection keeps is the one recorded, in order of first sight
    calls = [i for i in conversation if type(i) is ToolCall]
    assert len({c.call_id for c in calls}) <= len(calls)


@given(st.lists(agent_events, max_size=30))
def test_recording_incrementally_then_draining_gives_the_same_log(events: list[AgentEvent]) -> None:
    at_once = SessionRecorder(clock=lambda: 0)
    bit_by_bit = SessionRecorder(clock=lambda: 0)
    taken: list[SessionEvent] = []
    for event in events:
        at_once.observe(event)
        bit_by_bit.observe(event)
        taken.extend(bit_by_bit.take())
    assert at_once.drain() == (*taken, *bit_by_bit.drain())


@given(st.lists(session_events, max_size=30))
def test_any_log_projects_to_a_valid_conversation(log: list[SessionEvent]) -> None:
    conversation = project(log)
    assert conversation_problems(conversation) == ()
    assert make_valid(conversation) == conversation
    assert project(log) == conversation  # deterministic


@given(st.lists(session_events, max_size=20), st.lists(session_events, max_size=20), texts, stamps)
def test_a_full_history_marker_keeps_exactly_what_follows_it(
    before: list[SessionEvent], after: list[SessionEvent], summary: str, at: int
) -> None:
    after = [e for e in after if type(e) is not Compacted]
    log = [*before, Compacted(summary, len(before), at=at), *after]
    assert project(log) == (system_text(summary), *project(after))


@given(st.lists(session_events, min_size=1, max_size=30))
def test_the_messages_after_the_last_marker_always_end_the_projection(log: list[SessionEvent]) -> None:
    last = max((i for i, e in enumerate(log) if type(e) is Compacted), default=-1)
    tail = messages(project(log[last + 1 :]))
    assert messages(project(log))[len(messages(project(log))) - len(tail) :] == tail


batches = st.lists(
    st.lists(st.builds(UserMessageEvent.from_text, st.text(max_size=60), at=stamps), max_size=3)
)


@settings(deadline=None)
@given(batches, st.integers(min_value=1, max_value=80), st.lists(st.sampled_from(["ok", "blank", "fail"])))
def test_compaction_never_loses_an_appended_event(
    appends: list[list[SessionEvent]], threshold: int, replies: list[str]
) -> None:
    scripts = []
    for i, reply in enumerate(replies):
        if reply == "ok":
            scripts.append(say(f"summary {i}"))
        elif reply == "blank":
            scripts.append(say("   "))
        else:
            scripts.append([ModelError.unavailable("down")])
    inner = MemorySession()
    session = CompactingSession(inner, MockModel(scripts), threshold, clock=lambda: 0)

    async def go() -> list[SessionEvent]:
        for batch in appends:
            await session.append(batch)
        return await inner.events()

    log = anyio.run(go, backend="trio")
    assert [e for e in log if type(e) is not Compacted] == [e for batch in appends for e in batch]
    markers = [i for i, e in enumerate(log) if type(e) is Compacted]
    if markers:
        last = markers[-1]
        marker = log[last]
        assert type(marker) is Compacted and marker.original_count == last
        assert project(log) == (system_text(marker.summary), *project(log[last + 1 :]))
    assert conversation_problems(project(log)) == ()
