"""Converse request bodies: the JSON shapes of the Bedrock Converse API reference
(Message, ContentBlock, ToolConfiguration, InferenceConfiguration), family
detection and family-gated behaviour."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
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
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers._bedrock_request import (
    OUTPUT_TOOL,
    REDACTED_PREFIX,
    ModelFamily,
    Options,
    RequestError,
    build_request,
    detect_family,
)

WEATHER = ToolDef(
    "get_weather",
    "Current weather for a city.",
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"city": {"type": "string", "examples": ["Paris"]}},
        "required": ["city"],
    },
)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()
A, N, L = ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA, ModelFamily.META_LLAMA


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", ModelFamily.ANTHROPIC),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", ModelFamily.ANTHROPIC),
        ("eu.anthropic.claude-sonnet-4-20250514-v1:0", ModelFamily.ANTHROPIC),
        ("apac.anthropic.claude-3-5-sonnet-20240620-v1:0", ModelFamily.ANTHROPIC),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", ModelFamily.ANTHROPIC),
        ("us.amazon.nova-micro-v1:0", ModelFamily.AMAZON_NOVA),
        ("amazon.nova-pro-v1:0", ModelFamily.AMAZON_NOVA),
        ("amazon.titan-text-express-v1", ModelFamily.AMAZON_TITAN),
        ("us.meta.llama3-2-90b-instruct-v1:0", ModelFamily.META_LLAMA),
        ("meta.llama3-70b-instruct-v1:0", ModelFamily.META_LLAMA),
        ("mistral.mistral-large-2407-v1:0", ModelFamily.MISTRAL),
        ("cohere.command-r-plus-v1:0", ModelFamily.COHERE),
        ("openai.gpt-oss-120b-1:0", ModelFamily.OPENAI),
        ("ap.amazon.nova-lite-v1:0", ModelFamily.AMAZON_NOVA),
        ("deepseek.r1-v1:0", ModelFamily.UNKNOWN),
        ("arn:aws:bedrock:us-east-1:123:inference-profile/us.meta.llama4-scout-17b-instruct-v1:0", L),
        ("arn:aws:bedrock:us-east-1:123:application-inference-profile/abc123", ModelFamily.UNKNOWN),
    ],
)
def test_family_detection(model_id: str, family: ModelFamily) -> None:
    assert detect_family(model_id) is family


def test_a_plain_conversation() -> None:
    request = ModelRequest(
        (
            system_text("You are terse."),
            user_text("Hi"),
            AssistantMessage((TextPart("Hello."),)),
            SystemMessage((TextPart("Mind the budget."),)),
            user_text("Weather?"),
        ),
        settings=ModelSettings(temperature=0.2, top_p=0.9, max_output_tokens=256),
    )

    body = build_request(request, N, Options(stop_sequences=("END",))).body

    assert body == {
        "messages": [
            {"role": "user", "content": [{"text": "Hi"}]},
            {"role": "assistant", "content": [{"text": "Hello."}]},
            {"role": "user", "content": [{"text": "Weather?"}]},
        ],
        "system": [{"text": "You are terse."}, {"text": "Mind the budget."}],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]},
    }


def test_tools_and_a_tool_round() -> None:
    request = ModelRequest(
        (
            user_text("Weather in Paris and Rome?"),
            AssistantMessage((TextPart("Checking."),)),
            ToolCall(CallId("tooluse_1"), "get_weather", '{"city": "Paris"}'),
            ToolCall(CallId("tooluse_2"), "get_weather", '{"city": "Rome"}'),
            ToolResult(CallId("tooluse_1"), "get_weather", "sunny"),
            ToolResult(CallId("tooluse_2"), "get_weather", "no such city", is_error=True),
            user_text("Thanks."),
        ),
        tools=(WEATHER,),
        settings=ModelSettings(tool_choice=ToolChoiceAuto()),
    )

    body = build_request(request, A).body

    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}},
                {"toolUse": {"toolUseId": "tooluse_2", "name": "get_weather", "input": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "sunny"}]}},
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "content": [{"text": "no such city"}],
                        "status": "error",
                    }
                },
                {"text": "Thanks."},
            ],
        },
    ]
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
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
        "toolChoice": {"auto": {}},
    }


def test_the_error_status_is_only_sent_to_families_that_accept_it() -> None:
    request = ModelRequest(
        (
            user_text("x"),
            ToolCall(CallId("t1"), "get_weather", "{}"),
            ToolResult(CallId("t1"), "get_weather", "boom", is_error=True),
        ),
        tools=(WEATHER,),
    )

    def result(family: ModelFamily) -> dict[str, object]:
        block: dict[str, object] = build_request(request, family).body["messages"][2]["content"][0][
            "toolResult"
        ]
        return block

    assert result(N)["status"] == "error"
    assert "status" not in result(L)
    assert "status" not in result(ModelFamily.OPENAI)


def test_odd_tool_arguments_still_become_an_object() -> None:
    def sent(arguments: str) -> object:
        request = ModelRequest(
            (user_text("x"), ToolCall(CallId("t"), "get_weather", arguments)), tools=(WEATHER,)
        )
        return build_request(request, A).body["messages"][1]["content"][0]["toolUse"]["input"]

    assert sent("") == {}
    assert sent("[1, 2]") == {"value": [1, 2]}
    assert sent('{"city": ') == {"_raw_arguments": '{"city": '}


@pytest.mark.parametrize(
    ("choice", "family", "expected"),
    [
        (ToolChoiceRequired(), A, {"any": {}}),
        (ToolChoiceNamed("get_weather"), N, {"tool": {"name": "get_weather"}}),
        (ToolChoiceRequired(), L, None),  # Llama cannot be forced: the model decides
        (ToolChoiceNamed("get_weather"), ModelFamily.COHERE, None),
        (None, A, None),
    ],
)
def test_tool_choice(choice: object, family: ModelFamily, expected: object) -> None:
    request = ModelRequest((user_text("x"),), tools=(WEATHER,), settings=ModelSettings(tool_choice=choice))  # type: ignore[arg-type]

    config = build_request(request, family).body["toolConfig"]

    assert config.get("toolChoice") == expected


def test_tool_choice_none_sends_no_tools() -> None:
    request = ModelRequest(
        (user_text("x"),), tools=(WEATHER,), settings=ModelSettings(tool_choice=ToolChoiceNone())
    )

    assert "toolConfig" not in build_request(request, A).body


def test_history_tools_are_declared_when_the_turn_offers_none() -> None:
    request = ModelRequest(
        (
            user_text("x"),
            ToolCall(CallId("t1"), "lookup", "{}"),
            ToolResult(CallId("t1"), "lookup", "42"),
        )
    )

    config = build_request(request, N).body["toolConfig"]

    assert config == {
        "tools": [
            {"toolSpec": {"name": "lookup", "inputSchema": {"json": {"type": "object", "properties": {}}}}}
        ]
    }


def test_images_are_sent_as_bytes() -> None:
    request = ModelRequest(
        (
            UserMessage(
                (
                    TextPart("What is this?"),
                    ImagePart(data=PNG, media_type="image/png"),
                    ImagePart(url=f"data:image/jpeg;base64,{PNG}"),
                    ImagePart(url="s3://bucket/cat.webp"),
                )
            ),
        )
    )

    content = build_request(request, A).body["messages"][0]["content"]

    assert content == [
        {"text": "What is this?"},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"image": {"format": "jpeg", "source": {"bytes": PNG}}},
        {"image": {"format": "webp", "source": {"s3Location": {"uri": "s3://bucket/cat.webp"}}}},
    ]


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (ImagePart(url="https://example.com/cat.png"), "cannot fetch image URLs"),
        (ImagePart(data=PNG, media_type="image/tiff"), "unsupported image media type 'image/tiff'"),
        (ImagePart(data="not base64!", media_type="image/png"), "not valid base64"),
        (ImagePart(), "needs data or a URL"),
    ],
)
def test_images_bedrock_cannot_take_are_refused(part: ImagePart, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        build_request(ModelRequest((UserMessage((part,)),)), A)


def test_reasoning_goes_back_to_anthropic_only() -> None:
    history = (
        user_text("Hi"),
        AssistantMessage(
            (
                ReasoningPart("The user greets me.", signature="sig-1"),
                ReasoningPart("", signature=REDACTED_PREFIX + "RXRr"),
                ReasoningPart("unsigned thought"),
                TextPart("Hello!"),
            )
        ),
        user_text("Again"),
    )

    claude = build_request(ModelRequest(history), A).body["messages"][1]["content"]
    gpt_oss = build_request(ModelRequest(history), ModelFamily.OPENAI).body["messages"][1]["content"]

    assert claude == [
        {"reasoningContent": {"reasoningText": {"text": "The user greets me.", "signature": "sig-1"}}},
        {"reasoningContent": {"redactedContent": "RXRr"}},
        {"reasoningContent": {"reasoningText": {"text": "unsigned thought"}}},
        {"text": "Hello!"},
    ]
    assert gpt_oss == [{"text": "Hello!"}]


SCHEMA: dict[str, Any] = {
    "title": "Verdict",
    "type": "object",
    "properties": {"label": {"type": "string", "format": "hostname"}, "score": {"type": "number"}},
    "required": ["label", "score"],
}


@pytest.mark.parametrize("family", [A, N, ModelFamily.MISTRAL])
def test_structured_output_is_a_forced_tool_for_capable_families(family: ModelFamily) -> None:
    request = ModelRequest(
        (user_text("Judge."),), settings=ModelSettings(response_format=JsonSchema("Verdict", SCHEMA))
    )

    converse = build_request(request, family)

    assert converse.output.tool and not converse.output.wrapped
    (tool,) = converse.body["toolConfig"]["tools"]
    assert tool["toolSpec"]["name"] == OUTPUT_TOOL
    assert tool["toolSpec"]["inputSchema"]["json"] == {
        "title": "Verdict",
        "type": "object",
        "properties": {"label": {"type": "string"}, "score": {"type": "number"}},
        "required": ["label", "score"],
    }
    assert converse.body["toolConfig"]["toolChoice"] == {"tool": {"name": OUTPUT_TOOL}}


@pytest.mark.parametrize(
    "family", [L, ModelFamily.AMAZON_TITAN, ModelFamily.COHERE, ModelFamily.OPENAI, ModelFamily.UNKNOWN]
)
def test_structured_output_degrades_to_text_elsewhere(family: ModelFamily) -> None:
    request = ModelRequest(
        (user_text("Judge."),), settings=ModelSettings(response_format=JsonSchema("Verdict", SCHEMA))
    )

    converse = build_request(request, family)

    assert not converse.output.tool
    assert "toolConfig" not in converse.body


def test_a_non_object_output_schema_is_wrapped() -> None:
    schema: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
    request = ModelRequest(
        (user_text("Primes?"),), settings=ModelSettings(response_format=JsonSchema("P", schema))
    )

    converse = build_request(request, A)

    assert converse.output.wrapped
    assert converse.body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == {
        "type": "object",
        "properties": {"value": schema},
        "required": ["value"],
    }


def test_structured_output_with_thinking_lets_the_model_choose_the_tool() -> None:
    request = ModelRequest(
        (user_text("Judge."),), settings=ModelSettings(response_format=JsonSchema("V", SCHEMA))
    )
    thinking = Options(
        additional_model_request_fields={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )

    body = build_request(request, A, thinking).body

    assert body["toolConfig"]["toolChoice"] == {"auto": {}}
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def test_json_object_format_is_plain_text() -> None:
    request = ModelRequest((user_text("x"),), settings=ModelSettings(response_format=JsonObjectFormat()))

    assert build_request(request, A).body == {"messages": [{"role": "user", "content": [{"text": "x"}]}]}


def test_prompt_caching_adds_cache_points_and_extra_body_is_merged() -> None:
    request = ModelRequest((system_text("Long rules."), user_text("x")), tools=(WEATHER,))
    options = Options(prompt_caching=True, extra_body={"guardrailConfig": {"guardrailIdentifier": "g"}})

    body = build_request(request, A, options).body

    assert body["system"][-1] == {"cachePoint": {"type": "default"}}
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert body["guardrailConfig"] == {"guardrailIdentifier": "g"}
    assert "cachePoint" not in str(build_request(request, L, options).body)
