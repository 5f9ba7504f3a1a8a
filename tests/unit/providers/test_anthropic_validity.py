"""Anthropic requests the current Messages API accepts (issue 32, items 1-3):
tools re-declared on a structured turn over tool history, output schemas in
the API's subset, sampling and thinking settings reconciled."""

from __future__ import annotations

import pytest
from test_anthropic_request import reply, sent
from test_anthropic_support import drain, model_on

from helikon import LlmAgent
from helikon.errors import ConfigError, ModelError
from helikon.ids import CallId
from helikon.items import ToolCall, ToolResult, user_text
from helikon.model import (
    JsonSchema,
    ModelRequest,
    ModelSettings,
    ToolChoiceNamed,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers._anthropic_schema import output_schema
from helikon.providers.anthropic import AnthropicModel, ExtendedThinking, StructuredOutputMode

HISTORY = (
    user_text("weather in Oslo, as JSON"),
    ToolCall(CallId("toolu_1"), "weather", '{"city": "Oslo"}'),
    ToolResult(CallId("toolu_1"), "weather", "sunny"),
)
CITY = JsonSchema(
    "City", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
)


def test_a_structured_turn_over_tool_history_declares_the_history_tools_and_calls_none() -> None:
    body = sent(ModelRequest(HISTORY, (), ModelSettings(response_format=CITY)))
    assert [t["name"] for t in body["tools"]] == ["weather"]
    assert body["tool_choice"] == {"type": "none"}
    assert "output_config" in body


def test_the_tool_mode_structured_turn_keeps_forcing_its_output_tool() -> None:
    body = sent(ModelRequest(HISTORY, (), ModelSettings(response_format=CITY)),
                structured_output=StructuredOutputMode.TOOL)
    assert sorted(t["name"] for t in body["tools"]) == ["helikon_structured_output", "weather"]
    assert body["tool_choice"]["type"] == "tool"


def test_a_turn_with_its_own_tools_declares_only_missing_history_tools() -> None:
    other = ToolDef("other", "Other.", {"type": "object", "properties": {}})
    body = sent(ModelRequest(HISTORY, (other,)))
    assert [t["name"] for t in body["tools"]] == ["other", "weather"]
    assert "tool_choice" not in body


def test_a_plain_request_has_no_tools() -> None:
    assert "tools" not in sent(ModelRequest((user_text("hi"),)))


def test_output_schemas_move_unsupported_constraints_into_descriptions_and_close_objects() -> None:
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "maxLength": 3, "description": "IATA"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5, "minItems": 2},
            "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["age", "code", "tags", "scores", "when"],
    }
    body = sent(ModelRequest((user_text("x"),), (), ModelSettings(response_format=JsonSchema("P", schema))))
    out = body["output_config"]["format"]["schema"]
    props = out["properties"]
    assert out["additionalProperties"] is False
    assert props["age"] == {"type": "integer", "description": "{minimum: 0, maximum: 150}"}
    assert props["code"]["description"] == "IATA\n\n{pattern: ^[A-Z]{3}$, maxLength: 3}"
    assert "pattern" not in props["code"] and "maxLength" not in props["code"]
    assert "maxItems" not in props["tags"] and "minItems" not in props["tags"]
    assert props["scores"]["additionalProperties"] is False
    assert "additionalProperties: {type: integer}" in props["scores"]["description"]
    assert props["when"]["format"] == "date-time"
    # the caller's schema is untouched (the loop validates against it)
    assert schema["properties"]["age"]["minimum"] == 0


def test_nested_definitions_and_unions_are_rewritten_too() -> None:
    schema = {"$defs": {"N": {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}}},
              "anyOf": [{"$ref": "#/$defs/N"}, {"type": "string", "minLength": 1}]}
    out = output_schema(schema)
    assert out["$defs"]["N"]["additionalProperties"] is False
    assert out["$defs"]["N"]["properties"]["n"] == {"type": "number", "description": "{multipleOf: 2}"}
    assert out["anyOf"][1] == {"type": "string", "description": "{minLength: 1}"}


def test_temperature_and_top_p_together_are_refused_for_current_models_at_build() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="k")
    with pytest.raises(ConfigError, match="temperature or top_p, not both"):
        LlmAgent(name="a", model=model, settings=ModelSettings(temperature=0.2, top_p=0.9))
    LlmAgent(name="a", model=AnthropicModel("claude-3-5-haiku-latest", api_key="k"),
             settings=ModelSettings(temperature=0.2, top_p=0.9))


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (ModelSettings(temperature=0.5), "does not take a temperature"),
        (ModelSettings(top_p=0.5), "top_p between 0.95 and 1"),
        (ModelSettings(tool_choice=ToolChoiceRequired()), "cannot force a tool"),
        (ModelSettings(tool_choice=ToolChoiceNamed("weather")), "cannot force a tool"),
    ],
)
def test_thinking_settings_that_never_work_are_refused_at_build_and_at_request(
    settings: ModelSettings, words: str
) -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", thinking=ExtendedThinking(2048))
    with pytest.raises(ConfigError, match=words):
        LlmAgent(name="a", model=model, settings=settings)
    weather = ToolDef("weather", "W.", {"type": "object", "properties": {}})
    with pytest.raises(ModelError, match=words):
        drain(model_on(reply(), thinking=ExtendedThinking(2048)),
              ModelRequest((user_text("x"),), (weather,), settings))


def test_a_thinking_budget_above_max_output_tokens_gets_room_for_the_answer() -> None:
    body = sent(ModelRequest((user_text("x"),), (), ModelSettings(max_output_tokens=512)),
                thinking=ExtendedThinking(2048))
    assert body["thinking"]["budget_tokens"] == 2048 and body["max_tokens"] == 2048 + 512



@pytest.mark.parametrize("model_id", ["claude-opus-4-7", "claude-opus-4-8-20260601", "claude-fable-5-1",
                                      "claude-mythos-5", "claude-opus-5"])
@pytest.mark.parametrize("settings", [ModelSettings(temperature=0.0), ModelSettings(top_p=0.9),
                                      ModelSettings(temperature=1.0)])
def test_models_without_sampling_settings_refuse_any_at_build(model_id: str, settings: ModelSettings) -> None:
    # The API answers 400 "`temperature` is deprecated for this model" from Opus 4.7 on.
    with pytest.raises(ConfigError, match="takes no temperature or top_p"):
        LlmAgent(name="a", model=AnthropicModel(model_id, api_key="k"), settings=settings)
    LlmAgent(name="a", model=AnthropicModel(model_id, api_key="k"))  # unset is fine


def test_models_that_take_only_default_sampling_refuse_others_and_are_sent_none() -> None:
    model = AnthropicModel("claude-sonnet-5", api_key="k")
    with pytest.raises(ConfigError, match="only the default temperature"):
        LlmAgent(name="a", model=model, settings=ModelSettings(temperature=0.2))
    LlmAgent(name="a", model=model, settings=ModelSettings(temperature=1.0))
    body = sent(ModelRequest((user_text("x"),), (), ModelSettings(temperature=1.0, top_p=1.0)),
                model_id="claude-sonnet-5")
    assert "temperature" not in body and "top_p" not in body


@pytest.mark.parametrize(("model_id", "sent_keys"), [
    ("claude-sonnet-4-6", {"temperature"}),
    ("claude-haiku-4-5", {"temperature"}),
    ("claude-3-7-sonnet-latest", {"temperature"}),
])
def test_families_that_still_sample_are_sent_what_was_set(model_id: str, sent_keys: set[str]) -> None:
    body = sent(ModelRequest((user_text("x"),), (), ModelSettings(temperature=0.3)), model_id=model_id)
    assert {k for k in ("temperature", "top_p") if k in body} == sent_keys and body["temperature"] == 0.3


def test_claude_on_bedrock_follows_the_same_family_rule() -> None:
    from helikon.providers.bedrock import AwsCredentials, BedrockModel

    creds = AwsCredentials("AKIDTEST", "secret")
    late = BedrockModel("us.anthropic.claude-opus-4-7-v1:0", region="us-east-1", credentials=creds)
    with pytest.raises(ConfigError, match="takes no temperature or top_p"):
        LlmAgent(name="a", model=late, settings=ModelSettings(temperature=0.2))
    both = BedrockModel("us.anthropic.claude-sonnet-4-5-20250929-v1:0", region="us-east-1", credentials=creds)
    with pytest.raises(ConfigError, match="not both"):
        LlmAgent(name="a", model=both, settings=ModelSettings(temperature=0.2, top_p=0.5))
    nova = BedrockModel("amazon.nova-pro-v1:0", region="us-east-1", credentials=creds)
    LlmAgent(name="a", model=nova, settings=ModelSettings(temperature=0.2, top_p=0.5))
