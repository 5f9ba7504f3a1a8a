"""Translate Converse answers into model events, and Bedrock errors into
:class:`~helikon.errors.ModelError`.

One translator serves both APIs: ConverseStream's events are fed to
:class:`StreamTranslator` as they arrive, and a non-streaming Converse
response is first rewritten into the same event sequence
(:func:`converse_events`), so both yield identical model events.

Mapping:

- ``contentBlockDelta.delta.text`` -> :class:`TextChunk` (empty strings dropped).
- ``contentBlockStart.start.toolUse`` + ``delta.toolUse.input`` fragments ->
  :class:`ToolCallChunk`; tool calls are numbered 0, 1, ... in the order they
  start (the content-block index also counts text and reasoning blocks).
- ``delta.reasoningContent``: ``text`` -> :class:`ReasoningChunk`; ``signature``
  -> a chunk with empty text carrying the signature (it closes the block);
  ``redactedContent`` (encrypted reasoning) -> a chunk with empty text whose
  signature is :data:`REDACTED_PREFIX` + the base64 blob, so it can be sent
  back unchanged.
- The reserved structured-output tool's input becomes :class:`TextChunk`; text
  the model writes beside it is dropped (text is held back until it is clear
  whether the tool is called, then released if it was not).
- ``metadata.usage`` -> :class:`Usage`: Bedrock's ``inputTokens`` excludes the
  prompt-cache tokens, so ``input_tokens = inputTokens + cacheReadInputTokens
  + cacheWriteInputTokens`` and ``cached_input_tokens = cacheReadInputTokens``;
  ``output_tokens = outputTokens`` (Bedrock does not report reasoning tokens
  apart, so ``reasoning_tokens`` stays 0).
- ``messageStop.stopReason`` -> :class:`Finish` at the end of the stream;
  a stream without ``messageStop`` is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from helikon.errors import ModelError
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers._bedrock_eventstream import EventMessage
from helikon.providers._bedrock_request import OUTPUT_TOOL, REDACTED_PREFIX, WRAPPED_KEY, OutputPlan
from helikon.providers._http import classify, decode_json, retry_after_ms

PROVIDER: Final = "aws.bedrock"

STOP_REASONS: Final[Mapping[str, FinishReason]] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "guardrail_intervened": FinishReason.CONTENT_FILTER,
    "content_filtered": FinishReason.CONTENT_FILTER,
}

#: Phrases with which Bedrock (and the models behind it) say the prompt is too long.
_CONTEXT_MARKERS: Final = (
    "input is too long",
    "prompt is too long",
    "too many input tokens",
    "too many tokens",
    "context length",
    "context window",
    "maximum context",
    "exceeds the maximum number of tokens",
    "input token count",
    "max_tokens + input",
)
_UNAVAILABLE_KINDS: Final = frozenset(
    {"serviceunavailable", "modelnotready", "internalserver", "internalfailure", "modeltimeout"}
)


def _kind(name: str) -> str:
    """``throttlingException`` / ``ThrottlingException`` / ``a#ThrottlingException:...`` -> ``throttling``."""
    name = name.split(":", 1)[0].rsplit("#", 1)[-1].strip().lower()
    return name.removesuffix("exception").removesuffix("error")


def classify_exception(
    model_id: str,
    kind: str,
    message: str,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> ModelError:
    """The :class:`ModelError` for a Bedrock exception type and message.

    >>> classify_exception("m", "throttlingException", "Too many requests").failure
    RateLimited(message='aws.bedrock m: throttlingException: Too many requests', retry_after_ms=None)
    >>> type(classify_exception("m", "validationException", "Input is too long for requested model").failure)
    <class 'helikon.errors.ContextLengthExceeded'>
    """
    where = f"{PROVIDER} {model_id}: " + (f"HTTP {status}: " if status is not None else "")
    text = f"{where}{kind}: {message}" if kind else where + message
    short = _kind(kind)
    lowered = message.lower()
    if short == "throttling":
        return ModelError.rate_limited(text, retry_after_ms(headers or {}))
    if short in _UNAVAILABLE_KINDS:
        return ModelError.unavailable(text)
    if short == "validation":
        if any(marker in lowered for marker in _CONTEXT_MARKERS):
            return ModelError.context_length_exceeded(text)
        return ModelError.other(text, status if status is not None else 400)
    return ModelError.other(text, status)


def http_error(model_id: str, status: int, headers: Mapping[str, str], body: bytes) -> ModelError:
    """The :class:`ModelError` for a non-2xx answer (before any streaming)."""
    kind = ""
    lowered = {k.lower(): v for k, v in headers.items()}
    message = ""
    try:
        data: Any = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        data = None
    if isinstance(data, Mapping):
        raw = data.get("message") or data.get("Message") or data.get("errorMessage")
        message = raw if isinstance(raw, str) else ""
        if isinstance(data.get("__type"), str):
            kind = data["__type"]
    if not message:
        message = body.decode(errors="replace").strip()[:500] or "(empty body)"
    kind = lowered.get("x-amzn-errortype", "") or kind
    if kind:
        return classify_exception(
            model_id, kind.split(":", 1)[0].rsplit("#", 1)[-1], message, status=status, headers=headers
        )
    return classify(PROVIDER, model_id, status, message, headers)


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """A :class:`Usage` from Converse's ``usage`` object.

    >>> usage_of({"inputTokens": 2, "outputTokens": 5, "cacheReadInputTokens": 1322,
    ...           "cacheWriteInputTokens": 0, "totalTokens": 1329})
    Usage(input_tokens=1324, output_tokens=5, cached_input_tokens=1322, reasoning_tokens=0, \
cache_creation_input_tokens=0, \
requests=0, tool_calls=0, cost=None)
    """

    def count(*keys: str) -> int:
        for key in keys:
            value = raw.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    cache_read = count("cacheReadInputTokens", "cacheReadInputTokenCount")
    cache_write = count("cacheWriteInputTokens", "cacheWriteInputTokenCount")
    return Usage(
        count("inputTokens") + cache_read + cache_write, count("outputTokens"), cache_read, 0, cache_write
    )


class StreamTranslator:
    """Turns ConverseStream events into model events (one instance per call)."""

    def __init__(self, model_id: str, plan: OutputPlan | None = None) -> None:
        self.model_id = model_id
        self.plan = plan or OutputPlan()
        self._tool_numbers: dict[int, int] = {}
        self._output_blocks: set[int] = set()
        self._output_json: dict[int, list[str]] = {}
        self._held_text: list[str] = []
        self._output_used = False
        self._user_tools = False
        self._stop_reason: str | None = None

    # -- frames -------------------------------------------------------------------

    def on_message(self, message: EventMessage) -> list[ModelEvent]:
        """The model events for one event-stream frame.

        Raises:
            ModelError: an exception or error frame, or a malformed payload.
        """
        message_type = message.header(":message-type") or "event"
        if message_type == "exception":
            kind = message.header(":exception-type") or "exception"
            raise classify_exception(self.model_id, kind, self._error_text(message.payload))
        if message_type == "error":
            code = message.header(":error-code") or "error"
            text = message.header(":error-message") or self._error_text(message.payload)
            raise classify_exception(self.model_id, code, text)
        event_type = message.header(":event-type")
        if event_type is None:
            return []
        payload = decode_json(message.payload or b"{}", provider=PROVIDER, model_id=self.model_id)
        if not isinstance(payload, Mapping):
            raise ModelError.other(f"{PROVIDER} {self.model_id}: {event_type} payload is not a JSON object")
        return self.on_event(event_type, payload)

    def _error_text(self, payload: bytes) -> str:
        try:
            data: Any = msgspec.json.decode(payload) if payload else None
        except msgspec.DecodeError:
            data = None
        if isinstance(data, Mapping):
            for key in ("message", "Message"):
                if isinstance(data.get(key), str):
                    return str(data[key])
        return payload.decode(errors="replace").strip()[:500] or "(no message)"

    # -- events -------------------------------------------------------------------

    def on_event(self, event_type: str, payload: Mapping[str, Any]) -> list[ModelEvent]:
        """The model events for one Converse stream event (by its type name)."""
        match event_type:
            case "contentBlockStart":
                return self._block_start(_index(payload), _mapping(payload.get("start")))
            case "contentBlockDelta":
                return self._block_delta(_index(payload), _mapping(payload.get("delta")))
            case "contentBlockStop":
                return self._block_stop(_index(payload))
            case "messageStop":
                reason = payload.get("stopReason")
                self._stop_reason = reason if isinstance(reason, str) else "unknown"
                return []
            case "metadata":
                usage = payload.get("usage")
                return [usage_of(usage)] if isinstance(usage, Mapping) else []
            case _:
                return []  # messageStart and event types added later carry nothing we map

    def _block_start(self, index: int, start: Mapping[str, Any]) -> list[ModelEvent]:
        tool = _mapping(start.get("toolUse"))
        if not tool:
            return []
        name = tool.get("name") if isinstance(tool.get("name"), str) else None
        if self.plan.tool and name == OUTPUT_TOOL:
            self._output_blocks.add(index)
            self._output_used = True
            self._held_text.clear()  # the answer is the tool's input, not the preamble
            return []
        call_id = tool.get("toolUseId") if isinstance(tool.get("toolUseId"), str) else None
        self._user_tools = True
        return [ToolCallChunk(index=self._tool_number(index), call_id=call_id, name=name, arguments="")]

    def _tool_number(self, index: int) -> int:
        if index not in self._tool_numbers:
            self._tool_numbers[index] = len(self._tool_numbers)
        return self._tool_numbers[index]

    def _block_delta(self, index: int, delta: Mapping[str, Any]) -> list[ModelEvent]:
        text = delta.get("text")
        if isinstance(text, str):
            if not text:
                return []
            if self.plan.tool:
                if not self._output_used:
                    self._held_text.append(text)
                return []
            return [TextChunk(text)]
        tool = delta.get("toolUse")
        if isinstance(tool, Mapping):
            fragment = tool.get("input")
            if not isinstance(fragment, str):
                fragment = "" if fragment is None else msgspec.json.encode(fragment).decode()
            if index in self._output_blocks:
                if self.plan.wrapped:
                    self._output_json.setdefault(index, []).append(fragment)
                    return []
                return [TextChunk(fragment)] if fragment else []
            self._user_tools = True
            return [ToolCallChunk(index=self._tool_number(index), arguments=fragment)]
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, Mapping):
            redacted = reasoning.get("redactedContent")
            if isinstance(redacted, str) and redacted:
                return [ReasoningChunk("", signature=REDACTED_PREFIX + redacted)]
            piece = reasoning.get("text")
            signature = reasoning.get("signature")
            piece = piece if isinstance(piece, str) else ""
            signature = signature if isinstance(signature, str) and signature else None
            if piece or signature is not None:
                return [ReasoningChunk(piece, signature=signature)]
        return []

    def _block_stop(self, index: int) -> list[ModelEvent]:
        parts = self._output_json.pop(index, None)
        if parts is None:
            return []
        raw = "".join(parts) or "{}"
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ModelError.other(
                f"{PROVIDER} {self.model_id}: the structured output is not valid JSON ({exc}): {raw[:200]!r}"
            ) from None
        inner = value.get(WRAPPED_KEY) if isinstance(value, dict) else value
        return [TextChunk(msgspec.json.encode(inner).decode())]

    def finish(self) -> list[ModelEvent]:
        """The closing events once the stream has ended.

        Raises:
            ModelError: the stream ended before ``messageStop``.
        """
        if self._stop_reason is None:
            raise ModelError.transport(
                f"{PROVIDER} {self.model_id}: the event stream ended before messageStop (truncated response)"
            )
        events: list[ModelEvent] = []
        if self._held_text and not self._output_used:
            events.append(TextChunk("".join(self._held_text)))
        self._held_text.clear()
        reason = STOP_REASONS.get(self._stop_reason, FinishReason.OTHER)
        if reason is FinishReason.TOOL_CALLS and self._output_used and not self._user_tools:
            reason = FinishReason.STOP  # the "tool call" was the structured answer
        events.append(Finish(reason))
        return events


def _index(payload: Mapping[str, Any]) -> int:
    index = payload.get("contentBlockIndex")
    return index if isinstance(index, int) else 0


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def converse_events(data: Any, model_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A Converse (non-streaming) response rewritten as ConverseStream events.

    >>> converse_events({"output": {"message": {"content": [{"text": "Hi"}]}}, "stopReason": "end_turn",
    ...                  "usage": {"inputTokens": 1, "outputTokens": 1}}, "m")
    [('contentBlockDelta', {'contentBlockIndex': 0, 'delta': {'text': 'Hi'}}), \
('contentBlockStop', {'contentBlockIndex': 0}), ('messageStop', {'stopReason': 'end_turn'}), \
('metadata', {'usage': {'inputTokens': 1, 'outputTokens': 1}})]

    Raises:
        ModelError: the body is not a Converse response.
    """
    if not isinstance(data, Mapping):
        raise ModelError.other(f"{PROVIDER} {model_id}: the response is not a JSON object")
    message = _mapping(_mapping(data.get("output")).get("message"))
    content = message.get("content")
    if not isinstance(content, list) or not isinstance(data.get("stopReason"), str):
        raise ModelError.other(f"{PROVIDER} {model_id}: the response has no output message or stopReason")
    events: list[tuple[str, dict[str, Any]]] = []
    for index, block in enumerate(content):
        if not isinstance(block, Mapping):
            continue
        at = {"contentBlockIndex": index}
        if isinstance(block.get("text"), str):
            events.append(("contentBlockDelta", {**at, "delta": {"text": block["text"]}}))
        elif isinstance(block.get("toolUse"), Mapping):
            tool = block["toolUse"]
            start = {"toolUseId": tool.get("toolUseId"), "name": tool.get("name")}
            events.append(("contentBlockStart", {**at, "start": {"toolUse": start}}))
            arguments = msgspec.json.encode(tool.get("input", {})).decode()
            events.append(("contentBlockDelta", {**at, "delta": {"toolUse": {"input": arguments}}}))
        elif isinstance(block.get("reasoningContent"), Mapping):
            reasoning = block["reasoningContent"]
            if isinstance(reasoning.get("redactedContent"), str):
                delta: dict[str, Any] = {"redactedContent": reasoning["redactedContent"]}
                events.append(("contentBlockDelta", {**at, "delta": {"reasoningContent": delta}}))
            else:
                text = _mapping(reasoning.get("reasoningText"))
                if text.get("text"):
                    delta = {"text": text["text"]}
                    events.append(("contentBlockDelta", {**at, "delta": {"reasoningContent": delta}}))
                if text.get("signature"):
                    delta = {"signature": text["signature"]}
                    events.append(("contentBlockDelta", {**at, "delta": {"reasoningContent": delta}}))
        events.append(("contentBlockStop", at))
    events.append(("messageStop", {"stopReason": data["stopReason"]}))
    if isinstance(data.get("usage"), Mapping):
        events.append(("metadata", {"usage": dict(data["usage"])}))
    return events


__all__ = [
    "PROVIDER",
    "STOP_REASONS",
    "StreamTranslator",
    "classify_exception",
    "converse_events",
    "http_error",
    "usage_of",
]
