"""A request's ``instructions`` reach each API's system slot (issue 29).

The loop no longer puts a system message in front of the conversation: it
sends the agent's instructions in ``ModelRequest.instructions``. Every adapter
must send exactly the body it sent before, when the instructions were the
conversation's first system message — byte for byte, for every API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from request_support import IMAGE_MESSAGE, SCHEMA, TOOL

from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    Item,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
    system_text,
    user_text,
)
from helikon.model import ModelRequest, ModelSettings, ToolChoiceRequired, ToolDef
from helikon.providers._bedrock_request import ModelFamily
from helikon.providers._bedrock_request import build_request as bedrock_request
from helikon.providers._gemini_request import Thinking
from helikon.providers._gemini_request import build_body as gemini_body
from helikon.providers.anthropic import AnthropicModel, CacheStrategy
from helikon.providers.openai import OpenAIModel

HISTORY: tuple[Item, ...] = (
    user_text("What is the weather?"),
    AssistantMessage((ReasoningPart("hm", signature="s"), TextPart("Let me look."))),
    ToolCall(CallId("c1"), "lookup", '{"q": "weather"}'),
    ToolResult(CallId("c1"), "lookup", "sunny"),
    system_text("Hooks say: be careful."),
    user_text("And tomorrow?"),
)

#: name -> (messages, tools, settings)
CASES: dict[str, tuple[tuple[Item, ...], tuple[ToolDef, ...], ModelSettings]] = {
    "plain": ((user_text("Hi"),), (), ModelSettings()),
    "history": (HISTORY, (TOOL,), ModelSettings()),
    "forced": (HISTORY, (TOOL,), ModelSettings(tool_choice=ToolChoiceRequired())),
    "structured": (HISTORY, (), ModelSettings(response_format=SCHEMA)),
    "image": (
        (IMAGE_MESSAGE,),
        (),
        ModelSettings(temperature=0.5),
    ),
    "only-system-in-history": ((system_text("Later."), user_text("Hi")), (), ModelSettings()),
}

INSTRUCTIONS = ("You are a careful assistant.\nAnswer briefly.", "", "x" * 300)


def _openai(api: str, **options: Any) -> Callable[[ModelRequest], object]:
    make = OpenAIModel.chat if api == "chat" else OpenAIModel.responses
    return make("gpt-4o", api_key="sk-test", **options).request_body


ADAPTERS: dict[str, Callable[[ModelRequest], object]] = {
    "openai-chat": _openai("chat"),
    "openai-chat-stream": _openai("chat", stream=True),
    "openai-responses": _openai("responses"),
    "anthropic": AnthropicModel.messages("claude-sonnet-4-5", api_key="k").request_body,
    "anthropic-cached": AnthropicModel.messages(
        "claude-sonnet-4-5", api_key="k", cache=CacheStrategy.SYSTEM_TOOLS_AND_HISTORY
    ).request_body,
    "gemini": lambda r: gemini_body(r, Thinking(), "gcp.gemini gemini-2.5-flash"),
    "bedrock-claude": lambda r: bedrock_request(r, ModelFamily.ANTHROPIC).body,
    "bedrock-nova": lambda r: bedrock_request(r, ModelFamily.AMAZON_NOVA).body,
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("instructions", INSTRUCTIONS, ids=["text", "empty", "long"])
def test_instructions_are_sent_as_a_leading_system_message_was(
    adapter: str, case: str, instructions: str
) -> None:
    body_of = ADAPTERS[adapter]
    messages, tools, settings = CASES[case]
    before = ModelRequest((system_text(instructions), *messages), tools, settings)
    after = ModelRequest(messages, tools, settings, instructions)
    assert msgspec.json.encode(body_of(after)) == msgspec.json.encode(body_of(before))


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_no_instructions_sends_no_system_slot(adapter: str) -> None:
    body = msgspec.json.encode(ADAPTERS[adapter](ModelRequest((user_text("Hi"),))))
    assert b"Be brief" not in body
    asked = ModelRequest((user_text("Hi"),), instructions="Be brief")
    assert b"Be brief" in msgspec.json.encode(ADAPTERS[adapter](asked))
