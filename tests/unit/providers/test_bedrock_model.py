"""BedrockModel over ``httpx.MockTransport`` with hand-written payloads: parallel
tool calls, structured output, the request bodies sent, malformed streams,
exception frames, HTTP errors and capabilities."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from test_bedrock_support import (
    HI,
    NOVA_CONVERSE,
    OWN,
    body_of,
    capture,
    collect,
    event_stream,
    failure,
    frames,
    json_answer,
    model,
    own_stream,
    summary,
)

from helikon.errors import (
    ContextLengthExceeded,
    OtherModelFailure,
    RateLimited,
    TransportFailure,
    Unavailable,
)
from helikon.ids import CallId
from helikon.items import ImagePart, TextPart, ToolCall, ToolResult, UserMessage, system_text, user_text
from helikon.model import (
    Finish,
    FinishReason,
    JsonSchema,
    ModelRequest,
    ModelSettings,
    TextChunk,
    ToolCallChunk,
    ToolChoiceRequired,
    ToolDef,
    Usage,
)
from helikon.providers._bedrock_eventstream import encode_message
from helikon.providers.bedrock import OUTPUT_TOOL, AwsCredentials, BedrockModel

# -- hand-written payloads ----------------------------------------------------------------


def test_parallel_tool_calls_with_interleaved_fragments() -> None:
    events = collect(
        model(
            lambda r: event_stream(own_stream("stream_parallel_tool_calls_claude.json")),
            "us.anthropic.claude-x",
        ),
        HI,
    )

    assert summary(events) == {
        "text": "I'll check both cities.",
        "reasoning": [],
        "calls": [
            ("tooluse_paris01", "get_weather", '{"city": "Paris"}'),
            ("tooluse_rome02", "get_weather", '{"city": "Rome"}'),
        ],
        "usage": Usage(420, 88),
        "finish": FinishReason.TOOL_CALLS,
    }
    indices = [e.index for e in events if isinstance(e, ToolCallChunk)]
    assert indices == [0, 1, 0, 1, 0, 1]


SCHEMA: dict[str, Any] = {
    "title": "Verdict",
    "type": "object",
    "properties": {"label": {"type": "string"}, "score": {"type": "number"}},
    "required": ["label", "score"],
}
STRUCTURED = ModelRequest(
    (user_text("Spam?"),), settings=ModelSettings(response_format=JsonSchema("Verdict", SCHEMA))
)


def test_structured_output_streams_the_forced_tool_input_as_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        sent = body_of(request)
        assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": OUTPUT_TOOL}}
        assert sent["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == SCHEMA
        return event_stream(own_stream("stream_structured_output_claude.json"))

    events = collect(model(handler, "us.anthropic.claude-sonnet-4-20250514-v1:0"), STRUCTURED)

    assert not any(isinstance(e, ToolCallChunk) for e in events)
    result = summary(events)
    assert json.loads(result["text"]) == {"label": "spam", "score": 0.97}
    assert result["finish"] is FinishReason.STOP
    assert result["usage"] == Usage(
        input_tokens=1086, output_tokens=30, cached_input_tokens=1024, cache_creation_input_tokens=50
    )


def test_structured_output_without_streaming() -> None:
    handler = json_answer(OWN / "converse_structured_output_nova.json", NOVA_CONVERSE)

    events = collect(model(handler, stream=False), STRUCTURED)

    assert events[:-2] == [TextChunk('{"label":"ham","score":0.12}')]
    assert summary(events)["finish"] is FinishReason.STOP


def test_a_wrapped_output_schema_is_unwrapped() -> None:
    stream = frames(
        [
            [
                "contentBlockStart",
                {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": OUTPUT_TOOL}}},
            ],
            [
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"value": [2, '}}},
            ],
            ["contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "3, 5]}"}}}],
            ["contentBlockStop", {"contentBlockIndex": 0}],
            ["messageStop", {"stopReason": "tool_use"}],
        ]
    )
    request = ModelRequest(
        (user_text("Primes?"),),
        settings=ModelSettings(
            response_format=JsonSchema("P", {"type": "array", "items": {"type": "integer"}})
        ),
    )

    events = collect(model(lambda r: event_stream(stream), "amazon.nova-pro-v1:0"), request)

    assert events == [TextChunk("[2,3,5]"), Finish(FinishReason.STOP)]


def test_preamble_text_is_dropped_when_the_output_tool_answers_and_kept_when_not() -> None:
    text = ["contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Sure, here it is:"}}]
    tool_start = [
        "contentBlockStart",
        {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t", "name": OUTPUT_TOOL}}},
    ]
    tool_input = [
        "contentBlockDelta",
        {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"label":"x","score":1}'}}},
    ]
    with_tool = frames([text, tool_start, tool_input, ["messageStop", {"stopReason": "tool_use"}]])
    without = frames([text, ["messageStop", {"stopReason": "end_turn"}]])
    claude = "anthropic.claude-3-5-sonnet-20241022-v2:0"

    assert collect(model(lambda r: event_stream(with_tool), claude), STRUCTURED) == [
        TextChunk('{"label":"x","score":1}'),
        Finish(FinishReason.STOP),
    ]
    assert collect(model(lambda r: event_stream(without), claude), STRUCTURED) == [
        TextChunk("Sure, here it is:"),
        Finish(FinishReason.STOP),
    ]


def test_structured_output_degrades_to_plain_text_for_llama() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "toolConfig" not in body_of(request)
        return event_stream(
            frames(
                [
                    [
                        "contentBlockDelta",
                        {"contentBlockIndex": 0, "delta": {"text": '{"label": "spam", "score": 1}'}},
                    ],
                    ["messageStop", {"stopReason": "end_turn"}],
                ]
            )
        )

    events = collect(model(handler, "us.meta.llama3-3-70b-instruct-v1:0"), STRUCTURED)

    assert summary(events)["text"] == '{"label": "spam", "score": 1}'


def test_guardrail_intervention_is_a_content_filter_finish() -> None:
    handler = json_answer(OWN / "converse_guardrail_intervened_nova.json", NOVA_CONVERSE)

    events = collect(model(handler, stream=False), HI)

    assert summary(events)["finish"] is FinishReason.CONTENT_FILTER


# -- request bodies sent through the model ----------------------------------------------------


def test_a_request_with_settings_system_tools_results_and_an_image() -> None:
    weather = ToolDef(
        "get_weather",
        "Weather now.",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "format": "city"}},
            "required": ["city"],
        },
    )
    request = ModelRequest(
        (
            system_text("Be brief."),
            UserMessage(
                (
                    TextPart("Weather where this was taken?"),
                    ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
                )
            ),
            ToolCall(CallId("tooluse_1"), "get_weather", '{"city":"Paris"}'),
            ToolResult(CallId("tooluse_1"), "get_weather", "18C, clear"),
        ),
        tools=(weather,),
        settings=ModelSettings(temperature=0.5, max_output_tokens=100, tool_choice=ToolChoiceRequired()),
    )
    seen, handler = capture()

    collect(model(handler, "eu.anthropic.claude-3-7-sonnet-20250219-v1:0", region="us-east-1"), request)

    (sent,) = seen
    assert sent.headers["content-type"] == "application/json"
    assert body_of(sent) == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "Weather where this was taken?"},
                    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}
                ],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18C, clear"}]}}],
            },
        ],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 100, "temperature": 0.5},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "description": "Weather now.",
                        "inputSchema": {
                            "json": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                            }
                        },
                    }
                }
            ],
            "toolChoice": {"any": {}},
        },
    }


def test_adapter_options_reach_the_body() -> None:
    seen, handler = capture()
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}

    collect(
        model(
            handler,
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
            additional_model_request_fields=thinking,
            stop_sequences=["###"],
            extra_body={"performanceConfig": {"latency": "optimized"}},
        ),
        HI,
    )

    sent = body_of(seen[0])
    assert sent["additionalModelRequestFields"] == thinking
    assert sent["inferenceConfig"] == {"stopSequences": ["###"]}
    assert sent["performanceConfig"] == {"latency": "optimized"}


def test_base_url_and_bearer_api_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return event_stream(frames([["messageStop", {"stopReason": "end_turn"}]]))

    m = BedrockModel.converse(
        "amazon.nova-lite-v1:0",
        api_key="bedrock-key",
        base_url="http://localhost:8080/proxy/",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )
    collect(m, HI)

    (sent,) = seen
    assert str(sent.url) == "http://localhost:8080/proxy/model/amazon.nova-lite-v1%3A0/converse-stream"
    assert sent.headers["authorization"] == "Bearer bedrock-key"
    assert "x-amz-date" not in sent.headers


def test_an_image_url_is_refused_before_sending() -> None:
    seen, handler = capture()
    request = ModelRequest((UserMessage((ImagePart(url="https://example.com/cat.png"),)),))

    found, _ = failure(model(handler, "anthropic.claude-3-haiku-20240307-v1:0"), request)

    assert isinstance(found, OtherModelFailure) and "cannot fetch image URLs" in found.message
    assert seen == []


def test_capabilities_follow_the_family() -> None:
    def caps(model_id: str, **kwargs: Any) -> Any:
        return model(lambda r: httpx.Response(500), model_id, **kwargs).capabilities

    assert caps("us.anthropic.claude-sonnet-4-20250514-v1:0").structured_output
    assert caps("us.anthropic.claude-sonnet-4-20250514-v1:0").reasoning
    assert not caps("us.amazon.nova-micro-v1:0").vision and caps("amazon.nova-pro-v1:0").vision
    assert not caps("meta.llama3-70b-instruct-v1:0").structured_output
    assert caps("mistral.mistral-large-2407-v1:0").structured_output
    assert not caps("amazon.nova-pro-v1:0", stream=False).streaming


# -- malformed streams ---------------------------------------------------------------------


def test_a_stream_that_ends_before_message_stop() -> None:
    data = frames(
        [
            ["messageStart", {"role": "assistant"}],
            ["contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}],
        ]
    )

    found, seen = failure(model(lambda r: event_stream(data)), HI)

    assert isinstance(found, TransportFailure) and "ended before messageStop" in found.message
    assert seen == [TextChunk("Hel")]


def test_bad_json_in_a_frame() -> None:
    headers = {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    data = encode_message(headers, b'{"contentBlockIndex": 0, "delta": {"text": "x"')

    found, _ = failure(model(lambda r: event_stream(data)), HI)

    assert isinstance(found, OtherModelFailure) and "malformed JSON" in found.message


def test_a_mid_stream_exception_frame_from_the_fixture() -> None:
    data = own_stream("stream_throttled_midstream_claude.json")

    found, seen = failure(
        model(lambda r: event_stream(data), "us.anthropic.claude-sonnet-4-20250514-v1:0"), HI
    )

    assert found == RateLimited(
        "aws.bedrock us.anthropic.claude-sonnet-4-20250514-v1:0: throttlingException: "
        "Too many tokens, please wait before trying again."
    )
    assert seen == [TextChunk("Let me think")]


@pytest.mark.parametrize(
    ("exception", "message", "kind"),
    [
        ("throttlingException", "Rate exceeded", RateLimited),
        ("serviceUnavailableException", "Service unavailable", Unavailable),
        ("modelNotReadyException", "Model is not ready", Unavailable),
        ("internalServerException", "Internal error", Unavailable),
        ("validationException", "Input is too long for requested model.", ContextLengthExceeded),
        ("validationException", "prompt is too long: 210000 tokens > 200000 maximum", ContextLengthExceeded),
        ("validationException", "Malformed input request", OtherModelFailure),
        ("modelStreamErrorException", "The model stream failed", OtherModelFailure),
    ],
)
def test_exception_frames_map_to_model_errors(exception: str, message: str, kind: type[Any]) -> None:
    data = frames(
        [["messageStart", {"role": "assistant"}], {"exception": exception, "payload": {"message": message}}]
    )

    found, _ = failure(model(lambda r: event_stream(data)), HI)

    assert type(found) is kind
    assert found.message == f"aws.bedrock us.amazon.nova-micro-v1:0: {exception}: {message}"


def test_an_error_frame_maps_by_its_code() -> None:
    data = encode_message(
        {":message-type": "error", ":error-code": "ThrottlingException", ":error-message": "slow down"}, b""
    )

    found, _ = failure(model(lambda r: event_stream(data)), HI)

    assert isinstance(found, RateLimited) and found.message.endswith("ThrottlingException: slow down")


# -- HTTP errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "message", "kind"),
    [
        (
            429,
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "Too many requests",
            RateLimited,
        ),
        (429, "ModelNotReadyException", "Model is not ready for inference", Unavailable),
        (503, "ServiceUnavailableException", "Service unavailable", Unavailable),
        (400, "ValidationException", "Input is too long for requested model.", ContextLengthExceeded),
        (
            403,
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
            OtherModelFailure,
        ),
        (500, "", "oops", Unavailable),
    ],
)
def test_http_errors_map_by_error_type(status: int, error_type: str, message: str, kind: type[Any]) -> None:
    headers = {"content-type": "application/json", "retry-after": "2"}
    if error_type:
        headers["x-amzn-ErrorType"] = error_type

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=json.dumps({"message": message}).encode())

    found, _ = failure(model(handler, stream=False), HI)

    assert type(found) is kind
    assert found.message.startswith(f"aws.bedrock us.amazon.nova-micro-v1:0: HTTP {status}: ")
    assert message in found.message
    if kind is RateLimited:
        assert found.retry_after_ms == 2000
    if kind is OtherModelFailure:
        assert found.status == status


def test_a_connection_failure_is_a_transport_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    found, _ = failure(model(handler), HI)

    assert isinstance(found, TransportFailure) and "connection refused" in found.message


def test_a_non_json_converse_body_is_a_clear_error() -> None:
    found, _ = failure(model(lambda r: httpx.Response(200, content=b"<html>proxy</html>"), stream=False), HI)

    assert isinstance(found, OtherModelFailure) and "malformed JSON" in found.message


def test_unusable_credentials_surface_at_invoke() -> None:
    class Failing:
        description = "a test source"

        async def credentials(self) -> AwsCredentials:
            raise LookupError("the SSO session has expired")

    m = model(lambda r: httpx.Response(200))
    m._source = Failing()

    found, _ = failure(m, HI)

    assert isinstance(found, OtherModelFailure)
    assert "no usable AWS credentials (a test source): the SSO session has expired" in found.message


def test_a_streamed_request_answered_with_one_json_response_is_read_whole() -> None:
    answer = (OWN / "converse_guardrail_intervened_nova.json").read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/converse-stream")
        return httpx.Response(200, headers={"content-type": "application/json"}, content=answer)

    events = collect(model(handler), HI)

    assert events == [
        TextChunk("Sorry, the model cannot answer this question."),
        Usage(25, 0),
        Finish(FinishReason.CONTENT_FILTER),
    ]
