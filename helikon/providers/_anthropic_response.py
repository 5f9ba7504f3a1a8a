"""Turn Messages API responses (streamed events or one JSON message) into
model events.

Pure: the adapter decodes the wire (SSE, JSON) and feeds parsed objects in.
The rules it owns:

- ``text`` blocks stream as :class:`TextChunk`, carrying exactly the wire's
  text. Each text block is one text part of the message: between two blocks
  that both have text (the API splits text around citations, and around
  server tool calls and their results) a :class:`TextBreak` is sent, and
  nothing is added to the text itself.
- ``thinking`` blocks stream as :class:`ReasoningChunk`; the block's
  signature (``signature_delta``) is sent when the block stops, as a
  ``ReasoningChunk("", signature)`` that closes the reasoning part (a block
  that stopped without one is closed with ``signature=""``).
- ``redacted_thinking`` blocks arrive whole: one ``ReasoningChunk("",
  "redacted:<data>")``.
- ``tool_use`` blocks become :class:`ToolCallChunk` s numbered 0, 1, 2, ... in
  order of appearance; ``input_json_delta`` fragments are the arguments. A
  call whose input never streamed gets its start input (or ``{}``) when the
  block stops, so arguments are always a JSON object's text.
- Server tool blocks (``server_tool_use``, ``web_search_tool_result``,
  ``bash_code_execution_tool_result``, ...) are the API's own business: they
  are not client tool calls and are skipped, as are ``ping``, unknown events
  and unknown delta types (the API's versioning policy says new ones come).
- Usage: ``message_delta`` counts are cumulative and override
  ``message_start``'s; one :class:`Usage` is emitted before the
  :class:`Finish`, with ``input_tokens = input + cache_read + cache_creation``
  and ``cached_input_tokens = cache_read`` (Anthropic's ``input_tokens``
  excludes both). Anthropic does not report thinking tokens apart from
  ``output_tokens``, so ``reasoning_tokens`` stays 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import msgspec

from helikon.errors import ModelError
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers._anthropic_settings import OUTPUT_TOOL_NAME, REDACTED_PREFIX
from helikon.providers._http import classify

PROVIDER: Final = "anthropic"

#: ``stop_reason`` values and what they mean here.
STOP_REASONS: Final[Mapping[str, FinishReason]] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
    "pause_turn": FinishReason.OTHER,
}

_USAGE_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def finish_reason(stop_reason: object) -> FinishReason:
    """The :class:`FinishReason` of an API ``stop_reason``.

    >>> finish_reason("end_turn"), finish_reason("max_tokens"), finish_reason(None)
    (<FinishReason.STOP: 'stop'>, <FinishReason.LENGTH: 'length'>, <FinishReason.OTHER: 'other'>)
    """
    return (
        STOP_REASONS.get(stop_reason, FinishReason.OTHER)
        if isinstance(stop_reason, str)
        else FinishReason.OTHER
    )


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """The contract's :class:`Usage` from an API ``usage`` object.

    >>> usage_of({"input_tokens": 3, "cache_creation_input_tokens": 418,
    ...           "cache_read_input_tokens": 1111, "output_tokens": 33})
    Usage(input_tokens=1532, output_tokens=33, cached_input_tokens=1111, reasoning_tokens=0, \
cache_creation_input_tokens=418, \
requests=0, tool_calls=0, cost=None)
    """
    read = _count(raw, "cache_read_input_tokens")
    created = _count(raw, "cache_creation_input_tokens")
    return Usage(_count(raw, "input_tokens") + read + created, _count(raw, "output_tokens"), read, 0, created)


def error_from(model_id: str, payload: object) -> ModelError:
    """The :class:`ModelError` for an ``error`` event or error body.

    >>> error_from("claude-x", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
    ModelError('model unavailable: anthropic claude-x: Overloaded (overloaded_error)')
    """
    error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
    kind = message = ""
    if isinstance(error, Mapping):
        kind = str(error.get("type") or "")
        message = str(error.get("message") or "")
    elif error is not None:
        message = str(error)
    text = f"{PROVIDER} {model_id}: {message or 'the server reported an error'}" + (
        f" ({kind})" if kind else ""
    )
    if kind in ("overloaded_error", "api_error"):
        return ModelError.unavailable(text)
    if kind == "rate_limit_error":
        return ModelError.rate_limited(text)
    detail = f"{message} ({kind})" if kind else message or "the server reported an error"
    return classify(PROVIDER, model_id, None, detail)


@attrs.define
class _Block:
    """What the decoder remembers about one open content block."""

    kind: str  # "text" | "thinking" | "call" | "output" | "skip"
    ordinal: int = -1
    signature: list[str] = attrs.field(factory=list)
    streamed: bool = False
    start_input: object = None


@attrs.define
class StreamDecoder:
    """Feed parsed stream events in order; get model events out.

    ``finished`` turns true at ``message_stop``; a stream that ends before
    then was cut off (the adapter reports it).

    >>> d = StreamDecoder("claude-x")
    >>> d.feed("message_start", {"type": "message_start", "message": {"id": "msg_1",
    ...     "usage": {"input_tokens": 5, "output_tokens": 1}}})
    []
    >>> d.feed("content_block_delta", {"type": "content_block_delta", "index": 0,
    ...     "delta": {"type": "text_delta", "text": "Hi"}})
    [TextChunk(text='Hi')]
    >>> d.feed("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
    ...     "usage": {"output_tokens": 2}})
    []
    >>> d.feed("message_stop", {"type": "message_stop"})
    [Usage(input_tokens=5, output_tokens=2, cached_input_tokens=0, reasoning_tokens=0, \
cache_creation_input_tokens=0, \
requests=0, tool_calls=0, cost=None), \
Finish(reason=<FinishReason.STOP: 'stop'>, response_id='msg_1', response_model=None)]
    """

    model_id: str
    output_tool: bool = False
    finished: bool = False
    _blocks: dict[int, _Block] = attrs.field(factory=dict)
    _calls: int = 0
    _message_id: str | None = None
    _model: str | None = None
    _stop_reason: object = None
    _usage: dict[str, int] = attrs.field(factory=dict)
    _output_called: bool = False
    _text_block: int | None = None  # the block the last text came from

    def feed(self, event: str, data: object) -> list[ModelEvent]:
        """The model events for one stream event (``event`` is the SSE event
        name; the payload's own ``type`` wins when present).

        Raises:
            ModelError: an ``error`` event.
        """
        if not isinstance(data, Mapping):
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        match kind:
            case "message_start":
                message = data.get("message")
                if isinstance(message, Mapping):
                    if isinstance(message.get("id"), str):
                        self._message_id = message["id"]
                    if isinstance(message.get("model"), str):
                        self._model = message["model"]
                    self._merge_usage(message.get("usage"))
                return []
            case "content_block_start":
                return self._start(_index(data), data.get("content_block"))
            case "content_block_delta":
                delta = data.get("delta")
                return self._delta(_index(data), delta) if isinstance(delta, Mapping) else []
            case "content_block_stop":
                return self._stop(_index(data))
            case "message_delta":
                delta = data.get("delta")
                if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                    self._stop_reason = delta["stop_reason"]
                self._merge_usage(data.get("usage"))
                return []
            case "message_stop":
                events: list[ModelEvent] = []
                for index in sorted(self._blocks):  # blocks a stream forgot to stop
                    events.extend(self._stop(index))
                self.finished = True
                return [*events, *self.final()]
            case "error":
                raise error_from(self.model_id, data)
            case _:
                return []  # ping, and event types added after this was written

    def final(self) -> list[ModelEvent]:
        """The closing :class:`Usage` and :class:`Finish`."""
        reason = finish_reason(self._stop_reason)
        if self._output_called and reason is FinishReason.TOOL_CALLS and self._calls == 0:
            reason = FinishReason.STOP
        return [usage_of(self._usage), Finish(reason, self._message_id, self._model)]

    def _merge_usage(self, raw: object) -> None:
        if isinstance(raw, Mapping):
            for key in _USAGE_KEYS:
                value = raw.get(key)
                if type(value) is int:
                    self._usage[key] = value

    def _text(self, index: int, text: object) -> list[ModelEvent]:
        if not isinstance(text, str) or not text:
            return []
        new_part = self._text_block is not None and self._text_block != index
        self._text_block = index
        return [TextBreak(), TextChunk(text)] if new_part else [TextChunk(text)]

    def _start(self, index: int, block: object) -> list[ModelEvent]:
        if not isinstance(block, Mapping):
            return []
        match block.get("type"):
            case "text":
                self._blocks[index] = _Block("text")
                return self._text(index, block.get("text"))
            case "thinking":
                state = self._blocks[index] = _Block("thinking")
                signature = block.get("signature")
                if isinstance(signature, str) and signature:
                    state.signature.append(signature)
                text = block.get("thinking")
                return [ReasoningChunk(text)] if isinstance(text, str) and text else []
            case "redacted_thinking":
                self._blocks[index] = _Block("skip")
                data = block.get("data")
                return [ReasoningChunk("", REDACTED_PREFIX + (data if isinstance(data, str) else ""))]
            case "tool_use" if self.output_tool and block.get("name") == OUTPUT_TOOL_NAME:
                self._output_called = True
                self._blocks[index] = _Block("output", start_input=block.get("input"))
                return []
            case "tool_use":
                ordinal, self._calls = self._calls, self._calls + 1
                self._blocks[index] = _Block("call", ordinal, start_input=block.get("input"))
                call_id = block.get("id")
                name = block.get("name")
                return [
                    ToolCallChunk(
                        ordinal,
                        call_id if isinstance(call_id, str) else None,
                        name if isinstance(name, str) else None,
                        "",
                    )
                ]
            case _:
                self._blocks[index] = _Block("skip")  # server tools and their results
                return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ModelEvent]:
        state = self._blocks.get(index)
        match delta.get("type"):
            case "text_delta":
                text = delta.get("text")
                if state is not None and state.kind != "text":
                    return []
                return self._text(index, text)
            case "thinking_delta":
                text = delta.get("thinking")
                if state is None:
                    state = self._blocks[index] = _Block("thinking")
                if state.kind != "thinking":
                    return []
                return [ReasoningChunk(text)] if isinstance(text, str) and text else []
            case "signature_delta":
                signature = delta.get("signature")
                if state is not None and state.kind == "thinking" and isinstance(signature, str):
                    state.signature.append(signature)
                return []
            case "input_json_delta":
                fragment = delta.get("partial_json")
                if state is None or not isinstance(fragment, str) or not fragment:
                    return []
                if state.kind == "call":
                    state.streamed = True
                    return [ToolCallChunk(state.ordinal, arguments=fragment)]
                if state.kind == "output":
                    state.streamed = True
                    return [TextChunk(fragment)]
                return []
            case _:
                return []  # citations_delta and delta types added later

    def _stop(self, index: int) -> list[ModelEvent]:
        state = self._blocks.pop(index, None)
        if state is None:
            return []
        match state.kind:
            case "thinking":
                return [ReasoningChunk("", "".join(state.signature))]
            case "call" if not state.streamed:
                return [ToolCallChunk(state.ordinal, arguments=_input_text(state.start_input))]
            case "output" if not state.streamed:
                return [TextChunk(_input_text(state.start_input))]
            case _:
                return []


def decode_message(model_id: str, message: object, *, output_tool: bool = False) -> list[ModelEvent]:
    """The model events of a whole (non-streamed) message.

    >>> decode_message("claude-x", {"id": "msg_1", "content": [{"type": "text", "text": "Hi"}],
    ...     "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 2}})
    [TextChunk(text='Hi'), \
Usage(input_tokens=5, output_tokens=2, cached_input_tokens=0, reasoning_tokens=0, \
cache_creation_input_tokens=0, \
requests=0, tool_calls=0, cost=None), \
Finish(reason=<FinishReason.STOP: 'stop'>, response_id='msg_1', response_model=None)]

    Raises:
        ModelError: the body is an error, or not a message.
    """
    if not isinstance(message, Mapping):
        raise ModelError.other(f"{PROVIDER} {model_id}: the response is not a message: {message!r:.200}")
    if message.get("type") == "error":
        raise error_from(model_id, message)
    content = message.get("content")
    if not isinstance(content, list):
        raise ModelError.other(f"{PROVIDER} {model_id}: the response has no content list: {message!r:.200}")
    decoder = StreamDecoder(model_id, output_tool)
    decoder.feed("message_start", {"type": "message_start", "message": message})
    events: list[ModelEvent] = []
    for index, block in enumerate(content):
        if not isinstance(block, Mapping):
            continue
        events.extend(decoder.feed("content_block_start", {"index": index, "content_block": _opening(block)}))
        if block.get("type") == "thinking" and isinstance(block.get("signature"), str):
            signature = {"type": "signature_delta", "signature": block["signature"]}
            events.extend(decoder.feed("content_block_delta", {"index": index, "delta": signature}))
        events.extend(decoder.feed("content_block_stop", {"index": index}))
    decoder.feed(
        "message_delta", {"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}}
    )
    events.extend(decoder.feed("message_stop", {"type": "message_stop"}))
    return events


def _opening(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A whole block as the ``content_block_start`` of a stream would carry it."""
    if block.get("type") == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking", "")}
    return block


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index")
    return index if type(index) is int else -1


def _count(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key)
    return value if type(value) is int else 0


def _input_text(value: object) -> str:
    if isinstance(value, Mapping) and value:
        return msgspec.json.encode(value).decode()
    return "{}"


__all__ = [
    "PROVIDER",
    "STOP_REASONS",
    "StreamDecoder",
    "decode_message",
    "error_from",
    "finish_reason",
    "usage_of",
]
