"""Every real recorded Converse / ConverseStream body parses to the right text,
tool calls, reasoning, usage and finish reason; corrupting or cutting one gives
a clear ModelError; cancelling one ends it quietly."""

from __future__ import annotations

import httpx
import pytest
import trio
from test_bedrock_support import (
    HI,
    NOVA_CONVERSE,
    WIRE,
    collect,
    event_stream,
    failure,
    json_answer,
    model,
    needs_wire,
    summary,
    verify_signature,
)

from helikon.cancel import CancellationToken
from helikon.errors import OtherModelFailure, TransportFailure
from helikon.items import user_text
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers.bedrock import REDACTED_PREFIX

# -- the real recorded streams -------------------------------------------------------


@needs_wire
@pytest.mark.parametrize("size", [7, 1, 65536])
def test_recorded_nova_text_stream(size: int) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == (
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.amazon.nova-micro-v1%3A0/converse-stream"
        )
        assert request.headers["accept"] == "application/vnd.amazon.eventstream"
        verify_signature(request)
        return event_stream((WIRE / "converse_stream_text_nova-micro.bin").read_bytes(), size)

    request = ModelRequest(
        (user_text("What is the capital of France?"),), settings=ModelSettings(temperature=0.0)
    )
    events = collect(model(handler), request)

    assert summary(events) == {
        "text": "The capital of France is Paris. Paris is not only the capital city but also the most "
        "populous city in France, and it is a major center for culture, commerce, fashion, and international "
        "diplomacy. Known for its historical landmarks, such as the Eiffel Tower, the Louvre Museum, and "
        'Notre-Dame Cathedral, Paris is often referred to as "The City of Light" or "The City of Love."',
        "reasoning": [],
        "calls": [],
        "usage": Usage(13, 82, 0, 0),
        "finish": FinishReason.STOP,
    }
    assert sum(isinstance(e, TextChunk) for e in events) == 29  # streamed as it came, one chunk per delta


@needs_wire
def test_recorded_nova_text_then_tool_use_stream() -> None:
    events = collect(
        model(lambda r: event_stream((WIRE / "converse_stream_text_tool_use_nova-micro.bin").read_bytes())),
        HI,
    )

    assert summary(events) == {
        "text": "<thinking> To find the temperature of the capital of France, I need to first determine "
        "the capital of France and then get the current temperature in that city. The capital of France is "
        'Paris. I will use the "get_temperature" tool to find the current temperature in Paris.</thinking>\n',
        "reasoning": [],
        "calls": [("tooluse_lAG_zP8QRHmSYOwZzzaCqA", "get_temperature", '{"city":"Paris"}')],
        "usage": Usage(471, 91, 0, 0),
        "finish": FinishReason.TOOL_CALLS,
    }
    (start,) = [e for e in events if isinstance(e, ToolCallChunk) and e.name]
    assert start == ToolCallChunk(index=0, call_id="tooluse_lAG_zP8QRHmSYOwZzzaCqA", name="get_temperature")


CLAUDE_SIGNATURE_HEAD = "Eu0CCkgIBxABGAIqQJDccbDQkr81n7QjZ0Fi43umSvw0"


@needs_wire
def test_recorded_claude_reasoning_stream() -> None:
    events = collect(
        model(
            lambda r: event_stream((WIRE / "converse_stream_reasoning_claude-sonnet-4.bin").read_bytes()),
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
        ),
        HI,
    )

    result = summary(events)
    ((thought, signature),) = result["reasoning"]
    assert thought == (
        'The user has greeted me with a simple "Hello". I should respond in a friendly and welcoming manner. '
        "This is a straightforward greeting, so I'll respond warmly and ask how I can help them today."
    )
    assert (
        signature.startswith(CLAUDE_SIGNATURE_HEAD) and signature.endswith("EYAQ==") and len(signature) == 496
    )
    assert result["text"] == "Hello! It's nice to meet you. How can I help you today?"
    assert (result["usage"], result["finish"], result["calls"]) == (Usage(36, 73), FinishReason.STOP, [])
    assert sum(isinstance(e, ReasoningChunk) for e in events) == 15  # 14 text deltas + the signature


@needs_wire
def test_recorded_redacted_reasoning_stream() -> None:
    events = collect(
        model(
            lambda r: event_stream(
                (WIRE / "converse_stream_redacted_reasoning_claude-3-7-sonnet.bin").read_bytes()
            ),
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        ),
        HI,
    )

    result = summary(events)
    first, second = result["reasoning"]
    assert first[0] == second[0] == ""  # redacted: nothing readable
    assert first[1].startswith(REDACTED_PREFIX + "RXRrRUNrZ0lC") and first[1].endswith("cDhuc0JnQg==")
    assert len(first[1]) == len(REDACTED_PREFIX) + 1080 and len(second[1]) == len(REDACTED_PREFIX) + 752
    assert result["text"].startswith("I notice you've sent what appears to be some kind of command")
    assert result["text"].endswith("What would you like to talk about today?")
    assert (result["usage"], result["finish"]) == (Usage(92, 253), FinishReason.STOP)


@needs_wire
def test_recorded_gpt_oss_stream_skips_the_empty_text_block() -> None:
    events = collect(
        model(
            lambda r: event_stream((WIRE / "converse_stream_reasoning_gpt-oss-120b.bin").read_bytes()),
            "openai.gpt-oss-120b-1:0",
        ),
        HI,
    )

    assert TextChunk("") not in events
    assert summary(events) == {
        "text": "Hello! How can I help you today?",
        "reasoning": [
            (
                'The user just says "Hi". We need to respond appropriately, friendly greeting. No special '
                "instructions. Should be short.",
                None,
            )
        ],
        "calls": [],
        "usage": Usage(70, 43),
        "finish": FinishReason.STOP,
    }


@needs_wire
def test_recorded_converse_text_and_tool_use() -> None:
    handler = json_answer(WIRE / "converse_text_tool_use_nova-micro.json", NOVA_CONVERSE)

    events = collect(model(handler, stream=False), HI)

    assert summary(events) == {
        "text": "<thinking> To determine the capital of France, I can use the provided tool that returns the "
        "capital of a given country. Since the country in question is France, I will use the tool with the "
        'country parameter set to "France". </thinking>\n',
        "reasoning": [],
        "calls": [("tooluse_Ze_bgl9CSqu8aJv7XD-_Dw", "get_capital", '{"country":"France"}')],
        "usage": Usage(426, 66),
        "finish": FinishReason.TOOL_CALLS,
    }


@needs_wire
def test_recorded_converse_claude_reasoning_text_and_tool_use() -> None:
    handler = json_answer(
        WIRE / "converse_reasoning_text_tool_use_claude.json",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse",
    )

    events = collect(model(handler, "us.anthropic.claude-3-7-sonnet-20250219-v1:0", stream=False), HI)

    result = summary(events)
    ((thought, signature),) = result["reasoning"]
    assert thought.startswith("The user is asking for the largest city in their country.")
    assert signature.startswith("ErcBCkgIBhABGAIiQDYN") and signature.endswith(
        "5e3cqHbDQ3QF5dR4PP5q+3K23pual3pUdT/0e7khyIxXkGAI="
    )
    assert result["text"] == "I'll need to check what country you're from to answer that question."
    assert result["calls"] == [("tooluse_W9DaUFg4Tj2cRPpndqxWSg", "get_user_country", "{}")]
    assert (result["usage"], result["finish"]) == (Usage(397, 130, 0, 0), FinishReason.TOOL_CALLS)


@needs_wire
def test_recorded_converse_max_tokens() -> None:
    events = collect(
        model(json_answer(WIRE / "converse_max_tokens_nova.json", NOVA_CONVERSE), stream=False), HI
    )

    assert summary(events) == {
        "text": "The capital of France is",
        "reasoning": [],
        "calls": [],
        "usage": Usage(13, 5),
        "finish": FinishReason.LENGTH,
    }


@needs_wire
def test_recorded_converse_cache_read_usage() -> None:
    handler = json_answer(
        WIRE / "converse_cache_read_usage_claude-sonnet-4-5.json",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
    )

    events = collect(model(handler, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", stream=False), HI)

    # inputTokens (2) excludes the 1322 cached tokens; totalTokens 1329 = 2 + 1322 + 5.
    assert summary(events)["usage"] == Usage(input_tokens=1324, output_tokens=5, cached_input_tokens=1322)
    assert summary(events)["text"] == "21"
    assert summary(events)["usage"].total_tokens == 1329


@needs_wire
def test_recorded_400_before_streaming() -> None:
    body = (WIRE / "error_400_converse_stream_invalid_model.json").read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/converse-stream")
        return httpx.Response(400, headers={"content-type": "application/json"}, content=body)

    found, seen = failure(model(handler, "us.does-not-exist-model-v1:0"), HI)

    assert found == OtherModelFailure(
        "aws.bedrock us.does-not-exist-model-v1:0: HTTP 400: The provided model identifier is invalid.", 400
    )
    assert seen == []


# -- malformed streams ---------------------------------------------------------------------


@needs_wire
def test_a_wrong_crc_mid_stream_is_a_clear_error_after_the_good_frames() -> None:
    data = bytearray((WIRE / "converse_stream_text_nova-micro.bin").read_bytes())
    data[len(data) // 2] ^= 0x40

    found, seen = failure(model(lambda r: event_stream(bytes(data))), HI)

    assert isinstance(found, TransportFailure)
    assert "aws.bedrock us.amazon.nova-micro-v1:0: corrupt event stream" in found.message
    assert "CRC mismatch" in found.message
    assert any(isinstance(e, TextChunk) for e in seen) and not any(isinstance(e, Finish) for e in seen)


@needs_wire
def test_a_stream_cut_inside_a_frame() -> None:
    data = (WIRE / "converse_stream_text_nova-micro.bin").read_bytes()[:-30]

    found, _ = failure(model(lambda r: event_stream(data)), HI)

    assert isinstance(found, TransportFailure) and "ended inside a frame" in found.message


# -- cancellation ---------------------------------------------------------------------------------


@needs_wire
def test_cancelling_mid_stream_ends_it_quietly() -> None:
    data = (WIRE / "converse_stream_text_nova-micro.bin").read_bytes()
    m = model(lambda r: event_stream(data))
    cancel = CancellationToken()

    async def main() -> list[ModelEvent]:
        seen: list[ModelEvent] = []
        async for event in m.invoke(HI, cancel):
            seen.append(event)
            cancel.cancel()
        return seen

    seen = trio.run(main)

    assert 1 <= len(seen) < 5
    assert not any(isinstance(e, Finish) for e in seen)


@needs_wire
def test_a_passed_deadline_ends_the_call_quietly() -> None:
    data = (WIRE / "converse_stream_text_nova-micro.bin").read_bytes()

    events = collect(model(lambda r: event_stream(data)), HI, CancellationToken(deadline=-1e9))

    assert events == []
