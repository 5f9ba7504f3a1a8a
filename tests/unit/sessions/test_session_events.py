"""Session events: the carriers and their on-disk JSON (tags pinned byte for byte)."""

from __future__ import annotations

import attrs
import pytest

from helikon.ids import CallId
from helikon.items import ImagePart, ReasoningPart, TextPart
from helikon.sessions import (
    AssistantMessageEvent,
    Compacted,
    EventDecodeError,
    HandoffOccurred,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
    decode_event,
    encode_event,
    event_from_json,
    event_to_json,
)
from helikon.sessions._events import EVENT_TAGS, event_tag
from helikon.sessions.testkit import sample_events

#: The on-disk form of one event of each variant. Changing any line breaks
#: every stored session: do not, without a migration.
GOLDEN: list[tuple[SessionEvent, bytes]] = [
    (
        UserMessageEvent((TextPart("hi"), ImagePart(url="u")), at=1),
        b'{"at":1,"content":[{"text":"hi","type":"text"},'
        b'{"data":null,"media_type":null,"type":"image","url":"u"}],"type":"user_message"}',
    ),
    (
        AssistantMessageEvent((ReasoningPart("r", "s"), TextPart("ok")), "bot", at=2),
        b'{"agent":"bot","at":2,"content":[{"signature":"s","text":"r","type":"reasoning"},'
        b'{"text":"ok","type":"text"}],"type":"assistant_message"}',
    ),
    (
        ToolCallRecorded(CallId("c1"), "add", '{"a":1}', at=3),
        b'{"arguments":"{\\"a\\":1}","at":3,"call_id":"c1","name":"add","type":"tool_called"}',
    ),
    (
        ToolResultRecorded(CallId("c1"), "2", "add", True, at=4),
        b'{"at":4,"call_id":"c1","content":"2","is_error":true,"name":"add","type":"tool_returned"}',
    ),
    (
        HandoffOccurred("triage", "billing", at=5),
        b'{"at":5,"from_agent":"triage","to_agent":"billing","type":"handoff_occurred"}',
    ),
    (
        Compacted("so far", 7, at=6),
        b'{"at":6,"original_count":7,"summary":"so far","type":"compacted"}',
    ),
]


@pytest.mark.parametrize(("event", "stored"), GOLDEN, ids=lambda v: type(v).__name__)
def test_the_on_disk_form_is_stable(event: SessionEvent, stored: bytes) -> None:
    assert encode_event(event) == stored
    assert decode_event(stored) == event


def test_the_golden_list_covers_every_variant() -> None:
    assert {type(e) for e, _ in GOLDEN} == set(EVENT_TAGS)


def test_tags_are_the_books_snake_case_names() -> None:
    assert sorted(EVENT_TAGS.values()) == [
        "assistant_message",
        "compacted",
        "handoff_occurred",
        "tool_called",
        "tool_returned",
        "user_message",
    ]
    assert event_tag(Compacted("s", 0, at=0)) == "compacted"


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_every_sample_round_trips_through_json_and_data(event: SessionEvent) -> None:
    assert decode_event(encode_event(event)) == event
    assert event_from_json(event_to_json(event)) == event
    assert decode_event(encode_event(event).decode()) == event


def test_unicode_is_stored_as_utf8_not_escaped() -> None:
    stored = encode_event(UserMessageEvent.from_text("日本 😀", at=0))
    assert "日本 😀".encode() in stored


def test_unknown_keys_are_ignored_for_forward_compatibility() -> None:
    stored = b'{"type":"handoff_occurred","from_agent":"a","to_agent":"b","at":1,"reason":"new field"}'
    assert decode_event(stored) == HandoffOccurred("a", "b", at=1)


@pytest.mark.parametrize(
    "stored",
    [
        b"not json",
        b"[]",
        b'{"from_agent":"a","to_agent":"b","at":1}',
        b'{"type":"nope","at":1}',
        b'{"type":"handoff_occurred","from_agent":"a","at":1}',
        b'{"type":"handoff_occurred","from_agent":"a","to_agent":"b","at":"1"}',
        b'{"type":"handoff_occurred","from_agent":"a","to_agent":"b","at":true}',
        b'{"type":"handoff_occurred","from_agent":"a","to_agent":"b","at":1.5}',
        b'{"type":"handoff_occurred","from_agent":1,"to_agent":"b","at":1}',
        b'{"type":"tool_returned","call_id":"c","content":"x","is_error":1,"at":1}',
        b'{"type":"compacted","summary":"s","original_count":-1,"at":1}',
        b'{"type":"user_message","content":[{"type":"audio","data":"x"}],"at":1}',
        b'{"type":"user_message","content":"hi","at":1}',
    ],
)
def test_decoding_is_strict(stored: bytes) -> None:
    with pytest.raises(EventDecodeError):
        decode_event(stored)


def test_the_timestamp_is_a_required_keyword() -> None:
    with pytest.raises(TypeError):
        UserMessageEvent((TextPart("hi"),))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        HandoffOccurred("a", "b", 3)  # type: ignore[call-arg]
    assert HandoffOccurred("a", "b", at=3).at == 3


def test_events_are_frozen_values() -> None:
    event = UserMessageEvent.from_text("hi", at=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.at = 2  # type: ignore[misc]
    assert event == UserMessageEvent.from_text("hi", at=1)
    assert hash(event) == hash(UserMessageEvent.from_text("hi", at=1))


def test_a_compacted_marker_cannot_cover_a_negative_count() -> None:
    with pytest.raises(ValueError, match="original_count"):
        Compacted("s", -1, at=0)
