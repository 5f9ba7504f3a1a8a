"""Projection: the book's rules, and the repair that keeps a log provider-valid."""

from __future__ import annotations

from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.sessions import (
    INTERRUPTED_RESULT,
    AssistantMessageEvent,
    Compacted,
    HandoffOccurred,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
    conversation_problems,
    project,
)
from helikon.sessions._project import make_valid


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=0)


def said(text: str, agent: str | None = "bot") -> AssistantMessageEvent:
    return AssistantMessageEvent.from_text(text, agent, at=0)


def called(call_id: str, name: str = "f", args: str = "{}") -> ToolCallRecorded:
    return ToolCallRecorded(CallId(call_id), name, args, at=0)


def returned(
    call_id: str, content: str = "ok", name: str = "f", is_error: bool = False
) -> ToolResultRecorded:
    return ToolResultRecorded(CallId(call_id), content, name, is_error, at=0)


def interrupted(call_id: str, name: str = "f") -> ToolResult:
    return ToolResult(CallId(call_id), name, INTERRUPTED_RESULT, is_error=True)


def test_an_empty_log_projects_to_an_empty_conversation() -> None:
    assert project([]) == ()


def test_message_events_map_one_to_one() -> None:
    log: list[SessionEvent] = [
        UserMessageEvent((TextPart("look"), ImagePart(url="u")), at=0),
        said("calling"),
        called("c1", "add", '{"a": 1}'),
        returned("c1", "2", "add"),
        said("it is 2", None),
    ]
    assert project(log) == (
        UserMessage((TextPart("look"), ImagePart(url="u"))),
        AssistantMessage((TextPart("calling"),), "bot"),
        ToolCall(CallId("c1"), "add", '{"a": 1}'),
        ToolResult(CallId("c1"), "add", "2"),
        AssistantMessage((TextPart("it is 2"),), None),
    )


def test_a_handoff_is_audit_only() -> None:
    log: list[SessionEvent] = [
        user("hi"),
        HandoffOccurred("triage", "billing", at=1),
        said("billing here", "billing"),
    ]
    assert project(log) == (user_text("hi"), AssistantMessage((TextPart("billing here"),), "billing"))


def test_a_marker_drops_the_messages_of_the_events_it_covers_and_emits_the_summary_as_system() -> None:
    log: list[SessionEvent] = [user("a"), said("b"), user("c"), Compacted("summary 1", 3, at=1), user("d")]
    assert project(log) == (system_text("summary 1"), user_text("d"))


def test_a_marker_covering_fewer_events_keeps_the_older_ones() -> None:
    log: list[SessionEvent] = [user("a"), said("b"), user("c"), Compacted("b and c", 2, at=1), user("d")]
    assert project(log) == (user_text("a"), system_text("b and c"), user_text("d"))


def test_handoffs_count_as_covered_events_but_yield_nothing() -> None:
    log: list[SessionEvent] = [user("a"), HandoffOccurred("x", "y", at=0), user("c"), Compacted("s", 2, at=1)]
    assert project(log) == (user_text("a"), system_text("s"))


def test_a_later_marker_replaces_the_running_summary() -> None:
    log: list[SessionEvent] = [
        user("a"),
        said("b"),
        Compacted("summary 1", 2, at=1),
        user("c"),
        said("d"),
        Compacted("summary 2", 5, at=2),
        user("e"),
    ]
    assert project(log) == (system_text("summary 2"), user_text("e"))


def test_a_marker_counting_past_the_start_of_the_log_covers_it_all() -> None:
    assert project([user("a"), Compacted("s", 99, at=0)]) == (system_text("s"),)


def test_a_marker_covering_nothing_just_adds_the_summary() -> None:
    assert project([user("a"), Compacted("s", 0, at=0)]) == (user_text("a"), system_text("s"))


def test_a_call_left_open_at_the_end_is_answered_with_an_interruption() -> None:
    log: list[SessionEvent] = [user("go"), called("c1", "slow")]
    assert project(log) == (user_text("go"), ToolCall(CallId("c1"), "slow", "{}"), interrupted("c1", "slow"))


def test_open_calls_are_closed_before_the_next_message_in_call_order() -> None:
    log: list[SessionEvent] = [user("go"), called("a"), called("b"), returned("b"), user("again")]
    assert project(log) == (
        user_text("go"),
        ToolCall(CallId("a"), "f", "{}"),
        ToolCall(CallId("b"), "f", "{}"),
        ToolResult(CallId("b"), "f", "ok"),
        interrupted("a"),
        user_text("again"),
    )


def test_a_result_answering_no_open_call_is_dropped() -> None:
    log: list[SessionEvent] = [
        user("a"),
        returned("ghost"),
        called("c"),
        returned("c"),
        returned("c", "twice"),
    ]
    assert project(log) == (
        user_text("a"),
        ToolCall(CallId("c"), "f", "{}"),
        ToolResult(CallId("c"), "f", "ok"),
    )


def test_a_result_whose_call_was_compacted_away_is_dropped() -> None:
    log: list[SessionEvent] = [user("a"), called("c"), Compacted("s", 2, at=0), returned("c"), user("b")]
    assert project(log) == (system_text("s"), user_text("b"))


def test_a_result_with_no_name_takes_its_calls() -> None:
    log: list[SessionEvent] = [called("c", "lookup"), returned("c", "found", name="")]
    assert project(log)[-1] == ToolResult(CallId("c"), "lookup", "found")


def test_a_repeated_open_call_is_kept_once() -> None:
    log: list[SessionEvent] = [called("c"), called("c"), returned("c")]
    assert project(log) == (ToolCall(CallId("c"), "f", "{}"), ToolResult(CallId("c"), "f", "ok"))


def test_a_new_call_after_a_result_starts_a_new_group() -> None:
    log: list[SessionEvent] = [
        called("a"),
        called("b"),
        returned("a"),
        called("c"),
        returned("b"),
        returned("c"),
    ]
    assert project(log) == (
        ToolCall(CallId("a"), "f", "{}"),
        ToolCall(CallId("b"), "f", "{}"),
        ToolResult(CallId("a"), "f", "ok"),
        interrupted("b"),
        ToolCall(CallId("c"), "f", "{}"),
        ToolResult(CallId("c"), "f", "ok"),
    )


def test_sequential_tool_turns_stay_as_they_are() -> None:
    log: list[SessionEvent] = [
        user("go"),
        called("a"),
        returned("a"),
        called("b"),
        returned("b"),
        said("done"),
    ]
    projected = project(log)
    assert len(projected) == len(log)
    assert conversation_problems(projected) == ()


def test_an_error_result_is_kept_as_an_error() -> None:
    last = project([called("c"), returned("c", "boom", is_error=True)])[-1]
    assert type(last) is ToolResult and last.is_error


def test_make_valid_leaves_a_valid_conversation_alone() -> None:
    items = (
        user_text("hi"),
        ToolCall(CallId("a"), "f", "{}"),
        ToolCall(CallId("b"), "g", "{}"),
        ToolResult(CallId("a"), "f", "1"),
        ToolResult(CallId("b"), "g", "2"),
        SystemMessage((TextPart("note"),)),
    )
    assert make_valid(items) == items
    assert conversation_problems(items) == ()


def test_conversation_problems_names_each_problem() -> None:
    items = (
        ToolResult(CallId("ghost"), "f", "x"),
        ToolCall(CallId("a"), "f", "{}"),
        ToolCall(CallId("a"), "f", "{}"),
        user_text("next"),
    )
    problems = conversation_problems(items)
    assert any("'ghost'" in p and "answers no open call" in p for p in problems)
    assert any("repeated" in p for p in problems)
    assert any("never answered before the message at item 3" in p for p in problems)
