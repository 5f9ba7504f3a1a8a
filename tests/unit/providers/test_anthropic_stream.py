"""AnthropicModel reading responses: the real recorded bodies, payloads
written from the API reference, errors and malformed streams. Every body goes
through ``invoke`` over an ``httpx.MockTransport`` in 7-byte pieces."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from test_anthropic_support import OWN, REAL, REAL_MISSING, Wire, drain, fold, model_on, wire_for

from helikon.cancel import CancellationToken
from helikon.errors import (
    ContextLengthExceeded,
    ModelError,
    OtherModelFailure,
    RateLimited,
    TransportFailure,
    Unavailable,
)
from helikon.ids import CallId
from helikon.items import ReasoningPart, ToolCall, user_text
from helikon.model import (
    Finish,
    FinishReason,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers.anthropic import AnthropicModel, StructuredOutputMode

HELLO = ModelRequest((user_text("hi"),))
real = pytest.mark.skipif(not REAL.is_dir(), reason=REAL_MISSING)


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(CallId(call_id), name, arguments)


def read(name: str) -> Wire:
    return wire_for(REAL / name)


# -- real recorded responses -----------------------------------------------------


@real
def test_real_stream_text_then_tool_use_claude_3_5() -> None:
    events = drain(model_on(read("stream_text_tool_use_claude-3-5-sonnet.sse")), HELLO)
    r = fold(events)

    assert r.text == "I'll help you check the weather in San Francisco. Let me look that up for you."
    assert r.calls == (
        call(
            "toolu_01Lyjynae6j6wHfNVRKaMRK5", "get_weather", '{"location": "San Francisco, CA", "units": "f"}'
        ),
    )
    # message_delta repeats input_tokens=473: the usage is counted once.
    assert r.usage == Usage(473, 93, 0, 0)
    assert r.finish is FinishReason.TOOL_CALLS and r.response_id == "msg_013ABQ6nbL2CSWP8qCEzyrzd"
    # The call's first chunk carries id and name; the empty first fragment is not sent.
    calls = [e for e in events if isinstance(e, ToolCallChunk)]
    assert calls[0] == ToolCallChunk(0, "toolu_01Lyjynae6j6wHfNVRKaMRK5", "get_weather", "")
    assert all(c.index == 0 and c.arguments for c in calls[1:]) and len(calls) == 7
    assert [type(e) for e in events[-2:]] == [Usage, Finish]


@real
def test_real_stream_without_final_newline_claude_sonnet_4() -> None:
    # The body ends right after `data: {"type":"message_stop"}`, no newline.
    r = fold(drain(model_on(read("stream_text_tool_use_claude-sonnet-4.sse")), HELLO))

    assert r.text == "I'll check the current weather in Paris for you."
    assert r.calls == (call("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", '{"location": "Paris"}'),)
    assert r.usage == Usage(377, 65, 0, 0)
    assert r.finish is FinishReason.TOOL_CALLS and r.response_id == "msg_019Q1hrJbZG26Fb9BQhrkHEr"


@real
def test_real_stream_thinking_then_text() -> None:
    events = drain(model_on(read("stream_thinking_text_claude-sonnet-4.sse")), HELLO)
    r = fold(events)

    (part,) = r.reasoning
    assert part.text == (
        "This is a straightforward question about pedestrian safety. I should provide clear, helpful "
        "advice about how to safely cross a street. This is basic safety information that could help "
        "prevent accidents."
    )
    assert part.signature is not None and len(part.signature) == 504
    assert part.signature.startswith("EvMCCkYICxgC") and part.signature.endswith("jfQYAQ==")
    assert len(r.text) == 1021
    assert r.text.startswith("Here are the basic steps for safely crossing the street:\n\n**At inters")
    assert r.text.endswith("Always prioritize safety over speed when crossing streets.")
    assert r.calls == () and r.usage == Usage(43, 282, 0, 0)
    assert r.finish is FinishReason.STOP and r.response_id == "msg_01ALwQ87pTS7hH1PjSdC9wJD"
    # The empty thinking_delta is not passed on; the signature closes the block before any text.
    reasoning = [e for e in events if isinstance(e, ReasoningChunk)]
    assert all(e.text for e in reasoning[:-1]) and reasoning[-1] == ReasoningChunk("", part.signature)
    assert events.index(reasoning[-1]) < next(i for i, e in enumerate(events) if isinstance(e, TextChunk))


@real
def test_real_stream_redacted_thinking_keeps_the_opaque_data() -> None:
    r = fold(drain(model_on(read("stream_redacted_thinking_claude-sonnet-4-5.sse")), HELLO))

    assert [p.text for p in r.reasoning] == ["", ""]
    signatures = [p.signature or "" for p in r.reasoning]
    assert all(s.startswith("redacted:") for s in signatures)
    assert [len(s.removeprefix("redacted:")) for s in signatures] == [744, 296]
    assert signatures[0].startswith("redacted:EqkECkYIBx") and signatures[1].endswith("J0GAE=")
    assert r.text.startswith("I notice that you've sent what appears to be some kind of test string")
    assert r.text.endswith("How can I assist you today with a legitimate task or question?")
    assert len(r.text) == 359
    assert r.usage == Usage(92, 189, 0, 0) and r.finish is FinishReason.STOP


@real
def test_real_stream_server_tools_are_not_client_calls() -> None:
    events = drain(model_on(read("stream_thinking_server_tool_code_exec_claude-sonnet-4-6.sse")), HELLO)
    r = fold(events)

    assert r.calls == () and not any(isinstance(e, ToolCallChunk) for e in events)
    assert r.reasoning == (
        ReasoningPart("Let me calculate this mathematical expression.", r.reasoning[0].signature),
    )
    assert len(r.reasoning[0].signature or "") == 320
    # Two text blocks with server tool blocks between them: two text parts, no text added
    # (test_anthropic_text_blocks.py checks the deltas against the wire).
    assert r.text_parts[0] == "I'll calculate that expression for you right away!"
    assert r.text_parts[1].startswith("Following the standard")
    assert r.text.endswith("Final Answer: **-428,330,955.97745**")
    assert len(r.text) == 501
    # message_delta's input_tokens (4714) wins over message_start's (2293).
    assert r.usage == Usage(4714, 304, 0, 0)
    assert r.finish is FinishReason.STOP and r.response_id == "msg_01Js8aWE7YbmiaUPneGiCskE"


@real
def test_real_nonstream_parallel_tool_use_haiku() -> None:
    r = fold(drain(model_on(read("nonstream_parallel_tool_use_claude-haiku-4-5.json")), HELLO))

    assert r.text == (
        "I'll help you find out who is the youngest by retrieving information about each family member. "
        "I'll retrieve their entity information to compare their ages."
    )
    assert r.calls == (
        call("toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", '{"name":"Alice"}'),
        call("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", '{"name":"Bob"}'),
        call("toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", '{"name":"Charlie"}'),
        call("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", '{"name":"Daisy"}'),
    )
    assert r.usage == Usage(423, 202, 0, 0)
    assert r.finish is FinishReason.TOOL_CALLS and r.response_id == "msg_011S3wxtqL5CVescWqS3zeg2"


@real
def test_real_nonstream_parallel_tool_use_claude_3_5() -> None:
    r = fold(drain(model_on(read("nonstream_parallel_tool_use_claude-3-5-sonnet.json")), HELLO))

    assert r.text.startswith("I'll help you check the weather in San Francisco.")
    assert r.text.endswith("in both Celsius and Fahrenheit for completeness.")
    assert r.calls == (
        call("toolu_013nheddwxiFJt4C4Q8eGUXJ", "get_weather", '{"location":"San Francisco, CA","units":"c"}'),
        call("toolu_01Vg4JstpLEp3JiQadw9aTU1", "get_weather", '{"location":"San Francisco, CA","units":"f"}'),
    )
    assert r.usage == Usage(473, 169, 0, 0)
    assert r.finish is FinishReason.TOOL_CALLS and r.response_id == "msg_011VcyTSZL4mKtyjRLHBuqA5"


@real
def test_real_nonstream_thinking_text_and_tool_with_empty_input() -> None:
    events = drain(model_on(read("nonstream_thinking_tool_use_claude-sonnet-4.json")), HELLO)
    r = fold(events)

    (part,) = r.reasoning
    assert part.text.startswith('The user is asking about the largest city in "the user country".')
    assert part.text.endswith("Let me call the get_user_country function first.")
    assert part.signature is not None and part.signature.startswith("EqEECkYICxgCKkAo3UA4")
    assert part.signature.endswith("cXhw9EK5/JwYAQ==")
    assert r.text == (
        "I'll help you find the largest city in your country. "
        "First, let me determine which country you're from."
    )
    assert r.calls == (call("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", "{}"),)
    assert r.usage == Usage(398, 155, 0, 0) and r.finish is FinishReason.TOOL_CALLS
    # Same order as the stream: reasoning, its closing signature, text, the call.
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        *("ReasoningChunk", "ReasoningChunk", "TextChunk", "ToolCallChunk", "ToolCallChunk"),
        *("Usage", "Finish"),
    ]


@real
def test_real_nonstream_structured_output_text() -> None:
    r = fold(drain(model_on(read("nonstream_json_schema_output_claude-sonnet-4-5.json")), HELLO))

    assert r.text == '{"amount":12.34}' and json.loads(r.text) == {"amount": 12.34}
    assert r.usage == Usage(222, 10, 0, 0) and r.finish is FinishReason.STOP
    assert r.response_id == "msg_01GehnYTFBiQDSeSpRvDa1Mp"


@real
def test_real_nonstream_cache_read_and_write_usage() -> None:
    r = fold(drain(model_on(read("nonstream_cache_read_write_usage_claude-sonnet-4-5.json")), HELLO))

    assert r.text.startswith("Python is a beginner-friendly, versatile programming language")
    # input_tokens 3 + cache write 418 + cache read 1111; the read part is the cached part.
    assert r.usage == Usage(1532, 33, 1111, 0, cache_creation_input_tokens=418)
    assert r.finish is FinishReason.STOP


@real
@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        ("error_400_invalid_request.json", 400, "does not support effort level 'xhigh'"),
        ("error_404_model_not_found.json", 404, "model: claude-sonet-4-5 (not_found_error)"),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_real_error_bodies(name: str, status: int, words: str, stream: bool) -> None:
    wire = read(name)
    with pytest.raises(ModelError) as info:
        drain(model_on(wire, "claude-sonet-4-5", stream=stream), HELLO)

    failure = info.value.failure
    assert isinstance(failure, OtherModelFailure) and failure.status == status
    assert words in failure.message and failure.message.startswith("anthropic claude-sonet-4-5: HTTP")


@real
def test_every_real_fixture_is_covered() -> None:
    covered = {
        "stream_text_tool_use_claude-3-5-sonnet.sse",
        "stream_text_tool_use_claude-sonnet-4.sse",
        "stream_thinking_text_claude-sonnet-4.sse",
        "stream_redacted_thinking_claude-sonnet-4-5.sse",
        "stream_thinking_server_tool_code_exec_claude-sonnet-4-6.sse",
        "nonstream_parallel_tool_use_claude-haiku-4-5.json",
        "nonstream_parallel_tool_use_claude-3-5-sonnet.json",
        "nonstream_thinking_tool_use_claude-sonnet-4.json",
        "nonstream_json_schema_output_claude-sonnet-4-5.json",
        "nonstream_cache_read_write_usage_claude-sonnet-4-5.json",
        "error_400_invalid_request.json",
        "error_404_model_not_found.json",
    }
    assert {p.name for p in REAL.iterdir()} == covered


@real
@pytest.mark.parametrize("size", [1, 3, 64, 100_000])
def test_real_stream_parses_the_same_at_any_chunk_size(size: int) -> None:
    name = "stream_thinking_server_tool_code_exec_claude-sonnet-4-6.sse"
    reference = drain(model_on(read(name)), HELLO)

    assert drain(model_on(wire_for(REAL / name, size=size)), HELLO, backend="asyncio") == reference


# -- payloads written from the API reference -----------------------------------


def test_interleaved_parallel_tool_calls_reassemble_by_block() -> None:
    events = drain(model_on(wire_for(OWN / "stream_parallel_tool_use_interleaved.sse")), HELLO)
    r = fold(events)

    assert r.text == "Checking both cities."
    assert r.calls == (
        call("toolu_01Oslo", "get_weather", '{"city": "Oslo"}'),
        call("toolu_02Lima", "get_weather", '{"city": "Lima"}'),
    )
    assert [e.index for e in events if isinstance(e, ToolCallChunk)] == [0, 1, 0, 1, 0, 1]
    assert r.usage == Usage(512, 71, 0, 0) and r.finish is FinishReason.TOOL_CALLS


def test_streamed_cache_usage_counts_reads_and_writes_as_input() -> None:
    r = fold(drain(model_on(wire_for(OWN / "stream_cache_usage.sse")), HELLO))

    assert r.text == "Cached answer."
    assert r.usage == Usage(12 + 250 + 2048, 9, 2048, 0, cache_creation_input_tokens=250)
    assert r.finish is FinishReason.STOP and r.response_id == "msg_01HelikonCache"


def test_usage_is_reported_once_so_the_events_sum_to_the_total() -> None:
    events = drain(model_on(wire_for(OWN / "stream_cache_usage.sse")), HELLO)

    assert [e for e in events if isinstance(e, Usage)] == [Usage(2310, 9, 2048, 0, 250)]
    assert sum(isinstance(e, Finish) for e in events) == 1 and isinstance(events[-1], Finish)


def test_refusal_is_a_content_filter_finish() -> None:
    r = fold(drain(model_on(wire_for(OWN / "nonstream_refusal.json")), HELLO))

    assert r.text == "I can't help with that." and r.finish is FinishReason.CONTENT_FILTER
    assert r.usage == Usage(31, 8, 0, 0)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("model_context_window_exceeded", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL_CALLS),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
        ("something_new", FinishReason.OTHER),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_stop_reasons(stop_reason: str, finish: FinishReason, stream: bool) -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    if stream:
        start = {**message, "content": [], "stop_reason": None}
        body = "".join(
            f"event: {kind}\ndata: {json.dumps(data)}\n\n"
            for kind, data in [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop_reason},
                        "usage": {"output_tokens": 1},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        ).encode()
        wire = Wire(body)
    else:
        wire = Wire(json.dumps(message).encode(), content_type="application/json")

    assert fold(drain(model_on(wire), HELLO)).finish is finish


def test_structured_output_by_forced_tool_streams_the_input_as_text() -> None:
    wire = wire_for(OWN / "stream_structured_output_tool.sse")
    model = model_on(wire, "claude-3-5-haiku-latest", structured_output=StructuredOutputMode.TOOL)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"category": {"type": "string"}, "recurring": {"type": "boolean"}},
    }
    request = ModelRequest(
        (user_text("NETFLIX.COM $15.49"),), settings=ModelSettings(response_format=JsonSchema("T", schema))
    )

    events = drain(model, request)
    r = fold(events)

    assert r.text == '{"category": "Subscriptions", "recurring": true}' and r.calls == ()
    assert r.finish is FinishReason.STOP and r.usage == Usage(380, 41, 0, 0)
    assert wire.sent["tool_choice"] == {"type": "tool", "name": "helikon_structured_output"}
    assert wire.sent["tools"][-1]["input_schema"] == schema and "output_config" not in wire.sent


def test_structured_output_by_forced_tool_without_streaming_and_redacted_thinking() -> None:
    wire = wire_for(OWN / "nonstream_redacted_thinking_output_tool.json")
    model = model_on(wire, "claude-3-7-sonnet-latest", structured_output=StructuredOutputMode.TOOL)
    request = ModelRequest(
        (user_text("x"),), settings=ModelSettings(response_format=JsonSchema("T", {"type": "object"}))
    )

    r = fold(drain(model, request))

    assert json.loads(r.text) == {"category": "Groceries", "recurring": False} and r.calls == ()
    assert r.reasoning == (
        ReasoningPart("", "redacted:EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"),
    )
    assert r.finish is FinishReason.STOP and r.usage == Usage(466, 57, 64, 0)


def test_the_output_tool_is_an_ordinary_call_when_no_schema_was_asked_for() -> None:
    wire = wire_for(OWN / "stream_structured_output_tool.sse")

    r = fold(drain(model_on(wire, structured_output=StructuredOutputMode.TOOL), HELLO))

    assert r.text == "" and [c.name for c in r.calls] == ["helikon_structured_output"]
    assert r.finish is FinishReason.TOOL_CALLS


# -- errors ------------------------------------------------------------------------


def test_midstream_overloaded_error_event_is_unavailable_after_the_partial_text() -> None:
    seen: list[ModelEvent] = []
    wire = wire_for(OWN / "stream_overloaded_error_event.sse")

    def keep(events: list[ModelEvent]) -> bool:
        seen[:] = events
        return False

    with pytest.raises(ModelError) as info:
        drain(model_on(wire), HELLO, stop_after=keep)

    assert seen == [TextChunk("Partial")]
    assert info.value.failure == Unavailable("anthropic claude-sonnet-4-5: Overloaded (overloaded_error)")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, Unavailable),
        ({"type": "api_error", "message": "Internal server error"}, Unavailable),
        ({"type": "rate_limit_error", "message": "slow down"}, RateLimited),
        (
            {"type": "invalid_request_error", "message": "prompt is too long: 201000 tokens"},
            ContextLengthExceeded,
        ),
        ({"type": "invalid_request_error", "message": "bad"}, OtherModelFailure),
    ],
)
def test_error_events_by_type(error: dict[str, str], kind: type) -> None:
    body = f"event: error\ndata: {json.dumps({'type': 'error', 'error': error})}\n\n".encode()

    with pytest.raises(ModelError) as info:
        drain(model_on(Wire(body)), HELLO)

    assert type(info.value.failure) is kind
    assert error["message"] in str(info.value) and "anthropic claude-sonnet-4-5" in str(info.value)


@pytest.mark.parametrize(
    ("name", "headers", "expected"),
    [
        ("error_429_rate_limit.json", {"retry-after": "7"}, RateLimited),
        ("error_529_overloaded.json", {}, Unavailable),
        ("error_400_prompt_too_long.json", {}, ContextLengthExceeded),
    ],
)
def test_http_errors_by_status_and_message(name: str, headers: dict[str, str], expected: type) -> None:
    wire = wire_for(OWN / name, headers=headers)

    with pytest.raises(ModelError) as info:
        drain(model_on(wire, stream=True), HELLO)

    failure = info.value.failure
    assert type(failure) is expected and failure.message.startswith("anthropic claude-sonnet-4-5: HTTP ")
    if isinstance(failure, RateLimited):
        assert failure.retry_after_ms == 7000 and "per-minute rate limit" in failure.message


def test_truncated_stream_is_a_transport_failure() -> None:
    with pytest.raises(ModelError) as info:
        drain(model_on(wire_for(OWN / "stream_truncated.sse")), HELLO)

    assert isinstance(info.value.failure, TransportFailure) and "cut off" in str(info.value)


def test_stream_ending_without_message_stop_is_a_transport_failure() -> None:
    with pytest.raises(ModelError) as info:
        drain(model_on(wire_for(OWN / "stream_without_message_stop.sse")), HELLO)

    assert isinstance(info.value.failure, TransportFailure) and "before message_stop" in str(info.value)


def test_bad_json_in_a_data_line_is_a_clear_error() -> None:
    with pytest.raises(ModelError) as info:
        drain(model_on(wire_for(OWN / "stream_bad_json.sse")), HELLO)

    failure = info.value.failure
    assert isinstance(failure, OtherModelFailure) and "malformed JSON" in failure.message
    assert "anthropic claude-sonnet-4-5" in failure.message


def test_a_non_json_body_without_streaming_is_a_clear_error() -> None:
    wire = Wire(b"<html>gateway</html>", content_type="application/json")

    with pytest.raises(ModelError, match="malformed JSON"):
        drain(model_on(wire), HELLO)


def test_an_error_body_with_status_200_is_still_an_error() -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ).encode()

    with pytest.raises(ModelError) as info:
        drain(model_on(Wire(body, content_type="application/json")), HELLO)

    assert isinstance(info.value.failure, Unavailable)


def test_a_connection_failure_is_a_transport_failure() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    model = AnthropicModel.messages(
        "claude-x", api_key="k", http_client=httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    )
    with pytest.raises(ModelError) as info:
        drain(model, HELLO)

    assert isinstance(info.value.failure, TransportFailure) and "connection refused" in str(info.value)


# -- cancellation and cleanup ----------------------------------------------------------


def test_cancelling_mid_stream_ends_quietly_and_closes_the_response() -> None:
    cancel = CancellationToken()
    wire = read_own_long()

    def stop(events: list[ModelEvent]) -> bool:
        if len(events) == 1:
            cancel.cancel()
        return False

    events = drain(model_on(wire), HELLO, cancel, stop_after=stop)

    assert events == [TextChunk("Checking both cities.")]
    assert not any(isinstance(e, Finish) for e in events)
    assert wire.streams[0].closed


def test_a_cancelled_token_sends_nothing() -> None:
    cancel = CancellationToken()
    cancel.cancel()
    wire = read_own_long()

    assert drain(model_on(wire), HELLO, cancel) == []


def test_stopping_early_closes_the_response() -> None:
    wire = read_own_long()

    drain(model_on(wire), HELLO, stop_after=lambda events: True)

    assert wire.streams[0].closed


def read_own_long() -> Wire:
    return wire_for(OWN / "stream_parallel_tool_use_interleaved.sse")


def test_a_json_answer_to_a_streamed_request_is_read_whole() -> None:
    # Some gateways ignore "stream": true and send one message.
    wire = wire_for(OWN / "nonstream_refusal.json")

    r = fold(drain(model_on(wire, stream=True), HELLO))

    assert wire.sent["stream"] is True
    assert r.text == "I can't help with that." and r.finish is FinishReason.CONTENT_FILTER
