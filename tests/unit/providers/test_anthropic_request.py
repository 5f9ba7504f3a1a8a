"""AnthropicModel writing requests: the URL, the headers and the exact JSON
body sent for a representative request of each kind, captured by an
``httpx.MockTransport`` while ``invoke`` runs as it would live."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from test_anthropic_support import OWN, Wire, drain, model_on, wire_for

from helikon.errors import ConfigError, ModelError
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
    Item,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.model import (
    JsonObjectFormat,
    JsonSchema,
    ModelRequest,
    ModelSettings,
    Text,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers import _http
from helikon.providers.anthropic import (
    DEFAULT_MAX_TOKENS,
    AnthropicModel,
    CacheStrategy,
    ExtendedThinking,
    StructuredOutputMode,
)

WEATHER = ToolDef(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolDef("get_time", "", {"type": "object", "properties": {}})


def reply() -> Wire:
    return wire_for(OWN / "stream_cache_usage.sse")


def sent(request: ModelRequest, **kwargs: Any) -> dict[str, Any]:
    """The JSON body ``invoke`` sends for ``request``."""
    wire = reply()
    drain(model_on(wire, **kwargs), request)
    return wire.sent


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(CallId(call_id), name, arguments)


def result(call_id: str, name: str, content: str, is_error: bool = False) -> ToolResult:
    return ToolResult(CallId(call_id), name, content, is_error)


# -- endpoint and headers ----------------------------------------------------------


def test_url_and_headers() -> None:
    wire = reply()
    drain(model_on(wire, betas=["token-efficient-tools-2025-02-19"]), ModelRequest((user_text("hi"),)))

    request = wire.requests[0]
    assert request.method == "POST" and str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["anthropic-beta"] == "token-efficient-tools-2025-02-19"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert "authorization" not in request.headers


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://gateway.example/anthropic", "https://gateway.example/anthropic/v1/messages"),
        ("https://gateway.example/anthropic/", "https://gateway.example/anthropic/v1/messages"),
        ("http://localhost:8080/v1", "http://localhost:8080/v1/messages"),
    ],
)
def test_base_url(base_url: str, url: str) -> None:
    wire = reply()
    drain(model_on(wire, base_url=base_url), ModelRequest((user_text("hi"),)))

    assert str(wire.requests[0].url) == url


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    wire = reply()

    drain(AnthropicModel.messages("claude-x", http_client=wire.client()), ModelRequest((user_text("hi"),)))

    assert wire.requests[0].headers["x-api-key"] == "sk-ant-from-env"


def test_no_key_fails_at_construction_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel.messages("claude-sonnet-4-5")


def test_an_explicit_key_needs_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    model = AnthropicModel(model_id="claude-sonnet-4-5", api_key="sk-ant-x")

    assert model.provider == "anthropic" and model.model_id == "claude-sonnet-4-5"
    assert "sk-ant-x" not in repr(model)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2000, "thinking": ExtendedThinking(2000)}, "below max_tokens"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AnthropicModel.messages("claude-x", api_key="k", **kwargs)


def test_a_thinking_budget_below_the_minimum_is_rejected() -> None:
    with pytest.raises(ConfigError, match="1024"):
        ExtendedThinking(512)


def test_capabilities() -> None:
    plain = AnthropicModel.messages("claude-x", api_key="k")
    thinking = AnthropicModel.messages("claude-x", api_key="k", thinking=ExtendedThinking(1024), stream=False)

    assert plain.capabilities.streaming and plain.capabilities.tools and plain.capabilities.prompt_caching
    assert plain.capabilities.structured_output and plain.capabilities.vision
    assert not plain.capabilities.reasoning and not plain.capabilities.server_managed_state
    assert thinking.capabilities.reasoning and not thinking.capabilities.streaming


# -- bodies ---------------------------------------------------------------------------------


def test_text_request_hoists_every_system_message() -> None:
    request = ModelRequest(
        (
            system_text("You are a budgeting assistant."),
            user_text("How am I doing?"),
            SystemMessage((TextPart("Answer in one sentence."),)),
        )
    )

    assert sent(request) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": [
            {"type": "text", "text": "You are a budgeting assistant."},
            {"type": "text", "text": "Answer in one sentence."},
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "How am I doing?"}]}],
        "stream": True,
    }


def test_non_streaming_request_has_no_stream_field() -> None:
    wire = wire_for(OWN / "nonstream_refusal.json")
    drain(model_on(wire, stream=False), ModelRequest((user_text("hi"),)))

    assert "stream" not in wire.sent and wire.requests[0].headers["accept"] == "application/json"


def test_tools_and_tool_choice() -> None:
    request = ModelRequest(
        (user_text("Weather in Oslo?"),),
        (WEATHER, CLOCK),
        ModelSettings(tool_choice=ToolChoiceNamed("get_weather")),
    )

    body = sent(request)

    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}


@pytest.mark.parametrize(
    ("choice", "parallel", "wire_choice"),
    [
        (None, True, None),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (ToolChoiceAuto(), True, {"type": "auto"}),
        (ToolChoiceNone(), False, {"type": "none"}),
        (ToolChoiceRequired(), True, {"type": "any"}),
        (ToolChoiceRequired(), False, {"type": "any", "disable_parallel_tool_use": True}),
    ],
)
def test_tool_choice_mapping(choice: Any, parallel: bool, wire_choice: dict[str, Any] | None) -> None:
    request = ModelRequest((user_text("x"),), (WEATHER,), ModelSettings(tool_choice=choice))

    assert sent(request, parallel_tool_calls=parallel).get("tool_choice") == wire_choice


def test_tool_choice_without_tools_is_not_sent() -> None:
    request = ModelRequest((user_text("x"),), (), ModelSettings(tool_choice=ToolChoiceRequired()))

    assert "tool_choice" not in sent(request) and "tools" not in sent(request)


def test_a_tool_round_with_thinking_goes_back_in_order() -> None:
    history: tuple[Item, ...] = (
        system_text("Be helpful."),
        user_text("Weather in Oslo and Lima?"),
        AssistantMessage(
            (ReasoningPart("Two cities, two calls.", "sig-abc"), TextPart("Checking both.")), agent="w"
        ),
        call("toolu_1", "get_weather", '{"city": "Oslo"}'),
        call("toolu_2", "get_weather", '{"city":"Lima"}'),
        result("toolu_1", "get_weather", "sunny"),
        result("toolu_2", "get_weather", "no such city", is_error=True),
    )

    body = sent(ModelRequest(history, (WEATHER,)), thinking=ExtendedThinking(2048))

    assert body["system"] == [{"type": "text", "text": "Be helpful."}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Lima?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "sig-abc"},
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Lima"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no such city",
                    "is_error": True,
                },
            ],
        },
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 2048 + 4096


def test_redacted_and_unsigned_reasoning() -> None:
    history: tuple[Item, ...] = (
        user_text("x"),
        AssistantMessage(
            (
                ReasoningPart("", "redacted:EmwKAhgBEgy3va3p"),
                ReasoningPart("unsigned thoughts from another provider"),
                TextPart("Done."),
            )
        ),
        user_text("and?"),
    )

    body = sent(ModelRequest(history))

    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"},
            {"type": "text", "text": "Done."},
        ],
    }


def test_tool_calls_without_an_assistant_message_and_bad_arguments() -> None:
    history: tuple[Item, ...] = (
        user_text("x"),
        call("toolu_1", "get_time", ""),
        call("toolu_2", "get_weather", "{not json"),
        result("toolu_1", "get_time", ""),
        result("toolu_2", "get_weather", "invalid arguments", is_error=True),
        user_text("Thanks. And tomorrow?"),
    )

    messages = sent(ModelRequest(history, (WEATHER, CLOCK)))["messages"]

    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
        ],
    }
    # Results and the next user text share one user message, results first.
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "invalid arguments",
                "is_error": True,
            },
            {"type": "text", "text": "Thanks. And tomorrow?"},
        ],
    }
    assert len(messages) == 3


def test_images() -> None:
    request = ModelRequest(
        (
            UserMessage(
                (
                    TextPart("What is in these?"),
                    ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
                    ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
                    ImagePart(url="https://example.com/cat.webp"),
                )
            ),
        )
    )

    assert sent(request)["messages"][0]["content"] == [
        {"type": "text", "text": "What is in these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.webp"}},
    ]


def test_an_inline_image_without_media_type_fails_before_sending() -> None:
    wire = reply()
    request = ModelRequest((UserMessage((ImagePart(data="AAAA"),)),))

    with pytest.raises(ModelError, match="media_type"):
        drain(model_on(wire), request)

    assert wire.requests == []


def test_settings() -> None:
    settings = ModelSettings(temperature=0.2, max_output_tokens=321)

    body = sent(ModelRequest((user_text("x"),), settings=settings), max_tokens=1000)

    assert body["temperature"] == 0.2 and "top_p" not in body and body["max_tokens"] == 321


def test_max_tokens_defaults() -> None:
    request = ModelRequest((user_text("x"),))

    assert sent(request)["max_tokens"] == 4096
    assert sent(request, max_tokens=777)["max_tokens"] == 777
    assert sent(request, thinking=ExtendedThinking(1024))["max_tokens"] == 5120


def test_structured_output_native_sends_the_schema_as_is() -> None:
    # The schema of the real structured-output fixture's request, untouched (no strict rewrite).
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"amount": {"anyOf": [{"type": "number"}, {"type": "string"}]}},
        "required": ["amount"],
        "additionalProperties": False,
    }
    request = ModelRequest(
        (user_text("12.34"),), settings=ModelSettings(response_format=JsonSchema("M", schema))
    )

    body = sent(request)

    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert "tools" not in body and "tool_choice" not in body


def test_structured_output_by_tool_with_thinking_uses_auto_choice() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = ModelRequest((user_text("x"),), settings=ModelSettings(response_format=JsonSchema("M", schema)))

    body = sent(request, structured_output=StructuredOutputMode.TOOL, thinking=ExtendedThinking(1024))

    assert body["tools"] == [
        {
            "name": "helikon_structured_output",
            "description": "Give your final answer by calling this tool; "
            "its input is the answer, matching the schema.",
            "input_schema": schema,
        }
    ]
    assert body["tool_choice"] == {"type": "auto"} and "output_config" not in body


def test_json_object_and_text_formats() -> None:
    json_object = sent(
        ModelRequest((user_text("x"),), settings=ModelSettings(response_format=JsonObjectFormat()))
    )
    text = sent(ModelRequest((user_text("x"),), settings=ModelSettings(response_format=Text())))

    assert json_object["system"] == [
        {
            "type": "text",
            "text": "Respond with a single JSON object and nothing else: no prose, no code fences.",
        }
    ]
    assert "system" not in text and "output_config" not in text


# -- prompt caching ---------------------------------------------------------------------------------


CACHED_HISTORY: tuple[Item, ...] = (
    system_text("Long stable instructions."),
    user_text("Weather in Oslo?"),
    AssistantMessage((ReasoningPart("think", "sig"),)),
    call("toolu_1", "get_weather", '{"city":"Oslo"}'),
    result("toolu_1", "get_weather", "sunny"),
)


def test_cache_strategy_none_adds_no_breakpoints() -> None:
    body = sent(ModelRequest(CACHED_HISTORY, (WEATHER, CLOCK)))

    assert "cache_control" not in repr(body)


def test_cache_strategy_system_and_tools() -> None:
    body = sent(ModelRequest(CACHED_HISTORY, (WEATHER, CLOCK)), cache=CacheStrategy.SYSTEM_AND_TOOLS)

    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert body["system"][-1] == {
        "type": "text",
        "text": "Long stable instructions.",
        "cache_control": {"type": "ephemeral"},
    }
    assert "cache_control" not in repr(body["messages"])


def test_cache_strategy_with_history_marks_the_last_cacheable_block() -> None:
    body = sent(ModelRequest(CACHED_HISTORY, (WEATHER,)), cache=CacheStrategy.SYSTEM_TOOLS_AND_HISTORY)

    assert body["messages"][-1]["content"][-1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "sunny",
        "cache_control": {"type": "ephemeral"},
    }
    assert repr(body).count("cache_control") == 3


def test_thinking_blocks_never_carry_a_breakpoint() -> None:
    history: tuple[Item, ...] = (user_text("x"), AssistantMessage((ReasoningPart("t", "sig"), TextPart(""))))

    body = sent(ModelRequest(history), cache=CacheStrategy.SYSTEM_TOOLS_AND_HISTORY)

    assert "cache_control" not in repr(body)


def test_request_body_is_inspectable_without_sending() -> None:
    model = AnthropicModel.messages("claude-x", api_key="k", stream=False)

    assert model.request_body(ModelRequest((user_text("hi"),))) == {
        "model": "claude-x",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_without_a_client_each_call_opens_and_closes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = reply()
    opened: list[httpx.AsyncClient] = []

    def new_client(given: httpx.AsyncClient | None) -> httpx.AsyncClient:
        assert given is None
        opened.append(wire.client())
        return opened[-1]

    monkeypatch.setattr(_http, "new_client", new_client)
    model = AnthropicModel.messages("claude-x", api_key="k")

    drain(model, ModelRequest((user_text("hi"),)))
    drain(model, ModelRequest((user_text("again"),)))

    assert len(opened) == 2 and all(client.is_closed for client in opened)


def test_a_given_client_is_left_open() -> None:
    wire = reply()
    client = wire.client()
    model = AnthropicModel.messages("claude-x", api_key="k", http_client=client)

    drain(model, ModelRequest((user_text("hi"),)))

    assert not client.is_closed
