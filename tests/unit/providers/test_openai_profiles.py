"""Server profiles and structured-output modes of the Chat Completions adapter,
through ``OpenAIModel.invoke`` and an ``httpx.MockTransport`` (the live code
path); the real-server suite is ``tests/integration/openai_compatible``."""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
import httpx
import pytest
from openai_support import Server

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError, OtherModelFailure, TransportFailure, Unavailable
from helikon.ids import CallId
from helikon.items import ToolCall, ToolResult, system_text, user_text
from helikon.model import (
    FinishReason,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    TextChunk,
    ToolCallChunk,
    ToolChoiceNamed,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers.openai import PROFILES, OpenAIModel, ServerProfile

CITY = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
STRUCTURED = ModelSettings(response_format=JsonSchema("city", CITY))
WEATHER = ToolDef("weather", "The weather.", {"type": "object", "properties": {}})


def sse(*chunks: dict[str, Any], done: bool = True) -> httpx.Response:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def model(server: Server, **options: Any) -> OpenAIModel:
    return OpenAIModel.chat("local", base_url="http://127.0.0.1:1/v1", http_client=server.client(), **options)


def invoke(m: OpenAIModel, request: ModelRequest) -> list[ModelEvent]:
    async def main() -> list[ModelEvent]:
        return [event async for event in m.invoke(request, CancellationToken())]

    return anyio.run(main)


def failure(m: OpenAIModel, request: ModelRequest) -> object:
    with pytest.raises(ModelError) as caught:
        invoke(m, request)
    return caught.value.failure


def text_reply() -> httpx.Response:
    return sse(chunk({"content": "ok"}), chunk({}, "stop"))


TOOL_HISTORY = ModelRequest(
    (
        system_text("Be brief."),
        user_text("weather?"),
        ToolCall(CallId("call_1"), "weather", "{}"),
        ToolResult(CallId("call_1"), "weather", "sunny"),
    ),
    (WEATHER,),
)


def test_llama_cpp_profile_sends_an_empty_string_for_a_tool_call_only_message_and_max_tokens() -> None:
    server = Server([text_reply()])
    m = model(server, profile="llama.cpp")
    invoke(m, attrs.evolve(TOOL_HISTORY, settings=ModelSettings(max_output_tokens=32)))
    body = server.body()
    assistant = next(msg for msg in body["messages"] if msg["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"
    assert body["max_tokens"] == 32 and "max_completion_tokens" not in body
    assert "stream_options" not in body


def test_the_openai_profile_keeps_the_reference_dialect() -> None:
    server = Server([text_reply()])
    invoke(model(server), attrs.evolve(TOOL_HISTORY, settings=ModelSettings(max_output_tokens=32)))
    body = server.body()
    assistant = next(msg for msg in body["messages"] if msg["role"] == "assistant")
    assert assistant["content"] is None
    assert body["max_completion_tokens"] == 32


def test_explicit_options_override_the_profile() -> None:
    server = Server([text_reply()])
    m = model(server, profile="llama.cpp", max_tokens_param="max_completion_tokens", stream_usage=True)
    invoke(m, ModelRequest((user_text("hi"),), (), ModelSettings(max_output_tokens=5)))
    assert server.body()["max_completion_tokens"] == 5
    assert server.body()["stream_options"] == {"include_usage": True}


def test_json_object_mode_sends_the_schema_in_llama_cpp_form() -> None:
    server = Server([sse(chunk({"content": '{"name": "Oslo"}'}), chunk({}, "stop"))])
    events = invoke(model(server, profile="llama.cpp"), ModelRequest((user_text("city?"),), (), STRUCTURED))
    assert server.body()["response_format"] == {"type": "json_object", "schema": CITY}
    assert TextChunk('{"name": "Oslo"}') in events


def test_tool_mode_forces_a_final_result_tool_and_returns_its_arguments_as_the_answer() -> None:
    server = Server(
        [
            sse(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "x",
                                "type": "function",
                                "function": {"name": "final_result", "arguments": '{"name":'},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Oslo"}'}}]}),
                chunk({}, "tool_calls"),
            )
        ]
    )
    events = invoke(
        model(server, structured_output="tool"), ModelRequest((user_text("city?"),), (), STRUCTURED)
    )
    body = server.body()
    assert body["tools"][0]["function"]["name"] == "final_result"
    assert body["tools"][0]["function"]["parameters"] == CITY
    assert body["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}
    assert "response_format" not in body
    assert [e for e in events if isinstance(e, ToolCallChunk)] == []
    assert TextChunk('{"name": "Oslo"}') in events
    assert events[-1].reason is FinishReason.STOP


def test_tool_mode_wraps_a_non_object_schema_and_unwraps_the_answer_non_streamed() -> None:
    listing = {"type": "array", "items": {"type": "integer"}}
    reply = {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "x",
                            "type": "function",
                            "function": {"name": "final_result", "arguments": '{"response": [1, 2]}'},
                        }
                    ],
                },
            }
        ],
    }
    server = Server([httpx.Response(200, json=reply)])
    m = model(server, structured_output="tool", stream=False)
    events = invoke(
        m, ModelRequest((user_text("n?"),), (), ModelSettings(response_format=JsonSchema("n", listing)))
    )
    parameters = server.body()["tools"][0]["function"]["parameters"]
    assert parameters["properties"]["response"] == listing
    assert TextChunk("[1,2]") in events and events[-1].reason is FinishReason.STOP


def test_tool_mode_on_a_server_that_cannot_name_a_tool_asks_for_required() -> None:
    server = Server([text_reply()])
    invoke(
        model(server, profile="lmstudio", structured_output="tool"),
        ModelRequest((user_text("city?"),), (), STRUCTURED),
    )
    assert server.body()["tool_choice"] == "required"


def test_prompted_mode_puts_the_schema_in_the_instructions() -> None:
    server = Server([text_reply()])
    m = model(server, structured_output="prompted")
    invoke(m, ModelRequest((system_text("Be brief."), user_text("city?")), (), STRUCTURED))
    body = server.body()
    assert "response_format" not in body and "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.")
    assert '"required":["name"]' in system["content"]


def test_a_tool_choice_the_profile_cannot_express_is_refused_by_name() -> None:
    server = Server([])
    request = ModelRequest((user_text("hi"),), (WEATHER,), ModelSettings(tool_choice=ToolChoiceRequired()))
    found = failure(model(server, profile="ollama"), request)
    assert (
        isinstance(found, OtherModelFailure) and "'ollama'" in found.message and "'required'" in found.message
    )
    assert server.requests == []


def test_a_stream_that_says_done_without_a_finish_reason_is_cut_short_not_finished() -> None:
    server = Server([sse(chunk({"content": "Once upon"}))])
    found = failure(model(server, profile="llama.cpp"), ModelRequest((user_text("story"),)))
    assert isinstance(found, TransportFailure) and "cut short" in found.message


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "message": "1 validation error for ChatCompletionRequestAssistantMessage\ncontent\n"
                "  Input should be a valid string",
                "type": "internal_server_error",
            }
        },
        {"detail": 'TypeError: can only concatenate str (not "NoneType") to str'},
        {"error": {"message": "Invalid request: unsupported value", "code": 500}},
    ],
)
def test_a_server_error_that_says_the_request_is_invalid_is_not_transient(body: object) -> None:
    server = Server([httpx.Response(500, json=body)])
    found = failure(model(server), ModelRequest((user_text("hi"),)))
    assert isinstance(found, OtherModelFailure) and found.status == 500


def test_a_plain_server_error_stays_transient() -> None:
    server = Server([httpx.Response(500, json={"error": {"message": "boom"}})])
    assert isinstance(failure(model(server), ModelRequest((user_text("hi"),))), Unavailable)


def test_profiles_are_named_or_objects_and_checked() -> None:
    assert set(PROFILES) == {"openai", "llama.cpp", "vllm", "ollama", "lmstudio"}
    custom = ServerProfile("mine", max_tokens_param="max_tokens", output_modes=("prompted",))
    server = Server([text_reply()])
    invoke(model(server, profile=custom), ModelRequest((user_text("c?"),), (), STRUCTURED))
    assert "Answer with a single JSON value" in server.body()["messages"][0]["content"]
    with pytest.raises(ConfigError, match="unknown server profile 'llamacpp'"):
        model(Server([]), profile="llamacpp")
    with pytest.raises(ConfigError, match="unknown output mode"):
        ServerProfile("bad", output_modes=("grammar",))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="structured_output must be one of"):
        model(Server([]), structured_output="xml")
    with pytest.raises(ConfigError, match="Chat Completions options"):
        OpenAIModel.responses("m", base_url="http://127.0.0.1:1/v1", profile="vllm")


def test_tool_calls_still_reach_the_loop_in_tool_mode_when_the_model_calls_a_real_tool() -> None:
    server = Server(
        [
            sse(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": "{}"},
                            }
                        ]
                    }
                ),
                chunk({}, "tool_calls"),
            )
        ]
    )
    request = ModelRequest(
        (user_text("w?"),), (WEATHER,), ModelSettings(tool_choice=ToolChoiceNamed("weather"))
    )
    events = invoke(model(server, structured_output="tool"), request)
    assert ToolCallChunk(index=0, call_id="c1", name="weather", arguments="{}") in events
    assert events[-1].reason is FinishReason.TOOL_CALLS
