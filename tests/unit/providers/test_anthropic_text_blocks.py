"""Anthropic answers in several text blocks: the token deltas are exactly the
wire's text, and each block stays its own text part of the message.

The real recording ``stream_thinking_server_tool_code_exec_claude-sonnet-4-6.sse``
(from ``../shared/fixtures/provider-wire/anthropic``) is Claude running its
code-execution server tool: a thinking block, a text block, the server tool's
call and result, then a second text block. The hand-written streams follow the
Messages API's documented SSE format (``content_block_start`` /
``content_block_delta`` / ``content_block_stop``), here with text split into
adjacent blocks as citations split it.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from test_anthropic_support import REAL, REAL_MISSING, Wire, drain, fold, model_on, wire_for

from helikon import LlmAgent, MessageOutput, RunContext, TokenDelta, collect
from helikon.items import AssistantMessage, ReasoningPart, TextPart, text_of, user_text
from helikon.model import ModelRequest, TextBreak, TextChunk
from helikon.providers._anthropic_response import decode_message
from helikon.sessions import MemorySession

HELLO = ModelRequest((user_text("What is 1234 * -347123 + 1.02255?"),))
SERVER_TOOL = "stream_thinking_server_tool_code_exec_claude-sonnet-4-6.sse"
real = pytest.mark.skipif(not REAL.is_dir(), reason=REAL_MISSING)


def wire_texts(body: bytes) -> list[tuple[int, str]]:
    """Every piece of text the SSE body carries, with its block index, read straight off the wire."""
    pieces: list[tuple[int, str]] = []
    for line in body.decode().splitlines():
        if not line.startswith("data:"):
            continue
        data = json.loads(line.removeprefix("data:"))
        block, delta = data.get("content_block", {}), data.get("delta", {})
        if data["type"] == "content_block_start" and block.get("type") == "text" and block["text"]:
            pieces.append((data["index"], block["text"]))
        if data["type"] == "content_block_delta" and delta.get("type") == "text_delta":
            pieces.append((data["index"], delta["text"]))
    return pieces


def by_block(pieces: list[tuple[int, str]]) -> list[str]:
    blocks: dict[int, str] = {}
    for index, text in pieces:
        blocks[index] = blocks.get(index, "") + text
    return [blocks[index] for index in sorted(blocks)]


# -- the real recording ----------------------------------------------------------------------------


@real
def test_a_server_tool_between_two_text_blocks_adds_no_text() -> None:
    body = (REAL / SERVER_TOOL).read_bytes()
    on_wire = wire_texts(body)
    assert sorted({index for index, _ in on_wire}) == [1, 4]  # two text blocks around the server tool

    events = drain(model_on(wire_for(REAL / SERVER_TOOL)), HELLO)

    assert [e.text for e in events if isinstance(e, TextChunk)] == [text for _, text in on_wire]
    assert sum(isinstance(e, TextBreak) for e in events) == 1
    first, second = by_block(on_wire)
    response = fold(events)
    assert response.text_parts == (first, second)
    assert response.text == first + second
    assert first.endswith("right away!") and second.startswith("Following the standard")


@real
def test_the_agent_streams_the_wire_text_and_keeps_two_text_parts() -> None:
    wire = wire_for(REAL / SERVER_TOOL)
    agent: LlmAgent[None] = LlmAgent(name="calc", model=model_on(wire))
    ctx = RunContext.ephemeral(None).with_session(MemorySession())

    result = anyio.run(lambda: collect(agent.run(ctx, "What is 1234 * -347123 + 1.02255?")))

    on_wire = wire_texts(wire.body)
    deltas = [e.text for e in result.events if isinstance(e, TokenDelta)]
    assert deltas == [text for _, text in on_wire]
    (message,) = [e.item for e in result.events if isinstance(e, MessageOutput)]
    reasoning, *texts = message.content
    assert isinstance(reasoning, ReasoningPart)
    assert texts == [TextPart(text) for text in by_block(on_wire)]
    assert result.final_output == "".join(deltas) == text_of(message.content)

    # The next turn sends the two parts back as two text blocks.
    anyio.run(lambda: collect(agent.run(ctx, "Thanks.")))
    sent = wire.sent["messages"][1]
    assert sent["role"] == "assistant"
    assert [b["text"] for b in sent["content"] if b["type"] == "text"] == by_block(on_wire)


# -- hand-written, in the documented SSE format ---------------------------------------------------------


def sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events).encode()


def text_block(index: int, start: str, *deltas: str) -> list[tuple[str, dict[str, Any]]]:
    block = {"type": "text", "text": start}
    return [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
        *(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": d}},
            )
            for d in deltas
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


MESSAGE = {"id": "msg_cited", "type": "message", "role": "assistant", "content": [], "stop_reason": None}
CITED = sse(
    ("message_start", {"type": "message_start", "message": {**MESSAGE, "usage": {"input_tokens": 9}}}),
    *text_block(0, "", "According to the document, "),
    *text_block(1, "the grass ", "is green"),
    *text_block(2, "", ""),  # an empty block: no part of its own
    *text_block(3, "", "."),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
    ("message_stop", {"type": "message_stop"}),
)


def test_adjacent_text_blocks_stay_separate_parts_with_no_text_added() -> None:
    events = drain(model_on(Wire(CITED)), HELLO)

    chunks = [e.text for e in events if isinstance(e, TextChunk)]
    assert chunks == ["According to the document, ", "the grass ", "is green", "."]
    assert fold(events).text_parts == ("According to the document, ", "the grass is green", ".")
    breaks = [i for i, e in enumerate(events) if isinstance(e, TextBreak)]
    assert [type(events[i + 1]) for i in breaks] == [TextChunk, TextChunk]  # each opens a part
    assert len(breaks) == 2


def test_a_whole_message_splits_into_the_same_parts() -> None:
    message = {
        **MESSAGE,
        "content": [
            {"type": "text", "text": "Let me run that."},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "bash_code_execution", "input": {}},
            {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_1", "content": {}},
            {"type": "text", "text": "The answer is 42."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }

    events = decode_message("claude-x", message)

    assert [e for e in events if isinstance(e, TextChunk | TextBreak)] == [
        TextChunk("Let me run that."),
        TextBreak(),
        TextChunk("The answer is 42."),
    ]
    assert fold(events).text_parts == ("Let me run that.", "The answer is 42.")


def test_one_text_block_is_one_part_and_no_break() -> None:
    events = drain(model_on(Wire(sse(*text_block(0, "", "Hi", " there"), ("message_stop", {})))), HELLO)

    assert not any(isinstance(e, TextBreak) for e in events)
    assert fold(events).text_parts == ("Hi there",)


def test_an_assistant_message_with_two_text_parts_reads_as_its_joined_text() -> None:
    message = AssistantMessage((TextPart("Let me run that."), TextPart("The answer is 42.")))

    assert text_of(message.content) == "Let me run that.The answer is 42."
