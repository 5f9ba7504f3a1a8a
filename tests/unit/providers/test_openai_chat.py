"""OpenAIModel.chat: Chat Completions over a mocked HTTP transport.

Every test goes through ``OpenAIModel.invoke`` and an ``httpx.MockTransport``
(the code path of live use); streamed bodies arrive in 7-byte pieces so SSE
events and UTF-8 characters straddle chunk boundaries. Real recorded bodies
are read from ``../shared/fixtures/provider-wire/openai_chat/``; payloads
written from the API reference live in ``tests/fixtures/openai/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from openai_support import HELLO, Chunked, Server, failure_of, invoke, json_reply, reply_of

from helikon import LlmAgent, collect, run_sync, tool
from helikon.cancel import CancellationToken
from helikon.errors import (
    ConfigError,
    ContextLengthExceeded,
    OtherModelFailure,
    RateLimited,
    Refused,
    TransportFailure,
    Unavailable,
)
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
    Item,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.model import (
    Finish,
    FinishReason,
    JsonObjectFormat,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ReasoningChunk,
    ResponseFormat,
    TextChunk,
    ToolCallChunk,
    ToolChoice,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
    Usage,
)
from helikon.providers.openai import OpenAIModel
from helikon.schema import strict

ROOT = Path(__file__).resolve().parents[3]
WIRE = ROOT.parent / "shared" / "fixtures" / "provider-wire" / "openai_chat"
OWN = ROOT / "tests" / "fixtures" / "openai"
needs_wire = pytest.mark.skipif(
    not WIRE.is_dir(), reason=f"the recorded provider bodies are not here ({WIRE} is absent)"
)

# -- the mock server -----------------------------------------------------------


def sse_reply(body: bytes | str, status: int = 200, **kw: Any) -> httpx.Response:
    raw = body.encode() if isinstance(body, str) else body
    return httpx.Response(status, headers={"content-type": "text/event-stream"}, stream=Chunked(raw, **kw))


def chat_model(server: Server, model_id: str = "gpt-4o", **options: Any) -> OpenAIModel:
    options.setdefault("api_key", "sk-test")
    return OpenAIModel.chat(model_id, http_client=server.client(), **options)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = (
        []
        if delta is None and finish is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": choices,
        **extra,
    }


def sse(*chunks: dict[str, Any], done: bool = True) -> str:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return body + ("data: [DONE]\n\n" if done else "")


def text_stream(*pieces: str, usage: tuple[int, int] = (5, 2)) -> str:
    return sse(
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": p}) for p in pieces),
        chunk({}, "stop"),
        chunk(usage={"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}),
    )


# -- the recorded bodies -----------------------------------------------------


@needs_wire
def test_streamed_tool_call_is_one_call_with_its_id_name_and_argument_fragments() -> None:
    server = Server([sse_reply((WIRE / "stream_tool_call_gpt-4o-mini.sse").read_bytes())])

    events = invoke(chat_model(server, "gpt-4o-mini"))

    calls = [e for e in events if isinstance(e, ToolCallChunk)]
    assert calls[0] == ToolCallChunk(0, "call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", "")
    assert [c.arguments for c in calls[1:]] == ['{"', "country", '":"', "UK", '"}']
    assert {c.index for c in calls} == {0} and all(c.name is None for c in calls[1:])
    # The reply's id and the model that answered, as the chunks name them.
    assert events[-2:] == [Usage(53, 15, 0, 0), Finish(FinishReason.TOOL_CALLS, events[-1].response_id)]
    assert str(events[-1].response_id).startswith("chatcmpl-")
    assert events[-1].response_model == "gpt-4o-mini-2024-07-18"
    reply = reply_of(events)
    assert reply.text == "" and reply.calls == (
        ToolCall(CallId("call_ZR5UUuTt3pf61kjwAJIYdVMj"), "get_capital", '{"country":"UK"}'),
    )


@needs_wire
def test_streamed_text_after_a_tool_result() -> None:
    server = Server([sse_reply((WIRE / "stream_text_after_tool_gpt-4o-mini.sse").read_bytes())])

    events = invoke(chat_model(server, "gpt-4o-mini"))

    texts = [e.text for e in events if isinstance(e, TextChunk)]
    assert texts == [
        "The",
        " capital",
        " of",
        " the",
        " UK",
        " is",
        " London",
        ".",
    ]  # the empty first one dropped
    assert events[-2:] == [Usage(78, 9, 0, 0), Finish(FinishReason.STOP, events[-1].response_id)]
    assert events[-1].response_model == "gpt-4o-mini-2024-07-18"


@needs_wire
def test_streamed_parallel_calls_are_told_apart_by_index() -> None:
    server = Server([sse_reply((WIRE / "stream_parallel_tool_calls_gpt-4o.sse").read_bytes())])

    reply = reply_of(invoke(chat_model(server)))

    assert reply.calls == (
        ToolCall(CallId("call_q2UyBRP7eXNTzAoR8lEhjc9Z"), "get_country", "{}"),
        ToolCall(CallId("call_b51ijcpFkDiTQG1bQzsrmtW5"), "get_product_name", "{}"),
    )
    assert reply.usage == Usage(364, 40, 0, 0) and reply.finish is FinishReason.TOOL_CALLS


@pytest.mark.parametrize(
    ("name", "text", "calls", "usage", "finish"),
    [
        (
            "nonstream_parallel_tool_calls_gpt-4o.json",
            "",
            (
                ("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", '{"path": ".env"}'),
                ("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", '{"path": "test.txt"}'),
            ),
            Usage(71, 46, 0, 0),
            FinishReason.TOOL_CALLS,
        ),
        (
            "nonstream_json_schema_gpt-4o.json",
            '{"city":"Mexico City","country":"Mexico"}',
            (),
            Usage(92, 15, 0, 0),
            FinishReason.STOP,
        ),
        (
            "nonstream_reasoning_o3-mini.json",
            "Hello there! How can I help you today?",
            (),
            Usage(7, 87, 0, 64),
            FinishReason.STOP,
        ),
        ("nonstream_cached_tokens_gpt-5.6-sol.json", "OK", (), Usage(4020, 4, 4012, 0), FinishReason.STOP),
    ],
)
@needs_wire
def test_non_streamed_bodies(
    name: str, text: str, calls: tuple[tuple[str, str, str], ...], usage: Usage, finish: FinishReason
) -> None:
    server = Server([json_reply((WIRE / name).read_bytes())])

    events = invoke(chat_model(server, stream=False))

    reply = reply_of(events)
    assert reply.text == text
    assert reply.calls == tuple(ToolCall(CallId(i), n, a) for i, n, a in calls)
    assert reply.usage == usage and reply.finish is finish
    assert [e for e in events if isinstance(e, Usage)] == [usage] and events[-1] == Finish(
        finish, reply.response_id
    )
    assert str(reply.response_id).startswith("chatcmpl-") and reply.response_model
    assert "stream" not in server.body()


@needs_wire
def test_groq_mid_stream_error_event_fails_after_the_reasoning_it_streamed() -> None:
    server = Server([sse_reply((WIRE / "stream_midstream_error_event_groq_compat.sse").read_bytes())])
    model = chat_model(server, "openai/gpt-oss-120b", base_url="https://api.groq.com/openai/v1")

    failure, seen = failure_of(model)

    assert isinstance(failure, OtherModelFailure) and failure.status == 400
    assert failure.message.startswith("openai openai/gpt-oss-120b: ")
    assert "Tool call validation failed" in failure.message and "tool_use_failed" in failure.message
    reasoning = "".join(e.text for e in seen if isinstance(e, ReasoningChunk))
    assert reasoning.startswith("We need to call the tool with invalid parameters first")
    assert reasoning.endswith('Then second call with name: "test". Let\'s do that.')
    assert len(reasoning) == 412
    assert not any(isinstance(e, Finish | TextChunk | ToolCallChunk) for e in seen)
    assert str(server.requests[0].url) == "https://api.groq.com/openai/v1/chat/completions"


@pytest.mark.parametrize(
    ("name", "status", "kind", "words"),
    [
        ("error_400_o1-mini_developer_role.json", 400, OtherModelFailure, "does not support 'developer'"),
        ("error_404_model_not_found.json", 404, OtherModelFailure, "does not exist"),
        ("error_429_openrouter_compat.json", 429, RateLimited, "Provider returned error"),
    ],
)
@needs_wire
def test_http_error_bodies(name: str, status: int, kind: type, words: str) -> None:
    server = Server([json_reply((WIRE / name).read_bytes(), status, headers={"retry-after": "3"})])

    failure, seen = failure_of(chat_model(server, "o1-mini"))

    assert isinstance(failure, kind) and not seen
    assert words in failure.message and f"openai o1-mini: HTTP {status}" in failure.message
    if isinstance(failure, RateLimited):
        assert failure.retry_after_ms == 3000


# -- payloads written from the API reference -----------------------------------


def test_vllm_reasoning_content_is_reasoning() -> None:
    server = Server([sse_reply((OWN / "chat_stream_reasoning_content_vllm.sse").read_bytes())])

    events = invoke(chat_model(server, "Qwen/Qwen3-8B", base_url="http://localhost:8000/v1"))

    assert [e for e in events if isinstance(e, ReasoningChunk)] == [
        ReasoningChunk("The user"),
        ReasoningChunk(" greets"),
        ReasoningChunk(" me."),
    ]
    reply = reply_of(events)
    assert reply.text == "Hello!" and reply.reasoning == (ReasoningPart("The user greets me."),)
    assert reply.usage == Usage(12, 28, 0, 0) and reply.finish is FinishReason.STOP


def test_interleaved_parallel_fragments_reassemble_with_cached_and_reasoning_tokens() -> None:
    server = Server([sse_reply((OWN / "chat_stream_parallel_interleaved_reasoning.sse").read_bytes())])

    reply = reply_of(invoke(chat_model(server, "gpt-oss:20b", base_url="http://localhost:11434/v1")))

    assert reply.reasoning == (ReasoningPart("Need two lookups."),)
    assert reply.calls == (
        ToolCall(CallId("call_a"), "get_weather", '{"city":"Paris"}'),
        ToolCall(CallId("call_b"), "get_time", '{"zone":"CET"}'),
    )
    assert reply.usage == Usage(150, 60, 128, 20) and reply.finish is FinishReason.TOOL_CALLS


def test_a_reused_index_with_a_new_call_id_is_a_new_call() -> None:
    server = Server([sse_reply((OWN / "chat_stream_reused_index.sse").read_bytes())])

    reply = reply_of(invoke(chat_model(server)))

    assert reply.calls == (
        ToolCall(CallId("call_1"), "get_weather", '{"city":"Oslo"}'),
        ToolCall(CallId("call_2"), "get_weather", '{"city":"Rome"}'),
    )


def test_later_fragments_without_index_or_id_continue_the_latest_call() -> None:
    first = {"index": 0, "id": "call_x", "type": "function", "function": {"name": "lookup", "arguments": ""}}
    body = sse(
        chunk({"tool_calls": [first]}),
        chunk({"tool_calls": [{"function": {"arguments": '{"q":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": '"cats"}'}}]}),
        chunk({}, "tool_calls"),
    )
    server = Server([sse_reply(body)])

    reply = reply_of(invoke(chat_model(server)))

    assert reply.calls == (ToolCall(CallId("call_x"), "lookup", '{"q":"cats"}'),)


def test_a_refusal_is_a_refused_error() -> None:
    server = Server([sse_reply((OWN / "chat_stream_refusal.sse").read_bytes())])

    failure, _ = failure_of(chat_model(server))

    assert isinstance(failure, Refused)
    assert failure.message == "openai gpt-4o: the model refused: I'm sorry, I can't help with that."


def test_length_finish() -> None:
    server = Server([sse_reply((OWN / "chat_stream_length.sse").read_bytes())])

    reply = reply_of(invoke(chat_model(server)))

    assert reply.text == "Once upon" and reply.finish is FinishReason.LENGTH and reply.usage == Usage(9, 2)


def test_non_ascii_text_split_across_chunks_survives() -> None:
    server = Server([sse_reply(text_stream("I\u2019ll say \u201cna\u00efve\u201d \U0001f600"), size=3)])

    assert reply_of(invoke(chat_model(server))).text == "I\u2019ll say \u201cna\u00efve\u201d \U0001f600"


# -- malformed and failing streams ---------------------------------------------


def test_a_stream_cut_off_mid_event_is_a_transport_error() -> None:
    body = text_stream("Hello", " world")
    server = Server([sse_reply(body[: body.index(" world") + 3])])

    failure, seen = failure_of(chat_model(server))

    assert isinstance(failure, TransportFailure) and "cut off" in failure.message
    assert seen == [TextChunk("Hello")]


def test_a_stream_that_stops_between_events_before_finishing_is_a_transport_error() -> None:
    server = Server([sse_reply(sse(chunk({"content": "Hel"}), done=False))])

    failure, seen = failure_of(chat_model(server))

    assert isinstance(failure, TransportFailure) and "ended before the model finished" in failure.message
    assert seen == [TextChunk("Hel")]


def test_a_finished_stream_without_done_is_accepted() -> None:
    server = Server([sse_reply(sse(chunk({"content": "Hi"}), chunk({}, "stop"), done=False))])

    events = invoke(chat_model(server))
    assert events == [TextChunk("Hi"), Finish(FinishReason.STOP, events[-1].response_id)]


def test_bad_json_in_a_data_line_is_a_clear_error() -> None:
    server = Server([sse_reply(sse(chunk({"content": "Hi"}), done=False) + 'data: {"choices": [\n\n')])

    failure, seen = failure_of(chat_model(server))

    assert isinstance(failure, OtherModelFailure) and "malformed JSON" in failure.message
    assert "openai gpt-4o" in failure.message and seen == [TextChunk("Hi")]


def test_an_error_chunk_without_an_event_name_is_an_error() -> None:
    error = {
        "error": {"message": "The server had an error while processing your request.", "type": "server_error"}
    }
    server = Server([sse_reply(sse(chunk({"content": "Hi"}), error, done=False))])

    failure, _ = failure_of(chat_model(server))

    assert isinstance(failure, Unavailable) and "server had an error" in failure.message


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind"),
    [
        (500, {"error": {"message": "internal", "type": "server_error"}}, {}, Unavailable),
        (503, b"upstream connect error", {}, Unavailable),
        (
            429,
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            {"retry-after-ms": "250"},
            RateLimited,
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens.",
                    "code": "context_length_exceeded",
                    "type": "invalid_request_error",
                }
            },
            {},
            ContextLengthExceeded,
        ),
        (
            401,
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            {},
            OtherModelFailure,
        ),
    ],
)
def test_http_failures_map_to_the_model_error_family(
    status: int, body: object, headers: dict[str, str], kind: type
) -> None:
    server = Server([json_reply(body, status, headers)])

    failure, _ = failure_of(chat_model(server))

    assert isinstance(failure, kind) and f"openai gpt-4o: HTTP {status}" in failure.message
    if isinstance(failure, RateLimited):
        assert failure.retry_after_ms == 250


def test_a_connection_failure_is_a_transport_error() -> None:
    server = Server([httpx.ConnectError("connection refused")])

    failure, _ = failure_of(chat_model(server))

    assert isinstance(failure, TransportFailure) and "ConnectError: connection refused" in failure.message


def test_a_json_error_body_with_status_200_on_a_stream_is_an_error() -> None:
    server = Server([json_reply({"error": {"message": "model is loading", "type": "unavailable"}})])

    failure, _ = failure_of(chat_model(server, base_url="http://localhost:8080/v1"))

    assert isinstance(failure, Unavailable) and "model is loading" in failure.message


def test_a_gateway_that_answers_a_stream_with_json_still_works() -> None:
    completion = {
        "id": "x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    server = Server([json_reply(completion)])

    assert invoke(chat_model(server)) == [TextChunk("Hi!"), Usage(3, 1), Finish(FinishReason.STOP, "x")]


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_cancelling_mid_stream_ends_it_quietly(backend: str) -> None:
    body = sse(chunk({"content": "Hel"}), done=False).encode()
    server = Server([sse_reply(body, size=len(body), then=anyio.sleep_forever)])
    model = chat_model(server)
    cancel = CancellationToken()
    seen: list[ModelEvent] = []

    async def main() -> None:
        with anyio.fail_after(5):
            async for event in model.invoke(HELLO, cancel):
                seen.append(event)
                cancel.cancel()

    anyio.run(main, backend=backend)

    assert seen == [TextChunk("Hel")]


# -- the request -----------------------------------------------------------------


def test_a_text_request_has_one_system_message_at_the_top() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    request = ModelRequest((system_text("Be brief."), user_text("hi"), system_text("Use metric units.")))

    invoke(chat_model(server, organization="org-1", project="proj-1"), request)

    sent = server.requests[0]
    assert sent.method == "POST" and str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["openai-organization"] == "org-1" and sent.headers["openai-project"] == "proj-1"
    assert server.body() == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief.\n\nUse metric units."},
            {"role": "user", "content": "hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


CITY: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPTIONAL: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
    "required": ["city"],
    "additionalProperties": False,
}


def test_tools_are_strict_only_when_their_schema_survives_normalisation() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    tools = (
        ToolDef("weather", "Current weather.", CITY),
        ToolDef("forecast", "Forecast.", OPTIONAL),
        ToolDef("tags", "Tag map.", {"type": "object", "additionalProperties": {"type": "string"}}),
    )

    invoke(chat_model(server), ModelRequest((user_text("hi"),), tools))

    assert server.body()["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather.",
                "parameters": {**CITY, "additionalProperties": False},
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {"name": "forecast", "description": "Forecast.", "parameters": OPTIONAL},
        },
        {
            "type": "function",
            "function": {
                "name": "tags",
                "description": "Tag map.",
                "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    ]
    assert "tool_choice" not in server.body() and "parallel_tool_calls" not in server.body()


def test_history_with_tool_calls_and_results() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    messages: tuple[Item, ...] = (
        user_text("Weather in Paris and Rome?"),
        AssistantMessage((ReasoningPart("two calls", "sig"), TextPart("Checking.")), agent="w"),
        ToolCall(CallId("c1"), "weather", '{"city":"Paris"}'),
        ToolCall(CallId("c2"), "weather", '{"city":"Rome"}'),
        ToolResult(CallId("c1"), "weather", "sunny"),
        ToolResult(CallId("c2"), "weather", "error: no data", is_error=True),
        AssistantMessage((ReasoningPart("only thinking"),)),
        ToolCall(CallId("c3"), "weather", "{}"),
        ToolResult(CallId("c3"), "weather", "cloudy"),
        AssistantMessage((TextPart("Paris is sunny."),)),
        user_text("Thanks"),
    )

    invoke(chat_model(server), ModelRequest(messages))

    def call(call_id: str, arguments: str) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": arguments}}

    assert server.body()["messages"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [call("c1", '{"city":"Paris"}'), call("c2", '{"city":"Rome"}')],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "error: no data"},
        {"role": "assistant", "content": None, "tool_calls": [call("c3", "{}")]},
        {"role": "tool", "tool_call_id": "c3", "content": "cloudy"},
        {"role": "assistant", "content": "Paris is sunny."},
        {"role": "user", "content": "Thanks"},
    ]


def test_images_become_image_url_parts() -> None:
    server = Server([sse_reply(text_stream("a cat"))])
    message = UserMessage(
        (
            TextPart("What is this?"),
            ImagePart(url="https://example.com/cat.png"),
            ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
            ImagePart(),
        )
    )

    invoke(chat_model(server), ModelRequest((message,)))

    assert server.body()["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]


def test_structured_output_formats() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "note": {"type": "string"}},
        "required": ["city"],
    }
    formats: list[ResponseFormat] = [
        JsonSchema("City location", schema),
        JsonSchema("loose", schema, strict=False),
        JsonObjectFormat(),
    ]
    server = Server([sse_reply(text_stream("{}")) for _ in formats])
    model = chat_model(server)

    for response_format in formats:
        invoke(
            model, ModelRequest((user_text("hi"),), settings=ModelSettings(response_format=response_format))
        )

    assert [server.body(i)["response_format"] for i in range(3)] == [
        {
            "type": "json_schema",
            "json_schema": {"name": "City_location", "schema": strict(schema), "strict": True},
        },
        {"type": "json_schema", "json_schema": {"name": "loose", "schema": schema, "strict": False}},
        {"type": "json_object"},
    ]
    assert strict(schema)["properties"]["note"] == {"type": ["string", "null"]}


def test_settings_map_onto_the_body() -> None:
    tools = (ToolDef("weather", "Weather.", CITY),)
    choices: list[ToolChoice] = [
        ToolChoiceAuto(),
        ToolChoiceNone(),
        ToolChoiceRequired(),
        ToolChoiceNamed("weather"),
    ]
    server = Server([sse_reply(text_stream("ok")) for _ in range(len(choices) + 1)])
    model = chat_model(
        server,
        parallel_tool_calls=False,
        reasoning_effort="low",
        extra_body={"seed": 7, "service_tier": "flex"},
    )

    for choice in choices:
        settings = ModelSettings(temperature=0.2, top_p=0.9, max_output_tokens=256, tool_choice=choice)
        invoke(model, ModelRequest((user_text("hi"),), tools, settings))
    invoke(model, ModelRequest((user_text("hi"),), settings=ModelSettings(tool_choice=ToolChoiceRequired())))

    body = server.body(0)
    assert {k: body[k] for k in ("temperature", "top_p", "max_completion_tokens", "parallel_tool_calls")} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_completion_tokens": 256,
        "parallel_tool_calls": False,
    }
    assert body["reasoning_effort"] == "low" and body["seed"] == 7 and body["service_tier"] == "flex"
    assert [server.body(i)["tool_choice"] for i in range(4)] == [
        "auto",
        "none",
        "required",
        {"type": "function", "function": {"name": "weather"}},
    ]
    assert "tool_choice" not in server.body(4)  # no tools: OpenAI rejects a tool_choice


def test_compatible_server_options() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    model = chat_model(
        server,
        "llama3.1",
        api_key=None,
        base_url="http://localhost:11434/v1/",
        system_role="developer",
        max_tokens_param="max_tokens",
        stream_usage=False,
        extra_headers={"X-Trace": "t1"},
    )
    request = ModelRequest(
        (system_text("Be brief."), user_text("hi")), settings=ModelSettings(max_output_tokens=9)
    )

    invoke(model, request)

    sent = server.requests[0]
    assert str(sent.url) == "http://localhost:11434/v1/chat/completions" and sent.headers["x-trace"] == "t1"
    assert server.body() == {
        "model": "llama3.1",
        "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": 9,
    }


def test_non_streaming_request() -> None:
    completion = {"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]}
    server = Server([json_reply(completion)])

    events = invoke(chat_model(server, stream=False))

    assert events == [TextChunk("ok"), Finish(FinishReason.STOP)]
    assert server.body() == {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert server.requests[0].headers["accept"] == "application/json"


# -- construction ----------------------------------------------------------------


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server = Server([sse_reply(text_stream("ok"))])
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))

    invoke(OpenAIModel.chat("gpt-4o", http_client=client))

    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


def test_no_key_is_a_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)

    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIModel.chat("gpt-4o")
    with pytest.raises(ConfigError, match="AZURE_OPENAI_API_KEY or OPENAI_API_KEY"):
        OpenAIModel.chat("gpt-4o", azure=True, base_url="https://r.openai.azure.com/openai/deployments/d")
    local = OpenAIModel.chat("llama3.1", base_url="http://localhost:8080/v1")  # local servers need none
    assert local.base_url == "http://localhost:8080/v1"


def test_local_servers_get_no_authorization_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = Server([sse_reply(text_stream("ok"))])

    invoke(chat_model(server, api_key=None, base_url="http://localhost:8080/v1"))

    assert "authorization" not in server.requests[0].headers


def test_azure_deployments_use_an_api_key_header_and_api_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    server = Server([sse_reply(text_stream("ok"))])
    base = "https://res.openai.azure.com/openai/deployments/gpt4o"
    model = chat_model(server, api_key=None, azure=True, base_url=base, api_version="2024-10-21")

    invoke(model)

    sent = server.requests[0]
    assert str(sent.url) == f"{base}/chat/completions?api-version=2024-10-21"
    assert sent.headers["api-key"] == "az-key" and "authorization" not in sent.headers
    assert model.provider == "azure.ai.openai"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model_id": ""}, "model id"),
        ({"azure": True}, "base_url"),
        ({"system_role": "boss"}, "system_role"),
        ({"max_tokens_param": "tokens"}, "max_tokens_param"),
        ({"reasoning_summary": "auto"}, "Responses API option"),
        ({"api_key": ""}, "empty"),
    ],
)
def test_bad_options_fail_at_construction(options: dict[str, Any], message: str) -> None:
    model_id = options.pop("model_id", "gpt-4o")
    options.setdefault("api_key", "sk-test")
    with pytest.raises(ConfigError, match=message):
        OpenAIModel.chat(model_id, **options)


def test_identity_and_capabilities() -> None:
    model = OpenAIModel.chat("gpt-4o", api_key="sk-secret")

    assert (model.provider, model.model_id, model.api) == ("openai", "gpt-4o", "chat")
    caps = model.capabilities
    assert caps.streaming and caps.tools and caps.parallel_tool_calls and caps.structured_output
    assert caps.vision and caps.reasoning and caps.prompt_caching and not caps.server_managed_state
    assert not OpenAIModel.chat("gpt-4o", api_key="k", stream=False).capabilities.streaming
    assert OpenAIModel.chat("x", api_key="k", provider_name="groq").provider == "groq"
    assert "sk-secret" not in repr(model)
    anyio.run(model.aclose, backend="trio")


# -- inside the agent loop -------------------------------------------------------


@tool
async def get_capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's name.
    """
    return {"UK": "London"}.get(country, "unknown")


def tool_round(server: Server) -> None:
    server.replies.extend(
        [
            sse_reply(
                sse(
                    chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "get_capital", "arguments": ""},
                                }
                            ],
                        }
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"country":'}}]}),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"UK"}'}}]}),
                    chunk({}, "tool_calls"),
                    chunk(
                        usage={
                            "prompt_tokens": 53,
                            "completion_tokens": 15,
                            "total_tokens": 68,
                            "prompt_tokens_details": {"cached_tokens": 0},
                        }
                    ),
                )
            ),
            sse_reply(text_stream("The capital of the UK is ", "London.", usage=(78, 9))),
        ]
    )


def check_tool_round(server: Server, final_output: str, usage: Usage) -> None:
    assert final_output == "The capital of the UK is London."
    assert usage.input_tokens == 53 + 78 and usage.output_tokens == 15 + 9
    first, second = server.body(0), server.body(1)
    assert first["tools"][0]["function"]["name"] == "get_capital"
    assert first["messages"][0] == {"role": "system", "content": "Answer with the tool."}
    assert second["messages"][1:] == [
        {"role": "user", "content": "Capital of the UK?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_capital", "arguments": '{"country":"UK"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "London"},
    ]


def test_an_agent_runs_a_tool_round_with_the_chat_model() -> None:
    server = Server([])
    tool_round(server)
    agent: LlmAgent[Any] = LlmAgent(
        name="geo", model=chat_model(server), instructions="Answer with the tool.", tools=[get_capital]
    )

    result = run_sync(agent, "Capital of the UK?")

    check_tool_round(server, result.final_output, result.usage)


def test_an_agent_runs_a_tool_round_under_asyncio() -> None:
    server = Server([])
    tool_round(server)
    agent: LlmAgent[Any] = LlmAgent(
        name="geo", model=chat_model(server), instructions="Answer with the tool.", tools=[get_capital]
    )

    async def main() -> Any:
        return await collect(agent.run(None, "Capital of the UK?"))

    result = anyio.run(main, backend="asyncio")

    check_tool_round(server, result.final_output, result.usage)
