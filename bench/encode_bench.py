"""Provider request encoding over a long run (issue 29, item 5).

A run of N tool rounds asks its model N times, each time with the whole
conversation so far. This measures, per model call, the CPU time to turn the
request into the bytes sent — early in the run (turns 1-50) and late in it
(the last 50 turns) — for the OpenAI (Chat Completions and Responses),
Anthropic, Gemini and Bedrock (Converse) adapters, two ways: encoding every body from scratch
(``request_body`` then the adapter's JSON encoding: what each call paid
before) and incrementally (the adapters' own path: each wire message is
encoded once per run, the body assembled from the encoded parts). Both give
the same bytes (checked).

Usage: ``python bench/encode_bench.py [--turns N]``; prints JSON lines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # first: telemetry env and network guard
import msgspec

from helikon.ids import CallId
from helikon.items import AssistantMessage, Item, TextPart, ToolCall, ToolResult, user_text
from helikon.model import ModelRequest, ToolDef
from helikon.providers import _anthropic_request as anthropic_wire
from helikon.providers import _bedrock_request as bedrock_wire
from helikon.providers import _gemini_request as gemini_wire
from helikon.providers import _openai_chat as chat_wire
from helikon.providers import _openai_responses as responses_wire
from helikon.providers._incremental import MessageCache, http_json, http_json_body
from helikon.providers.anthropic import AnthropicModel
from helikon.providers.bedrock import BedrockModel
from helikon.providers.gemini import GeminiModel
from helikon.providers.openai import OpenAIModel

TOOL = ToolDef("lookup", "Look a thing up.", {"type": "object", "properties": {"q": {"type": "string"}}})


def conversations(turns: int) -> list[tuple[Item, ...]]:
    """The conversation at each model call of a run of ``turns`` rounds."""
    out: list[tuple[Item, ...]] = []
    items: tuple[Item, ...] = (user_text("Research the question, one lookup at a time."),)
    for n in range(turns):
        out.append(items)
        items = (
            *items,
            AssistantMessage((TextPart(f"Step {n}: looking it up."),)),
            ToolCall(CallId(f"call_{n}"), "lookup", f'{{"q": "topic {n}"}}'),
            ToolResult(CallId(f"call_{n}"), "lookup", f"Result {n}: " + "some text " * 20),
        )
    return out


Encode = Callable[[ModelRequest], bytes]


def timed(encode: Encode, requests: list[ModelRequest]) -> tuple[list[float], list[bytes]]:
    times, bodies = [], []
    for request in requests:
        t0 = time.process_time()
        bodies.append(encode(request))
        times.append(time.process_time() - t0)
    return times, bodies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    requests = [ModelRequest(c, (TOOL,), instructions="Be thorough.") for c in conversations(args.turns)]

    openai_chat = OpenAIModel.chat("gpt-4o", api_key="k")
    openai_responses = OpenAIModel.responses("gpt-4o", api_key="k")
    anthropic = AnthropicModel.messages("claude-sonnet-4-5", api_key="k")
    chat_config = openai_chat._config
    responses_config = openai_responses._config
    options = anthropic._options
    gemini = GeminiModel.developer("gemini-2.5-flash", api_key="k")
    thinking, where = gemini._thinking, "gcp.gemini gemini-2.5-flash"
    bedrock_id = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    bedrock = BedrockModel.converse(bedrock_id, api_key="k", region="us-east-1")
    family, bedrock_options = bedrock.family, bedrock._options

    def fresh_cache(**kw: Any) -> MessageCache:
        return MessageCache(**kw)

    adapters: dict[str, tuple[Encode, Callable[[], Encode]]] = {
        "openai_chat": (
            lambda r: http_json(chat_wire.chat_body(r, chat_config)),
            lambda: (
                lambda cache: lambda r: http_json_body(chat_wire.chat_body(r, chat_config, cache), "messages")
            )(fresh_cache(encode=http_json)),
        ),
        "openai_responses": (
            lambda r: http_json(responses_wire.responses_body(r, responses_config)),
            lambda: (
                lambda cache: lambda r: http_json_body(
                    responses_wire.responses_body(r, responses_config, cache), "input"
                )
            )(fresh_cache(encode=http_json)),
        ),
        "anthropic": (
            lambda r: msgspec.json.encode(anthropic_wire.build_body(r, options)),
            lambda: (
                lambda cache: lambda r: msgspec.json.encode(anthropic_wire.build_body(r, options, cache))
            )(fresh_cache()),
        ),
        "gemini": (
            lambda r: msgspec.json.encode(gemini_wire.build_body(r, thinking, where)),
            lambda: (
                lambda cache: lambda r: msgspec.json.encode(gemini_wire.build_body(r, thinking, where, cache))
            )(fresh_cache()),
        ),
        "bedrock": (
            lambda r: bedrock_wire.dumps(bedrock_wire.build_request(r, family, bedrock_options).body),
            lambda: (
                lambda cache: lambda r: bedrock_wire.dumps(
                    bedrock_wire.build_request(r, family, bedrock_options, cache).body
                )
            )(fresh_cache()),
        ),
    }
    window = min(50, args.turns // 4)
    for name, (whole, make_incremental) in adapters.items():
        before, expected = timed(whole, requests)
        after, got = timed(make_incremental(), requests)
        C.check(got == expected, f"{name}: incremental bodies equal the bodies encoded whole")
        rows = {
            "whole": (statistics.median(before[:window]), statistics.median(before[-window:])),
            "incremental": (statistics.median(after[:window]), statistics.median(after[-window:])),
        }
        for how, (early, late) in rows.items():
            C.emit(
                "helikon",
                f"encode_{name}",
                f"{how}_us_per_call_late",
                round(late * 1e6, 1),
                "us",
                turns=args.turns,
                early_us=round(early * 1e6, 1),
                late_over_early=round(late / early, 2) if early else None,
                body_bytes_last=len(expected[-1]),
            )


if __name__ == "__main__":
    main()
