"""Folding a model's event stream into one response (``helikon.loop.aggregate``)."""

from __future__ import annotations

from helikon.ids import CallId, RunId
from helikon.items import ReasoningPart, ToolCall
from helikon.loop import Response, aggregate
from helikon.model import Finish, FinishReason, ReasoningChunk, TextBreak, TextChunk, ToolCallChunk, Usage

RUN = RunId("r")


def test_an_empty_stream_is_an_empty_response() -> None:
    assert aggregate((), RUN, 1) == Response()


def test_text_chunks_concatenate() -> None:
    response = aggregate((TextChunk("Hel"), TextChunk("lo"), TextChunk(" there")), RUN, 1)
    assert response.text == "Hello there"
    assert response.text_parts == ("Hello there",)


def test_a_text_break_starts_a_new_part_and_adds_no_text() -> None:
    events = (TextBreak(), TextChunk("Let me run "), TextChunk("that."), TextBreak(), TextChunk("It is 42."))
    response = aggregate((*events, TextBreak(), TextBreak()), RUN, 1)

    assert response.text_parts == ("Let me run that.", "It is 42.")  # no empty parts
    assert response.text == "Let me run that.It is 42."


def test_a_signature_closes_a_reasoning_part() -> None:
    events = (
        ReasoningChunk("First "),
        ReasoningChunk("thought.", signature="sig-a"),
        ReasoningChunk("Second thought.", signature="sig-b"),
    )
    assert aggregate(events, RUN, 1).reasoning == (
        ReasoningPart("First thought.", "sig-a"),
        ReasoningPart("Second thought.", "sig-b"),
    )


def test_trailing_reasoning_without_a_signature_is_one_unsigned_part() -> None:
    events = (ReasoningChunk("Done.", signature="s"), ReasoningChunk("Still "), ReasoningChunk("thinking"))
    assert aggregate(events, RUN, 1).reasoning == (
        ReasoningPart("Done.", "s"),
        ReasoningPart("Still thinking"),
    )


def test_reasoning_and_text_are_kept_apart() -> None:
    events = (ReasoningChunk("Hmm. "), TextChunk("Yes."), ReasoningChunk("Sure.", signature="s"))
    response = aggregate(events, RUN, 1)
    assert response.text == "Yes."
    assert response.reasoning == (ReasoningPart("Hmm. Sure.", "s"),)


def test_fragments_sharing_an_index_make_one_call() -> None:
    events = (
        ToolCallChunk(index=0, call_id="c1", name="add", arguments=""),
        ToolCallChunk(index=0, arguments='{"a": '),
        ToolCallChunk(index=0, arguments="1}"),
    )
    assert aggregate(events, RUN, 1).calls == (ToolCall(CallId("c1"), "add", '{"a": 1}'),)


def test_interleaved_fragments_of_parallel_calls_reassemble_by_index() -> None:
    events = (
        ToolCallChunk(index=0, call_id="c1", name="add", arguments='{"a":'),
        ToolCallChunk(index=1, call_id="c2", name="clock", arguments="{"),
        ToolCallChunk(index=0, arguments="1}"),
        ToolCallChunk(index=1, arguments="}"),
    )
    assert aggregate(events, RUN, 1).calls == (
        ToolCall(CallId("c1"), "add", '{"a":1}'),
        ToolCall(CallId("c2"), "clock", "{}"),
    )


def test_calls_keep_the_order_they_first_appear_in_not_their_index() -> None:
    events = (
        ToolCallChunk(index=5, call_id="late-index", name="a"),
        ToolCallChunk(index=2, call_id="early-index", name="b"),
    )
    assert [c.call_id for c in aggregate(events, RUN, 1).calls] == ["late-index", "early-index"]


def test_without_an_index_fragments_group_by_call_id() -> None:
    events = (
        ToolCallChunk(call_id="x", name="add", arguments='{"a":'),
        ToolCallChunk(call_id="y", name="clock", arguments="{}"),
        ToolCallChunk(call_id="x", arguments="2}"),
    )
    assert aggregate(events, RUN, 1).calls == (
        ToolCall(CallId("x"), "add", '{"a":2}'),
        ToolCall(CallId("y"), "clock", "{}"),
    )


def test_a_fragment_with_neither_index_nor_id_extends_the_latest_call() -> None:
    events = (
        ToolCallChunk(call_id="x", name="add", arguments='{"a":'),
        ToolCallChunk(arguments="3"),
        ToolCallChunk(arguments="}"),
    )
    assert aggregate(events, RUN, 1).calls == (ToolCall(CallId("x"), "add", '{"a":3}'),)


def test_a_call_id_or_name_arriving_late_fills_in_the_call() -> None:
    events = (
        ToolCallChunk(index=0, arguments="{"),
        ToolCallChunk(index=0, call_id="c7", name="clock", arguments="}"),
    )
    assert aggregate(events, RUN, 1).calls == (ToolCall(CallId("c7"), "clock", "{}"),)


def test_the_first_name_of_a_call_wins() -> None:
    events = (ToolCallChunk(index=0, name="add"), ToolCallChunk(index=0, name="clock"))
    assert aggregate(events, RUN, 1).calls[0].name == "add"


def test_calls_without_ids_get_ids_from_run_turn_and_position() -> None:
    events = (
        ToolCallChunk(index=0, name="a"),
        ToolCallChunk(index=1, call_id="kept", name="b"),
        ToolCallChunk(index=2, name="c"),
    )
    ids = [c.call_id for c in aggregate(events, RunId("run9"), 4).calls]
    assert ids == ["call_run9_4_0", "kept", "call_run9_4_2"]


def test_usage_events_add_up() -> None:
    events = (Usage(10, 0), TextChunk("x"), Usage(0, 5, reasoning_tokens=2), Usage(cached_input_tokens=4))
    assert aggregate(events, RUN, 1).usage == Usage(10, 5, cached_input_tokens=4, reasoning_tokens=2)


def test_the_last_finish_wins_and_keeps_the_last_response_id() -> None:
    events = (
        Finish(FinishReason.TOOL_CALLS, response_id="resp-1"),
        Finish(FinishReason.STOP),
    )
    response = aggregate(events, RUN, 1)
    assert response.finish is FinishReason.STOP
    assert response.response_id == "resp-1"


def test_empty_argument_fragments_are_dropped() -> None:
    events = (
        ToolCallChunk(index=0, call_id="c", name="clock", arguments=""),
        ToolCallChunk(index=0, arguments=""),
    )
    assert aggregate(events, RUN, 1).calls == (ToolCall(CallId("c"), "clock", ""),)
