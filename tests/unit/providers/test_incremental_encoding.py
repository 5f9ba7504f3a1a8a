"""Adapters encode a long conversation incrementally, byte for byte (issue 29).

Each OpenAI (Chat Completions, Responses), Anthropic, Gemini and Bedrock
(Converse) model keeps the
encoded wire messages of the conversations it was asked about and encodes
only what a turn added. What ``invoke`` sends (captured over an
``httpx.MockTransport``) must equal, at every turn, the body encoded from
scratch (``request_body``), and the work per turn must not grow with the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from request_support import IMAGE_MESSAGE, SCHEMA, TOOL

from helikon.cancel import CancellationToken
from helikon.errors import ModelError
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
from helikon.model import ModelRequest, ModelSettings
from helikon.providers import _bedrock_request as bedrock_wire
from helikon.providers import _gemini_request as gemini_wire
from helikon.providers._incremental import Converted, MessageCache, http_json
from helikon.providers.anthropic import AnthropicModel, CacheStrategy
from helikon.providers.bedrock import BedrockModel
from helikon.providers.gemini import GeminiModel
from helikon.providers.openai import OpenAIModel


def turn(n: int) -> tuple[Item, ...]:
    """What turn ``n`` adds: varied shapes (text, reasoning only, parallel
    calls, an error result, an injected system message, a new user message)."""
    call = ToolCall(CallId(f"c{n}"), "lookup", f'{{"q": "{n}"}}')
    done = ToolResult(CallId(f"c{n}"), "lookup", f"result {n}", is_error=n % 7 == 3)
    match n % 5:
        case 0:
            return (AssistantMessage((TextPart(f"Looking {n}."),)), call, done)
        case 1:
            extra = ToolCall(CallId(f"d{n}"), "lookup", "{}")
            return (call, extra, done, ToolResult(CallId(f"d{n}"), "lookup", ""))
        case 2:
            thought = AssistantMessage((ReasoningPart("hm", signature=f"s{n}"),))
            return (thought, call, done, system_text("Careful."))
        case 3:
            return (AssistantMessage((ReasoningPart("only thinking"),)), user_text(f"And {n}?"))
        case _:
            return (AssistantMessage((TextPart(f"Answer {n}"),)), IMAGE_MESSAGE)


class Capture:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.content)
        return httpx.Response(400, json={"error": {"message": "captured", "type": "invalid_request_error"}})

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def encoded(model: Any, request: ModelRequest) -> bytes:
    """The body encoded from scratch, as the adapter encodes it."""
    if isinstance(model, GeminiModel):
        where = f"{model.provider} {model.model_id}"
        return msgspec.json.encode(gemini_wire.build_body(request, model._thinking, where))
    if isinstance(model, BedrockModel):
        return bedrock_wire.dumps(bedrock_wire.build_request(request, model.family, model._options).body)
    body = model.request_body(request)
    if isinstance(model, AnthropicModel):
        return msgspec.json.encode(body)
    return httpx.Request("POST", "http://localhost/", json=body).content  # what json= sent before


def sent(model: Any, capture: Capture, request: ModelRequest) -> bytes:
    async def go() -> None:
        with pytest.raises(ModelError):
            async for _ in model.invoke(request, CancellationToken()):
                pass

    anyio.run(go)
    return capture.sent[-1]


MAKERS: dict[str, Callable[[httpx.AsyncClient], Any]] = {
    "chat": lambda c: OpenAIModel.chat("gpt-4o", api_key="k", http_client=c),
    "chat-llama.cpp": lambda c: OpenAIModel.chat(
        "m", api_key="k", http_client=c, profile="llama.cpp"
    ),
    "chat-prompted": lambda c: OpenAIModel.chat(
        "gpt-4o", api_key="k", http_client=c, structured_output="prompted"
    ),
    "responses": lambda c: OpenAIModel.responses("gpt-4o", api_key="k", http_client=c),
    "anthropic": lambda c: AnthropicModel.messages("claude-sonnet-4-5", api_key="k", http_client=c),
    "anthropic-cached": lambda c: AnthropicModel.messages(
        "claude-sonnet-4-5", api_key="k", http_client=c, cache=CacheStrategy.SYSTEM_TOOLS_AND_HISTORY
    ),
    "gemini": lambda c: GeminiModel.developer("gemini-2.5-flash", api_key="k", http_client=c),
    "gemini-vertex": lambda c: GeminiModel.vertex(
        "gemini-3-pro", "p", bearer_token="t", http_client=c, stream=False, include_thoughts=True
    ),
    # Reasoning goes back and failed results carry a status (Anthropic on Bedrock)...
    "bedrock-anthropic": lambda c: BedrockModel.converse(
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        api_key="k",
        region="us-east-1",
        http_client=c,
        prompt_caching=True,
    ),
    # ... or neither: an assistant turn of reasoning only is left out (Llama).
    "bedrock-llama": lambda c: BedrockModel.converse(
        "meta.llama3-3-70b-instruct-v1:0", api_key="k", region="us-east-1", http_client=c, stream=False
    ),
}


@pytest.mark.parametrize("adapter", sorted(MAKERS))
def test_what_invoke_sends_is_the_body_encoded_from_scratch_at_every_turn(adapter: str) -> None:
    capture = Capture()
    model = MAKERS[adapter](capture.client())
    conversation: tuple[Item, ...] = (user_text("Start."),)
    other: tuple[Item, ...] = (user_text("Another run."),)
    # Gemini refuses structured output with tools (before sending).
    schema_tools = () if adapter.startswith("gemini") else (TOOL,)
    for n in range(24):
        # Mid-turn (the conversation ends in the assistant's turn, which the
        # next request extends), then the whole turn.
        partial = ModelRequest((*conversation, *turn(n)[:2]), (TOOL,), instructions="Be brief.")
        assert sent(model, capture, partial) == encoded(model, partial), n
        conversation = (*conversation, *turn(n))
        settings = ModelSettings(response_format=SCHEMA) if n % 6 == 5 else ModelSettings()
        tools = schema_tools if n % 6 == 5 else (TOOL,)
        request = ModelRequest(conversation, tools, settings, "Be brief." if n % 2 else None)
        assert sent(model, capture, request) == encoded(model, request), n
        # A second run on the same model, interleaved, and a run whose history was rewritten.
        other = (*other, *turn(n + 1))
        mixed = ModelRequest(other, (TOOL,))
        assert sent(model, capture, mixed) == encoded(model, mixed), n
    rewritten = ModelRequest((conversation[0], user_text("Summary."), *conversation[-3:]), (TOOL,))
    assert sent(model, capture, rewritten) == encoded(model, rewritten)
    assert any(len(known.parts) > 20 for known in model._messages._known.values())  # parts were reused


def test_each_message_is_converted_about_once_per_run() -> None:
    cache = MessageCache()
    seen: list[int] = []

    def convert(items: Sequence[Item]) -> Converted:
        seen.append(len(items))
        return [(i, {"n": i}) for i in range(len(items))]

    conversation: tuple[Item, ...] = (user_text("go"),)
    for n in range(300):
        conversation = (*conversation, *turn(n))
        parts = cache.messages(conversation, convert)
        assert len(parts) == len(conversation)
    # Each call converts the previous last message again plus what the turn
    # added: linear in the run, not quadratic.
    assert sum(seen) <= 2 * len(conversation), (sum(seen), len(conversation))


@pytest.mark.parametrize(
    "convert",
    [
        gemini_wire._wire_contents,
        lambda items: bedrock_wire.wire_messages(items, bedrock_wire.ModelFamily.ANTHROPIC),
        lambda items: bedrock_wire.wire_messages(items, bedrock_wire.ModelFamily.META_LLAMA),
    ],
    ids=["gemini", "bedrock-anthropic", "bedrock-llama"],
)
def test_gemini_and_bedrock_convert_each_item_about_once_per_run(
    convert: Callable[[Sequence[Item]], Converted],
) -> None:
    cache = MessageCache()
    seen: list[int] = []

    def counted(items: Sequence[Item]) -> Converted:
        seen.append(len(items))
        return convert(items)

    conversation: tuple[Item, ...] = (user_text("go"),)
    for n in range(300):
        conversation = (*conversation, *turn(n))
        expected = [msgspec.json.encode(m) for _, m in convert(conversation) if m is not None]
        got = cache.messages(conversation, counted)
        assert [bytes(p) if type(p) is msgspec.Raw else msgspec.json.encode(p) for p in got] == expected
    # Each request converts its last message again plus what the turn added.
    assert sum(seen) <= 3 * len(conversation), (sum(seen), len(conversation))


def test_a_bedrock_message_left_empty_still_parts_its_neighbours() -> None:
    """An assistant turn with nothing Converse can carry is not sent, yet the
    user turns around it stay two messages (as before the cache): the wire
    message is None, not dropped from the conversion."""
    items: tuple[Item, ...] = (
        user_text("a"),
        AssistantMessage((ReasoningPart("unsigned"),)),
        user_text("b"),
    )
    request = ModelRequest(items)
    llama = bedrock_wire.ModelFamily.META_LLAMA
    whole = bedrock_wire.build_request(request, llama).body
    assert [m["content"] for m in whole["messages"]] == [[{"text": "a"}], [{"text": "b"}]]
    cache = MessageCache()
    for end in range(1, len(items) + 1):
        part = ModelRequest(items[:end])
        body = bedrock_wire.build_request(part, llama, cache=cache).body
        assert bedrock_wire.dumps(body) == bedrock_wire.dumps(bedrock_wire.build_request(part, llama).body)


def test_a_cache_remembers_a_bounded_number_of_conversations() -> None:
    cache = MessageCache(limit=3)
    for n in range(10):
        cache.messages((user_text(f"run {n}"),), lambda items: [(0, {"n": 0})])
    assert len(cache._known) == 3


@pytest.mark.parametrize(
    "value",
    [
        {"a": "caf\u00e9 \u2028 \U0001f600", "b": [0.1, 1e16, 1e-7, -0.0, 12345678901234567890]},
        {"c": "quote \" backslash \\ tab \t newline \n nul \x00 del \x7f"},
        [None, True, False, {}, [], ""],
    ],
)
def test_parts_are_encoded_as_httpx_encodes_json(value: Any) -> None:
    assert http_json(value) == httpx.Request("POST", "http://localhost/", json=value).content
