"""What every HTTP model adapter shares: opening a streamed request,
Server-Sent Events, and turning HTTP failures into :class:`ModelError`.

Cancellation: every network wait runs inside ``cancel.scope()``, exited
before anything is yielded (a cancel scope must not stay open across a
``yield``); when the token fires (or the run's deadline passes) the stream
simply ends and the interpreter reports the interruption.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import attrs
import httpx
import msgspec

from helikon.cancel import CancellationToken
from helikon.errors import ModelError

#: Default timeouts for adapters that create their own client: quick to
#: connect, patient while a model thinks between chunks.
DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0)

#: Words a server uses when it refuses the request itself (a validation
#: error, a chat template that cannot render it), whatever its status: such a
#: failure is not transient, and retrying the same request cannot help.
_INVALID_REQUEST_MARKERS = (
    "validation error",
    "invalid_request",
    "invalid request",
    "input should be",
    "field required",
    "extra inputs are not permitted",
    "unprocessable",
    "typeerror",
    "jinja",
    "template",
)
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input token count",
)
_UNAVAILABLE_STATUS = frozenset({500, 502, 503, 504, 529})


def new_client(http_client: httpx.AsyncClient | None) -> httpx.AsyncClient:
    """The client to use: the caller's, or a new one with sane timeouts."""
    return http_client if http_client is not None else httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)


def retry_after_ms(headers: Mapping[str, str]) -> int | None:
    """The server's retry hint in milliseconds (``retry-after-ms``,
    ``retry-after`` in seconds or as an HTTP date), or None.

    >>> retry_after_ms({"retry-after": "2"})
    2000
    >>> retry_after_ms({"retry-after-ms": "150"})
    150
    >>> retry_after_ms({}) is None
    True
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0, int(float(raw_ms)))
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0, int(float(raw) * 1000))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0, int((when.timestamp() - time.time()) * 1000))


def duration_ms(delay: str) -> int | None:
    """A Google duration (``"1.5s"``: seconds and an ``s``) in milliseconds,
    or None if it is not a number of seconds.

    >>> duration_ms("1.5s"), duration_ms("s")
    (1500, None)
    """
    try:
        return max(0, int(float(delay[:-1]) * 1000))
    except ValueError:
        return None


def body_retry_after_ms(body: bytes) -> int | None:
    """A retry hint inside an error body (Google's ``google.rpc.RetryInfo``
    ``retryDelay: "12s"``), in milliseconds, or None.

    >>> body_retry_after_ms(b'{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",'
    ...                     b' "retryDelay": "1.5s"}]}}')
    1500
    """
    try:
        data: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            return duration_ms(delay)
    return None


def error_message(body: bytes) -> str:
    """The human message inside a provider's error body (or the body itself)."""
    try:
        data: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body.decode(errors="replace").strip()[:500] or "(empty body)"
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("Message")
            kinds = (error.get("type"), error.get("status"), error.get("code"))
            kind = next((k for k in kinds if isinstance(k, str)), None)
            if isinstance(message, str):
                return f"{message} ({kind})" if isinstance(kind, str) and kind not in message else message
        for key in ("message", "Message", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])
        if isinstance(error, str):
            return error
    return body.decode(errors="replace").strip()[:500]


def classify(
    provider: str, model_id: str, status: int | None, message: str, headers: Mapping[str, str] | None = None
) -> ModelError:
    """The :class:`ModelError` for a failure the server described.

    >>> classify("openai", "gpt-4o", 429, "Rate limit reached", {"retry-after": "1"}).failure
    RateLimited(message='openai gpt-4o: HTTP 429: Rate limit reached', retry_after_ms=1000)
    """
    where = f"{provider} {model_id}: " + (f"HTTP {status}: " if status is not None else "")
    text = where + message
    lowered = message.lower()
    if status == 429 or "rate limit" in lowered or "throttl" in lowered:
        return ModelError.rate_limited(text, retry_after_ms(headers or {}))
    if any(marker in lowered for marker in _CONTEXT_MARKERS):
        return ModelError.context_length_exceeded(text)
    if any(marker in lowered for marker in _INVALID_REQUEST_MARKERS):
        return ModelError.other(text, status)
    if (status in _UNAVAILABLE_STATUS) or "overloaded" in lowered or "unavailable" in lowered:
        return ModelError.unavailable(text)
    if "refus" in lowered or "safety" in lowered or "content_filter" in lowered:
        return ModelError.refused(text)
    return ModelError.other(text, status)


def transport_error(provider: str, model_id: str, exc: Exception) -> ModelError:
    """A connection-level failure as a :class:`ModelError`."""
    detail = str(exc) or type(exc).__name__
    return ModelError.transport(f"{provider} {model_id}: {type(exc).__name__}: {detail}")


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    cancel: CancellationToken,
    *,
    provider: str,
    model_id: str,
) -> httpx.Response | None:
    """Send ``request`` for a streamed response; None if cancelled first.

    Raises:
        ModelError: the connection failed or the server answered non-2xx
            (the body is read and its message kept).
    """
    try:
        with cancel.scope() as scope:
            response = await client.send(request, stream=True)
            if response.status_code >= 400:
                body = await response.aread()
                await response.aclose()
                headers = dict(response.headers)
                hint = body_retry_after_ms(body)
                if hint is not None and retry_after_ms(headers) is None:
                    headers["retry-after-ms"] = str(hint)
                raise classify(provider, model_id, response.status_code, error_message(body), headers)
    except httpx.HTTPError as exc:
        raise transport_error(provider, model_id, exc) from exc
    if scope.cancelled_caught:
        return None
    return response


async def read_all(
    response: httpx.Response, cancel: CancellationToken, *, provider: str, model_id: str
) -> bytes | None:
    """The whole body of a non-streaming response; None if cancelled."""
    try:
        with cancel.scope() as scope:
            body = await response.aread()
    except httpx.HTTPError as exc:
        raise transport_error(provider, model_id, exc) from exc
    finally:
        await response.aclose()
    return None if scope.cancelled_caught else body


async def chunks(
    response: httpx.Response, cancel: CancellationToken, *, provider: str, model_id: str
) -> AsyncIterator[bytes]:
    """The bytes of a streamed body (content-decoded); stops early (quietly)
    on cancel. Works for pre-read responses too."""
    iterator = response.aiter_bytes()
    try:
        while True:
            with cancel.scope() as scope:
                try:
                    chunk: bytes | None = await iterator.__anext__()
                except StopAsyncIteration:
                    chunk = None
                except httpx.HTTPError as exc:
                    raise transport_error(provider, model_id, exc) from exc
            if scope.cancelled_caught or chunk is None:
                return
            yield chunk
    finally:
        await response.aclose()


@attrs.frozen
class SseEvent:
    """One Server-Sent Event: its ``event`` type (default ``message``) and data."""

    event: str
    data: str
    id: str | None = None


@attrs.define
class SseDecoder:
    """Incremental SSE parsing (the WHATWG algorithm): feed bytes, get events.

    >>> decoder = SseDecoder()
    >>> decoder.feed(b"event: ping\\ndata: a\\ndata: b\\n\\n: comment\\ndata: c")
    [SseEvent(event='ping', data='a\\nb', id=None)]
    >>> decoder.feed(b"\\n\\n")
    [SseEvent(event='message', data='c', id=None)]
    """

    _buffer: bytes = b""
    _event: str = ""
    _data: list[str] = attrs.field(factory=list)
    _id: str | None = None
    _pending: bool = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                break
            end, after = cut
            line = self._buffer[:end].decode("utf-8", errors="replace")
            self._buffer = self._buffer[after:]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[SseEvent]:
        """End of stream: the last line and event, even without a final
        blank line (real servers end streams that way)."""
        events: list[SseEvent] = []
        if self._buffer:
            line = self._buffer.rstrip(b"\r\n").decode("utf-8", errors="replace")
            self._buffer = b""
            event = self._line(line)
            if event is not None:
                events.append(event)
        last = self._line("")
        if last is not None:
            events.append(last)
        return events

    @property
    def incomplete(self) -> bool:
        """Whether bytes or fields are waiting for an event's end."""
        return bool(self._buffer.strip()) or self._pending

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._pending:
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._pending = "", [], False
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._pending = True
        elif name == "event":
            self._event = value
            self._pending = True
        elif name == "id":
            self._id = value
        return None


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first line of ``buffer`` ends: (end, start of the next)."""
    n = buffer.find(b"\n")
    r = buffer.find(b"\r")
    if r == -1 and n == -1:
        return None
    if r == -1 or (n != -1 and n < r):
        return n, n + 1
    if r + 1 < len(buffer):
        return (r, r + 2) if buffer[r + 1 : r + 2] == b"\n" else (r, r + 1)
    return None  # a trailing \r may be the first half of \r\n


async def sse_events(
    response: httpx.Response, cancel: CancellationToken, *, provider: str, model_id: str
) -> AsyncIterator[SseEvent]:
    """The SSE events of a streamed response.

    A last event without its closing blank line is still delivered when its
    data is whole (real servers end streams that way); a last event whose
    data is cut off is a transport error. Whether the stream reached its
    terminal event is the adapter's to check.

    Raises:
        ModelError: the stream ended in the middle of an event (truncated).
    """
    decoder = SseDecoder()
    async for chunk in chunks(response, cancel, provider=provider, model_id=model_id):
        for event in decoder.feed(chunk):
            yield event
    if cancel.cancelled:
        return
    for event in decoder.flush():
        if not _whole(event.data):
            raise ModelError.transport(f"{provider} {model_id}: the event stream was cut off mid-event")
        yield event


def _whole(data: str) -> bool:
    """Whether an event's data at the very end of a stream is complete JSON
    (or not JSON at all, like ``[DONE]``)."""
    text = data.strip()
    if not text.startswith(("{", "[")) or text == "[DONE]":
        return True
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True


def decode_json(data: str | bytes, *, provider: str, model_id: str) -> Any:
    """Parse one JSON payload from the wire, as a clear ModelError if it is bad."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        snippet = data[:200] if isinstance(data, str) else data[:200].decode(errors="replace")
        raise ModelError.other(
            f"{provider} {model_id}: malformed JSON from the server ({exc}): {snippet!r}"
        ) from None


__all__ = [
    "DEFAULT_TIMEOUT",
    "SseDecoder",
    "SseEvent",
    "chunks",
    "classify",
    "decode_json",
    "duration_ms",
    "error_message",
    "new_client",
    "read_all",
    "retry_after_ms",
    "send",
    "sse_events",
    "transport_error",
]
