"""What helikon sends is what the official SDKs' request types accept (issue 32).

A matrix of agent runs — plain text, images (inline and by URL), a tool with
parameters of every shape, a history of tool calls with results and errors,
structured output (from an output type, and a JSON schema strict and not),
sampling settings, a forced tool choice, reasoning/thinking and cache settings,
streamed and not — is run against every provider adapter over an
``httpx.MockTransport`` that keeps each request body (and answers with an error:
only the body matters here). Each body is validated with the official SDK's own
request type: ``openai`` (Chat Completions and Responses), ``anthropic``
(``MessageCreateParams``), ``google-genai`` (its ``Content``/``Tool``/
``ToolConfig``/``GenerationConfig`` models, which forbid unknown fields) and
botocore's Bedrock Runtime service model. The SDKs are test dependencies only.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Literal

import anyio
import httpx
import msgspec
import pytest

from helikon import LlmAgent, tool
from helikon.ids import CallId
from helikon.items import AgentInput, ImagePart, TextPart, ToolCall, ToolResult, UserMessage
from helikon.model import JsonSchema, ModelSettings, ToolChoiceRequired

openai_chat = pytest.importorskip("openai.types.chat.completion_create_params", reason="openai not installed")
openai_responses = pytest.importorskip("openai.types.responses.response_create_params")
anthropic_params = pytest.importorskip(
    "anthropic.types.message_create_params", reason="anthropic not installed"
)
genai = pytest.importorskip("google.genai.types", reason="google-genai not installed")
botocore_session = pytest.importorskip("botocore.session", reason="botocore not installed")
pydantic = pytest.importorskip("pydantic")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


class Place(msgspec.Struct):
    city: str
    country: str | None = None


class Answer(msgspec.Struct):
    city: str
    temperature: float
    tags: list[str]


@tool
async def forecast(
    place: Place,
    days: int,
    unit: Unit,
    detail: Literal["short", "long"] = "short",
    hourly: bool = False,
    fields: list[str] | None = None,
    weights: dict[str, int] | None = None,
    threshold: float | None = None,
) -> str:
    """A forecast.

    Args:
        place: where.
        days: how many days.
        unit: the temperature unit.
        detail: how much to say.
        hourly: hour by hour.
        fields: which fields.
        weights: field weights.
        threshold: an alert threshold.
    """
    return "sunny"


HISTORY = (
    UserMessage((TextPart("Weather in Oslo, and in Atlantis?"),)),
    ToolCall(CallId("call_1"), "forecast", '{"place": {"city": "Oslo"}, "days": 2, "unit": "celsius"}'),
    ToolCall(CallId("call_2"), "forecast", '{"place": {"city": "Atlantis"}, "days": 1, "unit": "celsius"}'),
    ToolResult(CallId("call_1"), "forecast", "sunny"),
    ToolResult(CallId("call_2"), "forecast", "no such place", is_error=True),
)
IMAGE = (
    UserMessage(
        (
            TextPart("What is in these?"),
            ImagePart(data=PNG, media_type="image/png"),
            ImagePart(url="https://example.invalid/cat.png"),
        )
    ),
)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["city", "n"],
    "additionalProperties": False,
}

#: name -> (agent keyword arguments, input items)
CASES: dict[str, tuple[dict[str, Any], tuple[Any, ...]]] = {
    "text": ({"instructions": "Be brief."}, (UserMessage((TextPart("Hi"),)),)),
    "image": ({}, IMAGE),
    "image-inline": (
        {},
        (UserMessage((TextPart("What is it?"), ImagePart(data=PNG, media_type="image/png"))),),
    ),
    "tools": ({"tools": [forecast], "instructions": "Use tools."}, (UserMessage((TextPart("Oslo?"),)),)),
    "tool-history": ({"tools": [forecast]}, HISTORY),
    "structured": ({"output_type": Answer}, (UserMessage((TextPart("Oslo?"),)),)),
    "structured-after-tools": ({"tools": [forecast], "output_type": Answer}, HISTORY),
    "schema-strict": (
        {"settings": ModelSettings(response_format=JsonSchema("result", SCHEMA, strict=True))},
        (UserMessage((TextPart("Oslo?"),)),),
    ),
    "schema-not-strict": (
        {"settings": ModelSettings(response_format=JsonSchema("result", SCHEMA, strict=False))},
        (UserMessage((TextPart("Oslo?"),)),),
    ),
    "sampling": (
        {"settings": ModelSettings(temperature=0.3, max_output_tokens=300)},
        (UserMessage((TextPart("Hi"),)),),
    ),
    "tool-choice": (
        {"tools": [forecast], "settings": ModelSettings(tool_choice=ToolChoiceRequired())},
        (UserMessage((TextPart("Oslo?"),)),),
    ),
}


class Capture:
    """Keeps every request body; answers each with an invalid-request error."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.urls: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(msgspec.json.decode(request.content))
        self.urls.append(str(request.url))
        return httpx.Response(400, json={"error": {"message": "captured", "type": "invalid_request_error"}})

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def bodies_of(make: Callable[[httpx.AsyncClient], Any], case: str) -> list[dict[str, Any]]:
    kwargs, items = CASES[case]
    capture = Capture()
    agent: LlmAgent[None] = LlmAgent(name="conformance", model=make(capture.client()), **kwargs)

    async def go() -> None:
        async for _ in agent.run(None, AgentInput(items)):
            pass

    anyio.run(go)
    assert capture.bodies, f"{case}: no request was sent"
    return capture.bodies


# -- validators ----------------------------------------------------------------------------


def _typed_dict(kind: Any, body: dict[str, Any]) -> None:
    """``body`` against an SDK TypedDict: every key one it declares, every value
    of its declared type (pydantic validates the TypedDict's annotations)."""
    unknown = set(body) - set(kind.__annotations__) - set(getattr(kind, "__optional_keys__", ()))
    assert unknown == set(), f"keys the SDK's request type does not declare: {unknown}"
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = pydantic.TypeAdapter(kind)
    adapter.validate_python(body)


_ADAPTERS: dict[Any, Any] = {}


def valid_openai_chat(body: dict[str, Any]) -> None:
    kind = (
        openai_chat.CompletionCreateParamsStreaming
        if body.get("stream")
        else openai_chat.CompletionCreateParamsNonStreaming
    )
    _typed_dict(kind, body)


def valid_openai_responses(body: dict[str, Any]) -> None:
    kind = (
        openai_responses.ResponseCreateParamsStreaming
        if body.get("stream")
        else openai_responses.ResponseCreateParamsNonStreaming
    )
    _typed_dict(kind, body)


def valid_anthropic(body: dict[str, Any]) -> None:
    from helikon.providers._anthropic_request import sampling_support

    # anthropic>=1 no longer declares temperature/top_p (the API removed them
    # from Claude Opus 4.7 on); families that still take them are sent them,
    # checked here against the API's documented range instead.
    if sampling_support(body["model"]) in ("both", "one"):
        body = dict(body)
        for name in ("temperature", "top_p"):
            value = body.pop(name, None)
            assert value is None or (isinstance(value, float | int) and 0 <= value <= 1), (name, value)
    kind = (
        anthropic_params.MessageCreateParamsStreaming
        if body.get("stream")
        else anthropic_params.MessageCreateParamsNonStreaming
    )
    _typed_dict(kind, body)


#: The Gemini REST body's fields and the google-genai model each must validate as.
GEMINI_FIELDS: dict[str, Callable[[Any], Any]] = {
    "contents": lambda v: [genai.Content.model_validate(c) for c in v],
    "systemInstruction": lambda v: genai.Content.model_validate(v),
    "tools": lambda v: [genai.Tool.model_validate(t) for t in v],
    "toolConfig": lambda v: genai.ToolConfig.model_validate(v),
    "generationConfig": lambda v: genai.GenerationConfig.model_validate(v),
    "safetySettings": lambda v: [genai.SafetySetting.model_validate(s) for s in v],
    "cachedContent": lambda v: pydantic.TypeAdapter(str).validate_python(v),
    "labels": lambda v: pydantic.TypeAdapter(dict[str, str]).validate_python(v),
}


def valid_gemini(body: dict[str, Any]) -> None:
    unknown = set(body) - set(GEMINI_FIELDS)
    assert unknown == set(), f"fields GenerateContentRequest does not have: {unknown}"
    for key, value in body.items():
        GEMINI_FIELDS[key](value)


_BEDROCK: dict[str, Any] = {}


def valid_bedrock(body: dict[str, Any], operation: str = "Converse") -> None:
    from botocore.validate import ParamValidator

    if not _BEDROCK:
        model = botocore_session.get_session().get_service_model("bedrock-runtime")
        _BEDROCK["model"] = model
    shape = _BEDROCK["model"].operation_model(operation).input_shape
    params = {"modelId": "us.anthropic.claude-sonnet-4-20250514-v1:0", **body}
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()


# -- the matrix ----------------------------------------------------------------------------


def _openai_chat(stream: bool, **kw: Any) -> Callable[[httpx.AsyncClient], Any]:
    from helikon.providers.openai import OpenAIModel

    return lambda client: OpenAIModel.chat(
        "gpt-4o-mini", api_key="sk-test", http_client=client, stream=stream, **kw
    )


def _openai_responses(stream: bool, **kw: Any) -> Callable[[httpx.AsyncClient], Any]:
    from helikon.providers.openai import OpenAIModel

    return lambda client: OpenAIModel.responses(
        "gpt-5", api_key="sk-test", http_client=client, stream=stream, **kw
    )


def _anthropic(stream: bool, **kw: Any) -> Callable[[httpx.AsyncClient], Any]:
    from helikon.providers.anthropic import AnthropicModel

    return lambda client: AnthropicModel.messages(
        "claude-sonnet-4-5", api_key="sk-ant-test", http_client=client, stream=stream, **kw
    )


def _gemini(stream: bool, **kw: Any) -> Callable[[httpx.AsyncClient], Any]:
    from helikon.providers.gemini import GeminiModel

    return lambda client: GeminiModel.developer(
        "gemini-2.5-flash", api_key="AIza-test", http_client=client, stream=stream, **kw
    )


def _bedrock(stream: bool, **kw: Any) -> Callable[[httpx.AsyncClient], Any]:
    from helikon.providers.bedrock import AwsCredentials, BedrockModel

    return lambda client: BedrockModel.converse(
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        region="us-east-1",
        credentials=AwsCredentials("AKIDTEST", "test-secret"),
        http_client=client,
        stream=stream,
        **kw,
    )


def _variants() -> dict[str, tuple[Callable[..., Any], dict[str, Any], Callable[[dict[str, Any]], None]]]:
    from helikon.providers.anthropic import CacheStrategy, ExtendedThinking

    return {
        "openai-chat": (_openai_chat, {}, valid_openai_chat),
        "openai-chat-reasoning": (_openai_chat, {"reasoning_effort": "low"}, valid_openai_chat),
        "openai-responses": (_openai_responses, {}, valid_openai_responses),
        "openai-responses-reasoning": (
            _openai_responses,
            {"reasoning_effort": "low", "reasoning_summary": "auto"},
            valid_openai_responses,
        ),
        "anthropic": (_anthropic, {}, valid_anthropic),
        "anthropic-cache": (_anthropic, {"cache": CacheStrategy.SYSTEM_AND_TOOLS}, valid_anthropic),
        "anthropic-thinking": (_anthropic, {"thinking": ExtendedThinking(1024)}, valid_anthropic),
        "gemini": (_gemini, {}, valid_gemini),
        "gemini-thinking": (_gemini, {"thinking_budget": 512, "include_thoughts": True}, valid_gemini),
        "bedrock": (_bedrock, {}, valid_bedrock),
    }


VARIANTS = (
    "openai-chat",
    "openai-chat-reasoning",
    "openai-responses",
    "openai-responses-reasoning",
    "anthropic",
    "anthropic-cache",
    "anthropic-thinking",
    "gemini",
    "gemini-thinking",
    "bedrock",
)


#: Combinations an adapter refuses with a sentence before sending anything.
REFUSED = {("bedrock", "image"): "Bedrock cannot fetch image URLs"}
#: Combinations whose body the installed SDK's request type refuses, with why.
KNOWN: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_request_body_is_one_the_official_sdk_accepts(variant: str, case: str, stream: bool) -> None:
    factory, options, validate = _variants()[variant]
    if (variant, case) in REFUSED:
        with pytest.raises(AssertionError, match="no request was sent"):
            bodies_of(factory(stream, **options), case)
        return
    if (variant, case) in KNOWN:
        pytest.xfail(KNOWN[variant, case])
    try:
        make = factory(stream, **options)
        bodies = bodies_of(make, case)
    except Exception as exc:  # refused at build time: a ConfigError is a sentence, not a bad body
        from helikon.errors import ConfigError

        if isinstance(exc, ConfigError):
            pytest.skip(f"refused at build: {exc}")
        raise
    for body in bodies:
        validate(body)
