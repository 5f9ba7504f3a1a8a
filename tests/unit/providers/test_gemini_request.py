"""What GeminiModel sends: URLs, credentials and JSON bodies for each kind of
request, checked field by field and validated against the request shape
written from Google's REST reference
(``tests/fixtures/gemini/generate_content_request.schema.json``); plus
construction from arguments and the environment, and Vertex AI tokens."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest
import trio

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError, OtherModelFailure
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
    FinishReason,
    JsonObjectFormat,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    Text,
    TextChunk,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.protocols import Model
from helikon.providers.gemini import GeminiModel

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gemini"
REQUEST_SHAPE = jsonschema.Draft202012Validator(
    json.loads((FIXTURES / "generate_content_request.schema.json").read_text())
)

_STREAM_OK = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}],'
    b'"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1},"responseId":"r1"}\r\n\r\n'
)
_JSON_OK = (
    b'{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}],'
    b'"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1},"responseId":"r1"}'
)

WEATHER = ToolDef(
    name="get_weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city"},
            "units": {"type": ["string", "null"], "enum": ["c", "f", None], "default": None},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
)
PING = ToolDef(name="ping", description="Ping.", parameters={"type": "object", "properties": {}})


class Pieces(httpx.AsyncByteStream):
    def __init__(self, data: bytes, size: int = 7) -> None:
        self.data, self.size = data, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.size):
            yield self.data[start : start + self.size]

    async def aclose(self) -> None:
        pass


class Recorder:
    """A MockTransport handler that keeps each request and answers "ok"."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        stream = request.url.path.endswith(":streamGenerateContent")
        body = _STREAM_OK if stream else _JSON_OK
        content_type = "text/event-stream" if stream else "application/json"
        return httpx.Response(200, headers={"content-type": content_type}, stream=Pieces(body))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    @property
    def body(self) -> dict[str, Any]:
        """The last request's JSON body, checked against the documented shape."""
        body: dict[str, Any] = json.loads(self.requests[-1].content)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in REQUEST_SHAPE.iter_errors(body)]
        assert errors == [], errors
        return body


def _send(model: GeminiModel, request: ModelRequest) -> list[ModelEvent]:
    async def main() -> list[ModelEvent]:
        return [e async for e in model.invoke(request, CancellationToken())]

    return trio.run(main)


def _developer(recorder: Recorder, **kwargs: Any) -> GeminiModel:
    return GeminiModel.developer(
        "gemini-2.5-flash", api_key="AIza-test", http_client=recorder.client(), **kwargs
    )


# -- text, system, settings -----------------------------------------------------------


def test_a_text_request() -> None:
    recorder = Recorder()
    model = _developer(recorder)
    events = _send(model, ModelRequest((system_text("Be brief."), user_text("Hi"))))

    assert events[0] == TextChunk("ok")
    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert request.headers["x-goog-api-key"] == "AIza-test"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept-encoding"] == "identity"  # the SSE reader takes raw bytes
    assert "authorization" not in request.headers and "key=" not in str(request.url)
    assert recorder.body == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }


def test_every_system_message_joins_the_system_instruction() -> None:
    recorder = Recorder()
    messages: tuple[Item, ...] = (
        system_text("One."),
        user_text("Hi"),
        SystemMessage((TextPart("Two."), ImagePart(url="https://example.com/x.png"))),
        user_text("Again"),
    )
    _send(_developer(recorder), ModelRequest(messages))
    assert recorder.body == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}, {"text": "Again"}]}],
        "systemInstruction": {"parts": [{"text": "One."}, {"text": "Two."}]},
    }


def test_settings_and_thinking_go_to_generation_config() -> None:
    recorder = Recorder()
    model = _developer(recorder, include_thoughts=True, thinking_budget=1024)
    settings = ModelSettings(temperature=0.2, top_p=0.9, max_output_tokens=256, response_format=Text())
    _send(model, ModelRequest((user_text("Hi"),), settings=settings))
    assert recorder.body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 256,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024},
    }
    gemini3 = GeminiModel.developer(
        "gemini-3-pro-preview", api_key="k", http_client=recorder.client(), thinking_level="low"
    )
    _send(gemini3, ModelRequest((user_text("Hi"),)))
    assert recorder.body["generationConfig"] == {"thinkingConfig": {"thinkingLevel": "low"}}


def test_no_messages_still_sends_one_content() -> None:
    recorder = Recorder()
    _send(_developer(recorder), ModelRequest((system_text("Only a system prompt."),)))
    assert recorder.body["contents"] == [{"role": "user", "parts": [{"text": ""}]}]


# -- tools ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (None, None),
        (ToolChoiceAuto(), {"functionCallingConfig": {"mode": "AUTO"}}),
        (ToolChoiceNone(), {"functionCallingConfig": {"mode": "NONE"}}),
        (ToolChoiceRequired(), {"functionCallingConfig": {"mode": "ANY"}}),
        (
            ToolChoiceNamed("get_weather"),
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
        ),
    ],
)
def test_tools_and_tool_choice(choice: Any, config: dict[str, Any] | None) -> None:
    recorder = Recorder()
    request = ModelRequest((user_text("Weather?"),), (WEATHER, PING), ModelSettings(tool_choice=choice))
    _send(_developer(recorder), request)
    body = recorder.body
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string", "description": "the city"},
                            "units": {"type": "string", "enum": ["c", "f"], "nullable": True},
                        },
                        "required": ["city"],
                    },
                },
                # No arguments: no parameters (Gemini rejects an OBJECT with no properties).
                {"name": "ping", "description": "Ping."},
            ]
        }
    ]
    assert body.get("toolConfig") == config


def test_a_tool_round_goes_back_as_function_call_and_response_parts() -> None:
    recorder = Recorder()
    messages: tuple[Item, ...] = (
        user_text("Weather in Paris and Tokyo?"),
        AssistantMessage(
            (ReasoningPart("I need both cities.", "c2lnLWZj"), TextPart("Checking both.")), agent="weather"
        ),
        ToolCall(CallId("call_r_1_0"), "get_weather", '{"city": "Paris"}'),
        ToolCall(CallId("call_r_1_1"), "get_weather", '{"city": "Tokyo", "units": "c"}'),
        ToolResult(CallId("call_r_1_0"), "get_weather", "sunny in Paris"),
        ToolResult(CallId("call_r_1_1"), "get_weather", "no such city", is_error=True),
        user_text("And tomorrow?"),
    )
    _send(_developer(recorder), ModelRequest(messages, (WEATHER,)))
    assert recorder.body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Paris and Tokyo?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "I need both cities.", "thought": True},
                {"text": "Checking both."},
                # The signature goes back on the first call of the turn.
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "c2lnLWZj",
                },
                {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo", "units": "c"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "sunny in Paris"}}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "no such city"}}},
                {"text": "And tomorrow?"},
            ],
        },
    ]


def test_a_call_only_turn_and_a_text_only_signed_turn() -> None:
    recorder = Recorder()
    messages: tuple[Item, ...] = (
        user_text("Country?"),
        AssistantMessage((ReasoningPart("", "c2lnLWNhbGw="),)),
        ToolCall(CallId("call_r_1_0"), "get_country", "{}"),
        ToolResult(CallId("call_r_1_0"), "get_country", "Mexico"),
        AssistantMessage((ReasoningPart("", "c2lnLXRleHQ="), TextPart('{"country": "Mexico"}'))),
        user_text("Thanks"),
        AssistantMessage((ReasoningPart("only thinking", "c2lnLWxhc3Q="),)),
        AssistantMessage((ReasoningPart("", "c2lnLWVtcHR5"),)),
        user_text("Bye"),
    )
    _send(_developer(recorder), ModelRequest(messages))
    contents = recorder.body["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_country", "args": {}}, "thoughtSignature": "c2lnLWNhbGw="}],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_country", "response": {"output": "Mexico"}}}],
    }
    # Without calls the signature sits on the turn's last part.
    assert contents[3] == {
        "role": "model",
        "parts": [{"text": '{"country": "Mexico"}', "thoughtSignature": "c2lnLXRleHQ="}],
    }
    assert contents[5] == {
        "role": "model",
        "parts": [
            {"text": "only thinking", "thought": True, "thoughtSignature": "c2lnLWxhc3Q="},
            {"text": "", "thoughtSignature": "c2lnLWVtcHR5"},
        ],
    }


def test_tool_calls_without_an_assistant_message_form_a_turn() -> None:
    recorder = Recorder()
    messages: tuple[Item, ...] = (
        user_text("Go"),
        ToolCall(CallId("a"), "ping", ""),
        ToolCall(CallId("b"), "ping", "not json"),
        ToolResult(CallId("a"), "ping", "pong"),
        ToolResult(CallId("b"), "ping", "pong"),
    )
    _send(_developer(recorder), ModelRequest(messages, (PING,)))
    assert recorder.body["contents"][1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "ping", "args": {}}},
            {"functionCall": {"name": "ping", "args": {}}},
        ],
    }


# -- images -----------------------------------------------------------------------------


def test_images_inline_data_urls_and_dropped_remote_urls() -> None:
    recorder = Recorder()
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    message = UserMessage(
        (
            TextPart("What is this?"),
            ImagePart(data="/9j/4AAQSkZJRgABAQ", media_type="image/jpeg"),
            ImagePart(url=f"data:image/png;base64,{png}"),
            ImagePart(data=png),
            ImagePart(url="https://example.com/cat.png"),
            ImagePart(url="gs://bucket/cat.png", media_type="image/png"),
            ReasoningPart("not sent"),
        )
    )
    _send(_developer(recorder), ModelRequest((message,)))
    assert recorder.body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRgABAQ"}},
                {"inlineData": {"mimeType": "image/png", "data": png}},
                {"inlineData": {"mimeType": "image/png", "data": png}},
            ],
        }
    ]


# -- structured output ------------------------------------------------------------------


def test_a_json_schema_response_format() -> None:
    recorder = Recorder()
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Country": {"type": "string", "enum": ["Mexico", "France"]}},
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"$ref": "#/$defs/Country"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    settings = ModelSettings(response_format=JsonSchema("CityLocation", schema), tool_choice=None)
    _send(_developer(recorder), ModelRequest((user_text("Where?"),), (), settings))
    assert recorder.body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "country": {"type": "string", "enum": ["Mexico", "France"]},
            },
            "required": ["city", "country"],
        },
    }
    assert "tools" not in recorder.body and "toolConfig" not in recorder.body


def test_a_json_object_response_format() -> None:
    recorder = Recorder()
    settings = ModelSettings(response_format=JsonObjectFormat(), tool_choice=ToolChoiceNone())
    _send(_developer(recorder), ModelRequest((user_text("JSON please"),), (), settings))
    assert recorder.body["generationConfig"] == {"responseMimeType": "application/json"}


@pytest.mark.parametrize(
    ("tools", "choice", "named"),
    [
        ((WEATHER,), None, "1 tool(s): get_weather"),
        ((WEATHER, PING), ToolChoiceAuto(), "2 tool(s): get_weather, ping"),
        ((), ToolChoiceRequired(), "tool_choice=ToolChoiceRequired(keep=False)"),
        ((), ToolChoiceNamed("x"), "tool_choice=ToolChoiceNamed(name='x', keep=False)"),
    ],
)
@pytest.mark.parametrize("fmt", [JsonSchema("Out", {"type": "object"}), JsonObjectFormat()])
def test_structured_output_with_function_calling_fails_before_sending(
    tools: tuple[ToolDef, ...], choice: Any, named: str, fmt: Any
) -> None:
    recorder = Recorder()
    request = ModelRequest((user_text("Hi"),), tools, ModelSettings(tool_choice=choice, response_format=fmt))
    with pytest.raises(ModelError) as info:
        _send(_developer(recorder), request)
    assert recorder.requests == []
    failure = info.value.failure
    assert isinstance(failure, OtherModelFailure)
    assert "gcp.gemini gemini-2.5-flash" in failure.message
    assert "structured output" in failure.message and "function calling" in failure.message
    assert named in failure.message
    assert ("'Out'" in failure.message) is isinstance(fmt, JsonSchema)


# -- transports and construction ------------------------------------------------------


def test_non_streaming_uses_generate_content() -> None:
    recorder = Recorder()
    model = _developer(recorder, stream=False)
    events = _send(model, ModelRequest((user_text("Hi"),)))
    assert str(recorder.requests[0].url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert [type(e).__name__ for e in events] == ["TextChunk", "Usage", "Finish"]
    assert not model.capabilities.streaming and _developer(recorder).capabilities.streaming


def test_base_url_headers_and_a_models_prefix() -> None:
    recorder = Recorder()
    model = GeminiModel.developer(
        "models/gemini-2.0-flash",
        api_key="k",
        base_url="https://proxy.example/gemini/v1beta/",
        headers={"x-team": "a"},
        http_client=recorder.client(),
    )
    _send(model, ModelRequest((user_text("Hi"),)))
    request = recorder.requests[0]
    assert (
        str(request.url)
        == "https://proxy.example/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    )
    assert request.headers["x-team"] == "a" and model.model_id == "gemini-2.0-flash"


def test_the_model_protocol() -> None:
    model = GeminiModel.developer("gemini-2.5-flash", api_key="k")
    assert isinstance(model, Model)
    assert model.provider == "gcp.gemini" and model.model_id == "gemini-2.5-flash"
    caps = model.capabilities
    assert (
        caps.tools and caps.parallel_tool_calls and caps.structured_output and caps.reasoning and caps.vision
    )
    assert not caps.audio and not caps.server_managed_state
    assert "AIza" not in repr(GeminiModel.developer("m", api_key="AIza-secret"))


def test_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    _send(
        GeminiModel.from_env("gemini-2.5-flash", http_client=recorder.client()),
        ModelRequest((user_text("a"),)),
    )
    assert recorder.requests[-1].headers["x-goog-api-key"] == "google-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    _send(
        GeminiModel.from_env("gemini-2.5-flash", http_client=recorder.client()),
        ModelRequest((user_text("a"),)),
    )
    assert recorder.requests[-1].headers["x-goog-api-key"] == "gemini-key"
    explicit = GeminiModel("gemini-2.5-flash", api_key="explicit", http_client=recorder.client())
    _send(explicit, ModelRequest((user_text("a"),)))
    assert recorder.requests[-1].headers["x-goog-api-key"] == "explicit"


def test_a_missing_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiModel.from_env("gemini-2.5-flash")
    with pytest.raises(ConfigError, match="model id"):
        GeminiModel.developer("", api_key="k")
    with pytest.raises(ConfigError, match="need project"):
        GeminiModel("gemini-2.5-flash", api_key="k", bearer_token="t")


# -- Vertex AI --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "url"),
    [
        (
            "us-central1",
            "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-central1"
            "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ),
        (
            "global",
            "https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global"
            "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ),
    ],
)
def test_vertex_with_a_static_bearer_token(location: str, url: str) -> None:
    recorder = Recorder()
    model = GeminiModel.vertex(
        "gemini-2.5-flash", "my-proj", location, bearer_token="ya29.static", http_client=recorder.client()
    )
    _send(model, ModelRequest((system_text("S"), user_text("Hi"))))
    request = recorder.requests[0]
    assert str(request.url) == url
    assert request.headers["authorization"] == "Bearer ya29.static"
    assert "x-goog-api-key" not in request.headers
    assert model.provider == "gcp.vertex_ai"
    assert recorder.body["systemInstruction"] == {"parts": [{"text": "S"}]}


def test_vertex_non_streaming() -> None:
    recorder = Recorder()
    model = GeminiModel.vertex(
        "gemini-2.5-pro", "p", "europe-west4", bearer_token="t", stream=False, http_client=recorder.client()
    )
    _send(model, ModelRequest((user_text("Hi"),)))
    assert str(recorder.requests[0].url) == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4"
        "/publishers/google/models/gemini-2.5-pro:generateContent"
    )


def test_vertex_token_providers_sync_and_async_are_called_per_request() -> None:
    recorder = Recorder()
    tokens = iter(["tok-1", "tok-2"])

    def sync_provider() -> str:
        return next(tokens)

    model = GeminiModel.vertex(
        "gemini-2.5-flash", "p", token_provider=sync_provider, http_client=recorder.client()
    )
    _send(model, ModelRequest((user_text("a"),)))
    _send(model, ModelRequest((user_text("b"),)))
    assert [r.headers["authorization"] for r in recorder.requests] == ["Bearer tok-1", "Bearer tok-2"]

    async def async_provider() -> str:
        await anyio.sleep(0)
        return "tok-async"

    model = GeminiModel.vertex(
        "gemini-2.5-flash", "p", token_provider=async_provider, http_client=recorder.client()
    )
    _send(model, ModelRequest((user_text("c"),)))
    assert recorder.requests[-1].headers["authorization"] == "Bearer tok-async"


def test_vertex_works_under_asyncio_too() -> None:
    recorder = Recorder()

    async def provider() -> str:
        return "tok"

    model = GeminiModel.vertex(
        "gemini-2.5-flash", "p", token_provider=provider, http_client=recorder.client()
    )

    async def main() -> list[ModelEvent]:
        return [e async for e in model.invoke(ModelRequest((user_text("a"),)), CancellationToken())]

    events = anyio.run(main, backend="asyncio")
    assert events[0] == TextChunk("ok") and events[-1].reason is FinishReason.STOP  # type: ignore[union-attr]


def test_a_failing_token_provider_is_a_model_error() -> None:
    recorder = Recorder()

    def broken() -> str:
        raise RuntimeError("metadata server unreachable")

    model = GeminiModel.vertex("gemini-2.5-flash", "p", token_provider=broken, http_client=recorder.client())
    with pytest.raises(ModelError, match=r"gcp\.vertex_ai gemini-2\.5-flash: could not get an access token"):
        _send(model, ModelRequest((user_text("a"),)))
    model = GeminiModel.vertex(
        "gemini-2.5-flash", "p", token_provider=lambda: "", http_client=recorder.client()
    )
    with pytest.raises(ModelError, match="not a non-empty str"):
        _send(model, ModelRequest((user_text("a"),)))
    assert recorder.requests == []


def test_vertex_needs_exactly_one_credential() -> None:
    with pytest.raises(ConfigError, match="bearer_token= or token_provider="):
        GeminiModel.vertex("gemini-2.5-flash", "p")
    with pytest.raises(ConfigError, match="not both"):
        GeminiModel.vertex("gemini-2.5-flash", "p", bearer_token="t", token_provider=lambda: "t")


def test_vertex_401_is_reported_with_the_server_message() -> None:
    body = (FIXTURES / "error_401_vertex_unauthenticated.json").read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, headers={"content-type": "application/json"}, stream=Pieces(body))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = GeminiModel.vertex(
        "gemini-2.5-flash", "p", "us-east5", bearer_token="expired", http_client=client
    )
    with pytest.raises(ModelError) as info:
        _send(model, ModelRequest((user_text("a"),)))
    failure = info.value.failure
    assert isinstance(failure, OtherModelFailure) and failure.status == 401
    assert failure.message.startswith(
        "gcp.vertex_ai gemini-2.5-flash: HTTP 401: Request had invalid authentication"
    )


# -- vertex_from_env ----------------------------------------------------------------------


def _clear_google_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_OAUTH_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def test_vertex_from_env_with_an_access_token(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_google_env(monkeypatch)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env")
    recorder = Recorder()
    model = GeminiModel.vertex_from_env("gemini-2.5-flash", http_client=recorder.client())
    _send(model, ModelRequest((user_text("a"),)))
    request = recorder.requests[0]
    assert request.url.host == "aiplatform.googleapis.com"  # the default location is global
    assert request.url.path.startswith("/v1/projects/env-proj/locations/global/")
    assert request.headers["authorization"] == "Bearer ya29.env"

    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "asia-northeast1")
    regional = GeminiModel.vertex_from_env("gemini-2.5-flash", http_client=recorder.client())
    _send(regional, ModelRequest((user_text("a"),)))
    assert recorder.requests[-1].url.host == "asia-northeast1-aiplatform.googleapis.com"


def test_vertex_from_env_without_a_project(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_google_env(monkeypatch)
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env")
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_PROJECT"):
        GeminiModel.vertex_from_env("gemini-2.5-flash")


def test_vertex_from_env_without_a_token_or_google_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_google_env(monkeypatch)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setitem(sys.modules, "google.auth", None)  # makes "import google.auth" fail
    with pytest.raises(ConfigError) as info:
        GeminiModel.vertex_from_env("gemini-2.5-flash")
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in str(info.value) and "google-auth" in str(info.value)


class _FakeCredentials:
    """Stands in for google-auth credentials: invalid until refreshed."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.refreshes: list[object] = []

    @property
    def valid(self) -> bool:
        return self.token is not None

    def refresh(self, request: object) -> None:
        self.refreshes.append(request)
        self.token = f"adc-{len(self.refreshes)}"


def _fake_google_auth(
    monkeypatch: pytest.MonkeyPatch, default: Callable[..., tuple[object, str | None]]
) -> type[Exception]:
    google = types.ModuleType("google")
    auth = types.ModuleType("google.auth")
    exceptions = types.ModuleType("google.auth.exceptions")

    class DefaultCredentialsError(Exception):
        pass

    class TransportError(Exception):
        pass

    exceptions.DefaultCredentialsError = DefaultCredentialsError  # type: ignore[attr-defined]
    exceptions.TransportError = TransportError  # type: ignore[attr-defined]
    auth.default = default  # type: ignore[attr-defined]
    auth.exceptions = exceptions  # type: ignore[attr-defined]
    google.auth = auth  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.auth", auth)
    monkeypatch.setitem(sys.modules, "google.auth.exceptions", exceptions)
    return DefaultCredentialsError


def test_vertex_from_env_with_application_default_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_google_env(monkeypatch)
    credentials = _FakeCredentials()
    scopes_seen: list[object] = []

    def default(scopes: object = None, **kwargs: object) -> tuple[object, str | None]:
        scopes_seen.append(scopes)
        return credentials, "adc-project"

    _fake_google_auth(monkeypatch, default)
    recorder = Recorder()
    model = GeminiModel.vertex_from_env("gemini-2.5-flash", http_client=recorder.client())
    assert scopes_seen == [["https://www.googleapis.com/auth/cloud-platform"]]
    _send(model, ModelRequest((user_text("a"),)))
    _send(model, ModelRequest((user_text("b"),)))
    # Refreshed once (in a worker thread), then reused while valid.
    assert len(credentials.refreshes) == 1
    assert [r.headers["authorization"] for r in recorder.requests] == ["Bearer adc-1", "Bearer adc-1"]
    assert recorder.requests[0].url.path.startswith("/v1/projects/adc-project/locations/global/")
    credentials.token = None  # expired
    _send(model, ModelRequest((user_text("c"),)))
    assert recorder.requests[-1].headers["authorization"] == "Bearer adc-2"


def test_vertex_from_env_when_adc_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_google_env(monkeypatch)
    errors: list[type[Exception]] = []

    def default(scopes: object = None, **kwargs: object) -> tuple[object, str | None]:
        raise errors[0]("Your default credentials were not found.")

    errors.append(_fake_google_auth(monkeypatch, default))
    with pytest.raises(ConfigError, match="no Google Application Default Credentials"):
        GeminiModel.vertex_from_env("gemini-2.5-flash")


def test_real_google_auth_refreshes_over_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """With google-auth installed, ADC user credentials refresh through our httpx transport."""
    pytest.importorskip("google.auth", reason="google-auth (the optional 'vertex' extra) is not installed")
    oauth2 = importlib.import_module("google.oauth2.credentials")
    google_auth = importlib.import_module("google.auth")

    from helikon.providers._gemini_auth import AdcTokenProvider, HttpxAuthRequest

    posted: list[httpx.Request] = []

    def token_endpoint(request: httpx.Request) -> httpx.Response:
        posted.append(request)
        return httpx.Response(
            200, json={"access_token": "ya29.fresh", "expires_in": 3599, "token_type": "Bearer"}
        )

    creds = oauth2.Credentials(
        token=None,
        refresh_token="1//refresh",
        client_id="id.apps.googleusercontent.com",
        client_secret="secret",
        token_uri="https://oauth2.googleapis.com/token",
    )

    def default(scopes: object = None, **kwargs: object) -> tuple[object, str | None]:
        return creds, "real-adc-project"

    monkeypatch.setattr(google_auth, "default", default)
    _clear_google_env(monkeypatch)
    recorder = Recorder()
    model = GeminiModel.vertex_from_env("gemini-2.5-flash", http_client=recorder.client())
    provider = model._token_provider  # the discovered ADC provider
    assert isinstance(provider, AdcTokenProvider)
    provider.request = HttpxAuthRequest(httpx.Client(transport=httpx.MockTransport(token_endpoint)))
    _send(model, ModelRequest((user_text("a"),)))
    assert recorder.requests[0].headers["authorization"] == "Bearer ya29.fresh"
    assert str(posted[0].url) == "https://oauth2.googleapis.com/token"
    assert b"grant_type=refresh_token" in posted[0].content


def test_without_a_client_each_call_opens_and_closes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    gemini_module = importlib.import_module("helikon.providers.gemini")
    recorder = Recorder()
    made: list[httpx.AsyncClient] = []

    def new_client(http_client: httpx.AsyncClient | None) -> httpx.AsyncClient:
        assert http_client is None
        made.append(recorder.client())
        return made[-1]

    monkeypatch.setattr(gemini_module, "new_client", new_client)
    model = GeminiModel.developer("gemini-2.5-flash", api_key="k")
    _send(model, ModelRequest((user_text("a"),)))

    async def first_event_only() -> ModelEvent:
        events = model.invoke(ModelRequest((user_text("b"),)), CancellationToken())
        event = await events.__anext__()
        await events.aclose()  # type: ignore[attr-defined]
        return event

    assert trio.run(first_event_only) == TextChunk("ok")
    assert len(made) == 2 and all(client.is_closed for client in made)
