"""What the two OpenAI wire formats share: the adapter's configuration, the
HTTP request, the streaming driver, strict-mode tool schemas, and turning
the server's error payloads into :class:`~helikon.errors.ModelError`.

Rules kept here:

- Each API module (``_openai_chat``, ``_openai_responses``) turns a
  :class:`~helikon.model.ModelRequest` into a JSON body and parses replies
  with a small synchronous parser (:class:`WireParser`): feed it one SSE
  event, get model events back. :func:`stream_events` is the only code that
  awaits; it never holds a cancel scope across a ``yield`` (``_http`` does
  the waiting).
- Usage is reported once per call, just before :class:`~helikon.model.Finish`
  (some OpenAI-compatible servers repeat cumulative usage in every chunk, so
  the last report wins rather than adding up).
- System messages are concatenated, in order, into one instruction text at
  the top (the book's rule).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final, Literal, Protocol, cast

import attrs
import httpx

from helikon._version import __version__
from helikon.cancel import CancellationToken
from helikon.errors import ModelError
from helikon.items import ImagePart, Item, SystemMessage, TextPart, text_of
from helikon.model import FinishReason, ModelEvent, Usage
from helikon.providers._http import SseDecoder, SseEvent, chunks, classify, decode_json, read_all, send
from helikon.providers._incremental import http_json_body
from helikon.providers._openai_profiles import PROFILES, OutputMode, ServerProfile
from helikon.schema import strict

#: Where OpenAI's own API lives.
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"

#: Which field carries ``max_output_tokens`` on Chat Completions.
MaxTokensParam = Literal["max_completion_tokens", "max_tokens"]
#: The role of the one instruction message on Chat Completions.
SystemRole = Literal["system", "developer"]

#: Error codes OpenAI puts in stream errors and failed responses, as the
#: HTTP status they stand for (so :func:`classify` sorts them the same way).
_CODE_STATUS: Final = {
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "server_is_overloaded": 503,
    "slow_down": 503,
}


@attrs.frozen
class OpenAIConfig:
    """Everything an :class:`~helikon.providers.openai.OpenAIModel` was built with."""

    model_id: str
    api: Literal["chat", "responses"]
    provider: str
    base_url: str
    headers: tuple[tuple[str, str], ...]
    params: tuple[tuple[str, str], ...]
    extra_body: Mapping[str, Any]
    stream: bool
    system_role: SystemRole = "system"
    max_tokens_param: MaxTokensParam = "max_completion_tokens"
    stream_usage: bool = True
    reasoning_effort: str | None = None
    reasoning_summary: str | None = None
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    profile: ServerProfile = PROFILES["openai"]
    output_mode: OutputMode = "native"


class WireParser(Protocol):
    """Turns one call's wire payloads into model events (no IO).

    ``feed`` takes one SSE event; ``done`` says the terminal event arrived;
    ``close`` gives the events left at the end of the stream and raises
    :class:`ModelError` when the stream stopped early; ``parse_body`` reads a
    whole non-streamed reply.
    """

    @property
    def done(self) -> bool: ...

    def feed(self, event: SseEvent) -> list[ModelEvent]: ...

    def close(self) -> list[ModelEvent]: ...

    def parse_body(self, body: bytes) -> list[ModelEvent]: ...


def build_request(
    client: httpx.AsyncClient, config: OpenAIConfig, path: str, body: Mapping[str, Any]
) -> httpx.Request:
    """The POST for ``path`` under the configured base URL."""
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream" if config.stream else "application/json",
        "user-agent": f"helikon/{__version__}",
    }
    headers.update(config.headers)
    return client.build_request(
        "POST",
        config.base_url.rstrip("/") + path,
        params=dict(config.params) or None,
        headers=headers,
        # The conversation's final messages come encoded (see _incremental).
        content=http_json_body(body, "messages" if "messages" in body else "input"),
    )


async def stream_events(
    client: httpx.AsyncClient,
    config: OpenAIConfig,
    path: str,
    body: Mapping[str, Any],
    cancel: CancellationToken,
    parser: WireParser,
) -> AsyncGenerator[ModelEvent, None]:
    """Send one call and yield its model events (streamed or not).

    A streamed request that comes back as a JSON document (a gateway that
    only passes non-streaming replies) is parsed as one, and the other way
    round.

    Raises:
        ModelError: the server refused the call, failed mid-stream, or the
            stream stopped before its terminal event.
    """
    where = {"provider": config.provider, "model_id": config.model_id}
    request = build_request(client, config, path, body)
    response = await send(client, request, cancel, **where)
    if response is None:
        return
    content_type = response.headers.get("content-type", "")
    if "event-stream" in content_type or (config.stream and "json" not in content_type):
        # chunks + SseDecoder rather than _http.sse_events, so that stopping at the
        # terminal event (or on a parser error) closes the byte stream at once.
        decoder = SseDecoder()
        body_chunks = cast(AsyncGenerator[bytes, None], chunks(response, cancel, **where))
        async with aclosing(body_chunks) as stream:
            async for piece in stream:
                for event in decoder.feed(piece):
                    for model_event in parser.feed(event):
                        yield model_event
                    if parser.done:
                        return
        if cancel.cancelled:
            return
        if decoder.incomplete:
            raise ModelError.transport(
                f"{config.provider} {config.model_id}: the event stream was cut off mid-event"
            )
        for model_event in parser.close():
            yield model_event
        return
    raw = await read_all(response, cancel, **where)
    if raw is None:
        return
    for model_event in parser.parse_body(raw):
        yield model_event


# -- request pieces ----------------------------------------------------------


def instructions(messages: Sequence[Item], first: str | None = None) -> str | None:
    """The request's instructions (``first``), then every system message's
    text, in order, joined by blank lines (or None).

    >>> from helikon.items import system_text, user_text
    >>> instructions((user_text("hi"), system_text("Use metric units.")), "Be brief.")
    'Be brief.\\n\\nUse metric units.'
    >>> instructions((user_text("hi"),)) is None
    True
    """
    texts = [text_of(m.content) for m in messages if type(m) is SystemMessage]
    if first is not None:
        texts.insert(0, first)
    joined = "\n\n".join(t for t in texts if t)
    return joined or None


def image_url(part: ImagePart) -> str | None:
    """The URL OpenAI takes for an image: its own, or a base64 ``data:`` URL.

    >>> image_url(ImagePart(data="AAAA", media_type="image/jpeg"))
    'data:image/jpeg;base64,AAAA'
    """
    if part.url:
        return part.url
    if part.data:
        return f"data:{part.media_type or 'image/png'};base64,{part.data}"
    return None


def only_text(content: Sequence[object]) -> bool:
    """Whether a message's content is text parts only (so a plain string will do)."""
    return all(type(p) is TextPart for p in content)


def schema_name(name: str) -> str:
    """A response-format name OpenAI accepts (``^[a-zA-Z0-9_-]{1,64}$``).

    >>> schema_name("City location!")
    'City_location_'
    """
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    return cleaned or "output"


#: Schema keywords OpenAI's strict mode accepts (its "supported schemas"
#: list, plus annotations). Anything else sends the tool non-strict.
_STRICT_KEYWORDS: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "default",
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    }
)


def strict_tool_parameters(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The strict-mode form of a tool's argument schema, or None to send it as is.

    Strict mode makes every property required (an optional one becomes
    nullable) and closes every object. The loop validates the model's
    arguments against the tool's *own* schema, so the rewrite must not let
    through anything that schema rejects. That holds when every property is
    already required, no object takes free-form keys (a map), and only
    keywords strict mode supports appear; then the normalised schema is sent
    with ``strict: true``. Otherwise the original schema is sent with
    ``strict: false`` (an optional argument would come back as ``null``).

    >>> strict_tool_parameters({"type": "object", "properties": {"city": {"type": "string"}},
    ...                         "required": ["city"]})
    {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city'], \
'additionalProperties': False}
    >>> strict_tool_parameters({"type": "object", "properties": {"days": {"type": "integer"}}}) is None
    True
    """
    if schema.get("type") != "object" or not _survives(schema):
        return None
    return strict(schema)


def _survives(schema: Mapping[str, Any]) -> bool:
    if any(key not in _STRICT_KEYWORDS for key in schema):
        return False
    extra = schema.get("additionalProperties", False)
    if extra is not False:
        return False
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, Mapping):
            return False
        required = schema.get("required", [])
        if not isinstance(required, list) or set(properties) - set(required):
            return False
        if not all(isinstance(sub, Mapping) and _survives(sub) for sub in properties.values()):
            return False
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if defs is not None and not (
            isinstance(defs, Mapping) and all(isinstance(s, Mapping) and _survives(s) for s in defs.values())
        ):
            return False
    items = schema.get("items")
    if items is not None and not (isinstance(items, Mapping) and _survives(items)):
        return False
    any_of = schema.get("anyOf")
    return any_of is None or (
        isinstance(any_of, list) and all(isinstance(s, Mapping) and _survives(s) for s in any_of)
    )


# -- reply pieces ------------------------------------------------------------


def as_int(value: object) -> int:
    """A token count from the wire (absent, null or malformed counts as 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(
    raw: object, *, input_key: str, output_key: str, input_details: str, output_details: str
) -> Usage | None:
    """A :class:`Usage` from an OpenAI usage object (None when there is none).

    Both APIs count cached tokens inside the input total and reasoning tokens
    inside the output total, which is helikon's convention too.
    """
    if not isinstance(raw, Mapping):
        return None
    in_details = raw.get(input_details)
    out_details = raw.get(output_details)
    cached = in_details.get("cached_tokens") if isinstance(in_details, Mapping) else 0
    reasoning = out_details.get("reasoning_tokens") if isinstance(out_details, Mapping) else 0
    return Usage(
        input_tokens=as_int(raw.get(input_key)),
        output_tokens=as_int(raw.get(output_key)),
        cached_input_tokens=as_int(cached),
        reasoning_tokens=as_int(reasoning),
    )


def payload_error(provider: str, model_id: str, raw: object, *, context: str) -> ModelError:
    """The :class:`ModelError` for an error object the server sent in a 2xx reply.

    ``raw`` is ``{"error": {...}}``, the error object itself, or a Responses
    ``error`` event (``code``/``message`` at the top).

    >>> error = payload_error("openai", "m", {"error": {"message": "slow", "code": "rate_limit_exceeded"}},
    ...                       context="stream error")
    >>> error.failure
    RateLimited(message='openai m: HTTP 429: stream error: slow (rate_limit_exceeded)', retry_after_ms=None)
    """
    error = raw.get("error", raw) if isinstance(raw, Mapping) else raw
    if not isinstance(error, Mapping):
        return ModelError.other(f"{provider} {model_id}: {context}: {error!r}")
    message = error.get("message")
    text = message if isinstance(message, str) and message else "no message"
    code = error.get("code")
    if code is None and error.get("type") != "error":  # a Responses error event's type is just "error"
        code = error.get("type")
    if isinstance(code, str) and code not in text:
        text = f"{text} ({code})"
    status = error.get("status_code", error.get("status"))
    if not (isinstance(status, int) and not isinstance(status, bool)):
        status = (
            _CODE_STATUS.get(code) if isinstance(code, str) else (code if isinstance(code, int) else None)
        )
    return classify(provider, model_id, status, f"{context}: {text}")


def refusal_error(provider: str, model_id: str, refusal: str) -> ModelError:
    """The model declined to answer (OpenAI's ``refusal`` field)."""
    return ModelError.refused(f"{provider} {model_id}: the model refused: {refusal}")


def finish_reason(raw: object, *, had_calls: bool) -> FinishReason:
    """Map a Chat Completions ``finish_reason``.

    OpenAI reports ``stop`` when a *named* tool choice forced the call, so a
    turn that produced tool calls finishes with ``TOOL_CALLS`` either way.

    >>> finish_reason("length", had_calls=False), finish_reason("stop", had_calls=True)
    (<FinishReason.LENGTH: 'length'>, <FinishReason.TOOL_CALLS: 'tool_calls'>)
    """
    if raw is None or raw == "stop":
        return FinishReason.TOOL_CALLS if had_calls else FinishReason.STOP
    return _FINISH.get(str(raw), FinishReason.OTHER)


_FINISH: Final = {
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def decoder(config: OpenAIConfig) -> Callable[[str | bytes], Any]:
    """JSON decoding that fails as a clear :class:`ModelError`."""

    def decode(data: str | bytes) -> Any:
        return decode_json(data, provider=config.provider, model_id=config.model_id)

    return decode


__all__ = [
    "DEFAULT_BASE_URL",
    "MaxTokensParam",
    "OpenAIConfig",
    "SystemRole",
    "WireParser",
    "as_int",
    "build_request",
    "decoder",
    "finish_reason",
    "image_url",
    "instructions",
    "only_text",
    "payload_error",
    "refusal_error",
    "schema_name",
    "stream_events",
    "strict_tool_parameters",
    "usage_of",
]
