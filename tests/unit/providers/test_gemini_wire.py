"""GeminiModel against response bodies: the real recorded ones in
``../shared/fixtures/provider-wire/gemini/`` (read in place, never copied) and
the ones under ``tests/fixtures/gemini/`` written from Google's API reference.

Every body goes through ``httpx.MockTransport`` in 7-byte pieces, so the SSE
decoder meets every chunk boundary (CRLF pairs split included), exactly as in
live use. Expected values were worked out by reading each file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from helikon.cancel import CancellationToken
from helikon.errors import (
    ContextLengthExceeded,
    ModelError,
    OtherModelFailure,
    RateLimited,
    Refused,
    TransportFailure,
    Unavailable,
)
from helikon.ids import RunId
from helikon.items import user_text
from helikon.loop._aggregate import Response, aggregate
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers.gemini import GeminiModel

REAL = Path(__file__).parents[4] / "shared" / "fixtures" / "provider-wire" / "gemini"
OURS = Path(__file__).parents[2] / "fixtures" / "gemini"

needs_real = pytest.mark.skipif(
    not REAL.is_dir(), reason=f"the recorded provider-wire fixtures are not at {REAL} (../shared is absent)"
)


class Chunked(httpx.AsyncByteStream):
    """A response body delivered in small pieces."""

    def __init__(self, data: bytes, size: int = 7) -> None:
        self.data, self.size = data, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.size):
            yield self.data[start : start + self.size]

    async def aclose(self) -> None:
        pass


def _model(
    body: bytes, *, stream: bool, status: int = 200, headers: dict[str, str] | None = None
) -> GeminiModel:
    content_type = "text/event-stream" if stream else "application/json; charset=UTF-8"

    def handler(request: httpx.Request) -> httpx.Response:
        method = ":streamGenerateContent" if stream else ":generateContent"
        assert request.url.path.endswith(f"/models/gemini-test{method}")
        assert (request.url.params.get("alt") == "sse") is stream
        return httpx.Response(
            status, headers={"content-type": content_type, **(headers or {})}, stream=Chunked(body)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return GeminiModel.developer("gemini-test", api_key="test-key", http_client=client, stream=stream)


def _events(model: GeminiModel) -> list[ModelEvent]:
    async def main() -> list[ModelEvent]:
        return [e async for e in model.invoke(ModelRequest((user_text("hi"),)), CancellationToken())]

    return trio.run(main)


def _play(path: Path, *, status: int = 200, headers: dict[str, str] | None = None) -> list[ModelEvent]:
    return _events(_model(path.read_bytes(), stream=path.suffix == ".sse", status=status, headers=headers))


def _fold(events: list[ModelEvent]) -> Response:
    return aggregate(tuple(events), RunId("r"), 1)


def _failure(path: Path, *, status: int = 200, headers: dict[str, str] | None = None) -> object:
    with pytest.raises(ModelError) as info:
        _play(path, status=status, headers=headers)
    assert "gcp.gemini gemini-test" in str(info.value)
    return info.value.failure


def _tail(events: list[ModelEvent]) -> list[ModelEvent]:
    """The closing events (usage once, then the finish)."""
    assert sum(isinstance(e, Finish) for e in events) == 1 and isinstance(events[-1], Finish)
    assert sum(isinstance(e, Usage) for e in events) <= 1
    return [e for e in events if isinstance(e, Usage | Finish)]


# -- the real recorded bodies ------------------------------------------------------


@needs_real
def test_real_stream_text() -> None:
    events = _play(REAL / "stream_text_gemini-2.0-flash-exp.sse")
    assert [e for e in events if isinstance(e, TextChunk)] == [
        TextChunk("The"),
        TextChunk(" capital of France"),
        TextChunk(" is Paris.\n"),
    ]
    # Usage is cumulative per chunk and changes in the last one: only the last counts.
    assert _tail(events) == [Usage(13, 8, 0, 0), Finish(FinishReason.STOP, "w1peaMz6INOvnvgPgYfPiQY")]


@needs_real
def test_real_stream_single_function_call() -> None:
    events = _play(REAL / "stream_function_call_gemini-2.0-flash.sse")
    assert events[0] == ToolCallChunk(
        index=0, call_id=None, name="get_capital", arguments='{"country":"France"}'
    )
    # finishReason is STOP, but the model asked for a tool.
    assert _tail(events) == [Usage(52, 5, 0, 0), Finish(FinishReason.TOOL_CALLS, "1lpeaMTxIpW1nvgP-O3vwQY")]
    response = _fold(events)
    assert [(c.call_id, c.name, c.arguments) for c in response.calls] == [
        ("call_r_1_0", "get_capital", '{"country":"France"}')
    ]
    assert response.text == "" and response.reasoning == ()


@needs_real
def test_real_stream_thinking() -> None:
    events = _play(REAL / "stream_thinking_gemini-2.5-pro.sse")
    thoughts = [e for e in events if isinstance(e, ReasoningChunk) and e.text]
    assert len(thoughts) == 4 and thoughts[0].text.startswith("**Clarifying User Goals**\n\n")
    assert thoughts[3].text.startswith("**Crafting Safe Instructions**")
    (signed,) = [e for e in events if isinstance(e, ReasoningChunk) and e.signature]
    assert signed.text == "" and len(signed.signature or "") == 6152
    assert (signed.signature or "").startswith("CiIB0e2Kb6Syj1a961EfbWv4")
    # The signature arrives with the first answer part: after the thoughts, before the text.
    assert events.index(signed) == 4 and isinstance(events[5], TextChunk)
    assert _tail(events) == [
        Usage(34, 469 + 787, 0, 787),
        Finish(FinishReason.STOP, "beHBaJfEMIi-qtsP3769-Q8"),
    ]
    response = _fold(events)
    assert response.text.startswith("This is a great question! Safely crossing the street is all about")
    assert response.text.endswith(
        "**stay alert and be predictable**. Always assume a driver might not see you."
    )
    assert len(response.text) == 1938
    (part,) = response.reasoning
    assert len(part.text) == 1575 and part.signature == signed.signature


@needs_real
def test_real_stream_function_call_with_thought_signature() -> None:
    events = _play(REAL / "stream_function_call_thought_signature_gemini-3-pro.sse")
    signature, call = events[0], events[1]
    assert isinstance(signature, ReasoningChunk) and signature.text == ""
    assert (signature.signature or "").startswith("EpwICpkIAXLI2nxl") and len(
        signature.signature or ""
    ) == 1408
    assert call == ToolCallChunk(index=0, call_id=None, name="get_country", arguments="{}")
    # The trailing empty text part creates no text.
    assert not any(isinstance(e, TextChunk) for e in events)
    assert _tail(events) == [
        Usage(29, 10 + 202, 0, 202),
        Finish(FinishReason.TOOL_CALLS, "QUVVadTSNJ6_qtsPvN7J8Q0"),
    ]


@needs_real
def test_real_stream_json_schema() -> None:
    events = _play(REAL / "stream_json_schema_gemini-3-flash.sse")
    response = _fold(events)
    assert response.text == '{\n  "city": "Mexico City",\n  "country": "Mexico"\n} '
    (part,) = response.reasoning
    assert (
        part.text == ""
        and (part.signature or "").startswith("Es4BCssBAQw51sdV")
        and len(part.signature or "") == 280
    )
    # promptTokenCount jumps 59 -> 128 in the last chunk; the last one wins.
    assert _tail(events) == [Usage(128, 21 + 30, 0, 30), Finish(FinishReason.STOP, "hVP6afiZEuitz7IPypuAsQY")]


@needs_real
def test_real_nonstream_parallel_function_calls() -> None:
    events = _play(REAL / "nonstream_parallel_function_calls_gemini-3-flash.json")
    signature = events[0]
    assert isinstance(signature, ReasoningChunk) and (signature.signature or "").startswith(
        "Es8FCswFAXLI2nxF"
    )
    assert events[1:4] == [
        ToolCallChunk(index=0, call_id=None, name="generate_topic", arguments="{}"),
        ToolCallChunk(index=1, call_id=None, name="generate_topic", arguments="{}"),
        ToolCallChunk(index=2, call_id=None, name="generate_topic", arguments="{}"),
    ]
    assert _tail(events) == [
        Usage(83, 30 + 190, 0, 190),
        Finish(FinishReason.TOOL_CALLS, "wOd8abGuO5rgz7IP5tLEGA"),
    ]
    calls = _fold(events).calls
    assert [c.call_id for c in calls] == ["call_r_1_0", "call_r_1_1", "call_r_1_2"]


@needs_real
def test_real_nonstream_json_schema() -> None:
    events = _play(REAL / "nonstream_json_schema_gemini-2.0-flash.json")
    assert events == [
        TextChunk('{\n  "city": "Mexico City",\n  "country": "Mexico"\n}'),
        Usage(8, 20, 0, 0),
        Finish(FinishReason.STOP, "EfsgaZT5JPbXz7IPqtGJkQ8"),
    ]


@needs_real
def test_real_nonstream_cached_content_usage() -> None:
    events = _play(REAL / "nonstream_cached_content_usage_gemini-2.5-flash.json")
    assert events == [
        TextChunk("Paris."),
        Usage(input_tokens=3520, output_tokens=2 + 42, cached_input_tokens=3512, reasoning_tokens=42),
        Finish(FinishReason.STOP, "_VQYaqvRGbW6qtsPg4TDoAg"),
    ]


@needs_real
@pytest.mark.parametrize("stream", [True, False])
def test_real_error_404(stream: bool) -> None:
    body = (REAL / "error_404_model_not_found.json").read_bytes()
    with pytest.raises(ModelError) as info:
        _events(_model(body, stream=stream, status=404))
    failure = info.value.failure
    assert isinstance(failure, OtherModelFailure) and failure.status == 404
    assert "models/gemini-3.6-flahs is not found for API version v1beta" in failure.message
    assert "gcp.gemini gemini-test" in failure.message


@needs_real
def test_every_real_fixture_is_covered() -> None:
    covered = {
        "error_404_model_not_found.json",
        "nonstream_cached_content_usage_gemini-2.5-flash.json",
        "nonstream_json_schema_gemini-2.0-flash.json",
        "nonstream_parallel_function_calls_gemini-3-flash.json",
        "stream_function_call_gemini-2.0-flash.sse",
        "stream_function_call_thought_signature_gemini-3-pro.sse",
        "stream_json_schema_gemini-3-flash.sse",
        "stream_text_gemini-2.0-flash-exp.sse",
        "stream_thinking_gemini-2.5-pro.sse",
    }
    assert {p.name for p in REAL.iterdir()} == covered


# -- our own payloads --------------------------------------------------------------


def test_text_then_parallel_calls_split_across_chunks() -> None:
    events = _play(OURS / "stream_text_parallel_calls.sse")
    assert events[:5] == [
        TextChunk("Let me check "),
        TextChunk("both cities."),
        ReasoningChunk("", "c2lnLXBhcmlz"),
        ToolCallChunk(index=0, name="get_weather", arguments='{"city":"Paris"}'),
        ToolCallChunk(index=1, name="get_weather", arguments='{"city":"Tokyo","units":["c","f"]}'),
    ]
    assert _tail(events) == [Usage(120, 22 + 40, 64, 40), Finish(FinishReason.TOOL_CALLS, "resp-1")]
    response = _fold(events)
    assert response.text == "Let me check both cities." and len(response.calls) == 2


def test_thought_summaries_stream_as_reasoning() -> None:
    events = _play(OURS / "stream_thoughts_text.sse")
    assert events == [
        ReasoningChunk("**Plan**\nAdd the numbers."),
        ReasoningChunk(" 2 + 2 is 4."),
        ReasoningChunk("", "c2lnLWFuc3dlcg=="),
        TextChunk("4"),
        Usage(10, 1 + 31, 0, 31),
        Finish(FinishReason.STOP, "resp-1"),
    ]
    (part,) = _fold(events).reasoning
    assert part.text == "**Plan**\nAdd the numbers. 2 + 2 is 4." and part.signature == "c2lnLWFuc3dlcg=="


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("stream_max_tokens.sse", FinishReason.LENGTH),
        ("stream_safety.sse", FinishReason.CONTENT_FILTER),
        ("stream_malformed_function_call.sse", FinishReason.OTHER),
    ],
)
def test_finish_reasons(name: str, reason: FinishReason) -> None:
    events = _play(OURS / name)
    assert events[-1] == Finish(reason, "resp-1")


def test_vertex_style_nonstream_answer_with_thoughts_and_a_signed_call() -> None:
    events = _play(OURS / "vertex_nonstream_thoughts_call.json")
    assert events == [
        ReasoningChunk("The user wants the time in Paris; call the tool."),
        ReasoningChunk("", "c2lnLXRpbWU="),
        ToolCallChunk(index=0, name="get_time", arguments='{"tz":"Europe/Paris"}'),
        Usage(2100, 12 + 48, 2048, 48),
        Finish(FinishReason.TOOL_CALLS, "vtx-1"),
    ]


def test_a_blocked_prompt_is_refused() -> None:
    failure = _failure(OURS / "stream_prompt_blocked.sse")
    assert isinstance(failure, Refused)
    assert "PROHIBITED_CONTENT" in failure.message and "The prompt was blocked." in failure.message


def test_a_midstream_error_event_is_unavailable_after_the_text_so_far() -> None:
    seen: list[ModelEvent] = []

    async def main() -> None:
        model = _model((OURS / "stream_midstream_error.sse").read_bytes(), stream=True)
        async for event in model.invoke(ModelRequest((user_text("hi"),)), CancellationToken()):
            seen.append(event)

    with pytest.raises(ModelError) as info:
        trio.run(main)
    assert seen == [TextChunk("Partial")]
    assert isinstance(info.value.failure, Unavailable)
    assert (
        "The model is overloaded" in info.value.failure.message and "HTTP 503" in info.value.failure.message
    )


def test_a_midstream_rate_limit_keeps_the_retry_delay() -> None:
    failure = _failure(OURS / "stream_midstream_rate_limited.sse")
    assert isinstance(failure, RateLimited) and failure.retry_after_ms == 38_000
    assert "RESOURCE_EXHAUSTED" in failure.message


def test_a_stream_that_ends_cleanly_without_a_finish_reason_finishes_as_stop() -> None:
    """Compatible proxies send such streams; google-genai reads them (issue 32)."""
    events = _play(OURS / "stream_no_finish.sse")
    assert [e.text for e in events if isinstance(e, TextChunk)] == ["The capital", " of France"]
    assert isinstance(events[-1], Finish) and events[-1].reason is FinishReason.STOP
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.output_tokens == 4


def test_a_stream_with_no_candidate_and_no_finish_reason_is_a_transport_error() -> None:
    body = b'data: {"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}}\n\n'
    with pytest.raises(ModelError) as info:
        _events(_model(body, stream=True))
    assert isinstance(info.value.failure, TransportFailure) and "finishReason" in info.value.failure.message


def test_a_truncated_stream_is_a_transport_error() -> None:
    failure = _failure(OURS / "stream_truncated.sse")
    assert isinstance(failure, TransportFailure) and "cut off" in failure.message


def test_bad_json_in_a_data_line() -> None:
    failure = _failure(OURS / "stream_bad_json.sse")
    assert isinstance(failure, OtherModelFailure) and "malformed JSON" in failure.message


def test_http_429_is_rate_limited_with_retry_after() -> None:
    failure = _failure(OURS / "error_429_resource_exhausted.json", status=429, headers={"retry-after": "7"})
    assert isinstance(failure, RateLimited) and failure.retry_after_ms == 7000
    assert "You exceeded your current quota" in failure.message


def test_http_400_context_length() -> None:
    failure = _failure(OURS / "error_400_context_length.json", status=400)
    assert isinstance(failure, ContextLengthExceeded) and "1048576" in failure.message


def test_http_503_unavailable() -> None:
    failure = _failure(OURS / "error_503_unavailable.json", status=503)
    assert isinstance(failure, Unavailable) and "The model is overloaded" in failure.message


def test_a_bad_non_streamed_body() -> None:
    with pytest.raises(ModelError) as info:
        _events(_model(b"<html>gateway</html>", stream=False))
    assert (
        isinstance(info.value.failure, OtherModelFailure) and "malformed JSON" in info.value.failure.message
    )
    with pytest.raises(ModelError) as info:
        _events(_model(b'{"candidates": []}', stream=False))
    assert "finishReason" in str(info.value)


def test_the_same_events_streamed_or_not() -> None:
    """A non-streamed body that holds what the stream held gives the same events."""
    streamed = _play(OURS / "stream_text_parallel_calls.sse")
    merged = (
        b'{"candidates":[{"content":{"role":"model","parts":[{"text":"Let me check "},'
        b'{"text":"both cities."},'
        b'{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2lnLXBhcmlz"},'
        b'{"functionCall":{"name":"get_weather","args":{"city":"Tokyo","units":["c","f"]}}}]},'
        b'"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":22,'
        b'"thoughtsTokenCount":40,"cachedContentTokenCount":64},"responseId":"resp-1"}'
    )
    assert _events(_model(merged, stream=False)) == streamed


def test_cancellation_ends_the_stream_quietly() -> None:
    cancel = CancellationToken()
    seen: list[ModelEvent] = []

    async def main() -> None:
        model = _model((OURS / "stream_text_parallel_calls.sse").read_bytes(), stream=True)
        async for event in model.invoke(ModelRequest((user_text("hi"),)), cancel):
            seen.append(event)
            cancel.cancel()

    trio.run(main)
    assert seen == [TextChunk("Let me check ")]


def test_a_stream_request_answered_with_a_json_array() -> None:
    """Some gateways drop ``alt=sse`` and return the stream as one JSON array."""
    array = (
        b'[{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],'
        b'"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1}},'
        b'{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP"}],'
        b'"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2},"responseId":"arr"}]'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params.get("alt") == "sse"
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=Chunked(array))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = GeminiModel.developer("gemini-test", api_key="k", http_client=client)
    assert _events(model) == [
        TextChunk("Hel"),
        TextChunk("lo"),
        Usage(4, 2, 0, 0),
        Finish(FinishReason.STOP, "arr"),
    ]
