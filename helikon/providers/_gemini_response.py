"""Turn Gemini ``GenerateContentResponse`` objects into model events.

A streamed answer is a sequence of such objects (one per SSE ``data:`` line);
a non-streamed answer is one. :class:`ResponseParser` takes them in order and
returns the events each one adds; :meth:`ResponseParser.close` returns the
closing :class:`Usage` and :class:`Finish`. The parser does no IO.

Wire facts it relies on (see the recorded fixtures):

- Text and function calls arrive as ``candidates[0].content.parts``; Gemini
  never splits a ``functionCall``, and gives it no id (an ``id``, when a
  model sends one, is kept as the call id).
- ``thought: true`` parts are thought summaries -> :class:`ReasoningChunk`.
- ``thoughtSignature`` on any part -> ``ReasoningChunk("", signature)``
  emitted before that part's own events (on a thought part, the chunk
  carries both). The request builder puts it back (see ``_gemini_request``).
- ``usageMetadata`` is cumulative in every chunk: only the last one counts,
  and it is emitted once, at the end.
- The last chunk carries ``finishReason``. A stream that ends cleanly (no
  cut event) after some candidate content but without one (compatible
  proxies send such streams) finishes as STOP (TOOL_CALLS after calls), as
  google-genai reads it; a stream that brought no candidate at all was cut.
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
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.providers._http import classify, duration_ms

_FINISH: Final[Mapping[str, FinishReason]] = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
    "BLOCKLIST": FinishReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "SPII": FinishReason.CONTENT_FILTER,
    "IMAGE_SAFETY": FinishReason.CONTENT_FILTER,
    "MALFORMED_FUNCTION_CALL": FinishReason.OTHER,
}


def finish_reason(raw: str, saw_calls: bool) -> FinishReason:
    """Map Gemini's ``finishReason`` (``STOP`` after function calls is TOOL_CALLS).

    >>> finish_reason("STOP", saw_calls=True), finish_reason("SPII", saw_calls=False)
    (<FinishReason.TOOL_CALLS: 'tool_calls'>, <FinishReason.CONTENT_FILTER: 'content_filter'>)
    """
    reason = _FINISH.get(raw, FinishReason.OTHER)
    return FinishReason.TOOL_CALLS if reason is FinishReason.STOP and saw_calls else reason


def usage_of(metadata: Mapping[str, Any]) -> Usage:
    """Map ``usageMetadata`` onto :class:`Usage`.

    ``promptTokenCount`` (cached tokens included) plus any
    ``toolUsePromptTokenCount`` is the input; ``cachedContentTokenCount`` the
    cached part; ``candidatesTokenCount`` + ``thoughtsTokenCount`` the output,
    of which ``thoughtsTokenCount`` is reasoning.

    >>> usage_of({"promptTokenCount": 3520, "cachedContentTokenCount": 3512,
    ...           "candidatesTokenCount": 2, "thoughtsTokenCount": 42})
    Usage(input_tokens=3520, output_tokens=44, cached_input_tokens=3512, reasoning_tokens=42, \
cache_creation_input_tokens=0, \
requests=0, tool_calls=0, cost=None)
    """

    def count(key: str) -> int:
        value = metadata.get(key)
        return value if isinstance(value, int) else 0

    thoughts = count("thoughtsTokenCount")
    return Usage(
        input_tokens=count("promptTokenCount") + count("toolUsePromptTokenCount"),
        output_tokens=count("candidatesTokenCount") + thoughts,
        cached_input_tokens=count("cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


def retry_delay_ms(error: Mapping[str, Any]) -> int | None:
    """The ``google.rpc.RetryInfo`` delay of an error object, in milliseconds.

    >>> retry_delay_ms({"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
    ...                              "retryDelay": "1.5s"}]})
    1500
    """
    details = error.get("details")
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                return duration_ms(delay)
    return None


def error_from(error: Any, where: str, provider: str, model_id: str) -> ModelError:
    """The :class:`ModelError` for an ``{"error": {...}}`` object in a body."""
    if not isinstance(error, Mapping):
        return ModelError.other(f"{where}: the server sent an error: {error!r}")
    code = error.get("code")
    status = code if isinstance(code, int) else None
    message = str(error.get("message") or "(no message)")
    kind = error.get("status")
    if isinstance(kind, str) and kind not in message:
        message = f"{message} ({kind})"
    delay = retry_delay_ms(error)
    headers = {"retry-after-ms": str(delay)} if delay is not None else None
    return classify(provider, model_id, status, message, headers)


@attrs.define
class ResponseParser:
    """Folds Gemini response objects into model events (one parser per call)."""

    provider: str
    model_id: str
    _calls: int = 0
    _usage: Mapping[str, Any] | None = None
    _finish: str | None = None
    _candidates: int = 0
    _response_id: str | None = None
    _response_model: str | None = None

    @property
    def where(self) -> str:
        return f"{self.provider} {self.model_id}"

    def feed(self, response: Any) -> list[ModelEvent]:
        """The events one response object adds.

        Raises:
            ModelError: the object is an error, or the prompt was blocked
                (``refused``), or it is not a response object at all.
        """
        if not isinstance(response, Mapping):
            raise ModelError.other(f"{self.where}: unexpected response payload: {str(response)[:200]!r}")
        if "error" in response:
            raise error_from(response["error"], self.where, self.provider, self.model_id)
        if isinstance(response.get("responseId"), str):
            self._response_id = response["responseId"]
        if isinstance(response.get("modelVersion"), str) and response["modelVersion"]:
            self._response_model = response["modelVersion"]
        if isinstance(response.get("usageMetadata"), Mapping):
            self._usage = response["usageMetadata"]
        feedback = response.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            detail = feedback.get("blockReasonMessage")
            raise ModelError.refused(
                f"{self.where}: the prompt was blocked ({feedback['blockReason']})"
                + (f": {detail}" if isinstance(detail, str) and detail else "")
            )
        candidates = response.get("candidates")
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
            return []
        candidate = candidates[0]
        self._candidates += 1
        events = self._parts(candidate.get("content"))
        if isinstance(candidate.get("finishReason"), str):
            self._finish = candidate["finishReason"]
        return events

    def _parts(self, content: Any) -> list[ModelEvent]:
        if not isinstance(content, Mapping) or not isinstance(content.get("parts"), list):
            return []
        events: list[ModelEvent] = []
        for part in content["parts"]:
            if not isinstance(part, Mapping):
                continue
            signature = part.get("thoughtSignature")
            signature = signature if isinstance(signature, str) and signature else None
            text = part.get("text")
            call = part.get("functionCall")
            if part.get("thought") is True:
                if (isinstance(text, str) and text) or signature:
                    events.append(ReasoningChunk(text if isinstance(text, str) else "", signature))
                continue
            if signature:
                events.append(ReasoningChunk("", signature))
            if isinstance(text, str) and text:
                events.append(TextChunk(text))
            elif isinstance(call, Mapping):
                events.append(self._call(call))
            # inlineData, executableCode, codeExecutionResult: no carrier; skipped.
        return events

    def _call(self, call: Mapping[str, Any]) -> ToolCallChunk:
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError.other(f"{self.where}: a functionCall without a name: {dict(call)!r}")
        args = call.get("args")
        call_id = call.get("id")
        index, self._calls = self._calls, self._calls + 1
        return ToolCallChunk(
            index=index,
            call_id=call_id if isinstance(call_id, str) and call_id else None,
            name=name,
            arguments=msgspec.json.encode(args if isinstance(args, Mapping) else {}).decode(),
        )

    def close(self) -> list[ModelEvent]:
        """The closing events: the usage (if any) and the :class:`Finish`.

        Raises:
            ModelError: neither a ``finishReason`` nor any candidate arrived
                (a cut stream).
        """
        if self._finish is None and self._candidates == 0:
            raise ModelError.transport(
                f"{self.where}: the response ended without a finishReason (the stream was cut short)"
            )
        events: list[ModelEvent] = []
        if self._usage is not None:
            events.append(usage_of(self._usage))
        reason = finish_reason(self._finish or "STOP", self._calls > 0)
        events.append(Finish(reason, self._response_id, self._response_model))
        return events


__all__ = ["ResponseParser", "error_from", "finish_reason", "retry_delay_ms", "usage_of"]
