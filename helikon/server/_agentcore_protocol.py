"""The AgentCore HTTP contract on the wire: requests, answers, ``/ping``.

What AWS Bedrock AgentCore's Runtime sends a container and expects back,
as functions of bytes and headers (no IO, so each rule is tested alone):

- ``POST /invocations`` takes one JSON object holding exactly one of
  ``{"prompt": str}``, ``{"input": str}`` (the same thing, both spellings
  are in AWS's examples) or ``{"messages": [item, ...]}`` (helikon items in
  their tagged JSON form). Other keys are ignored: the platform may add its
  own. An optional ``"stream": bool`` picks the answer's form; without it
  the ``Accept`` header does (:func:`wants_json`): JSON unless the client
  asks for ``text/event-stream``, as the official ``bedrock-agentcore`` app.
- The session header ``X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`` holds
  33 to 256 visible ASCII characters (:func:`check_session_id`).
- A JSON answer is ``{"final_output": str, "usage": {...}}``; an SSE answer
  is one ``data: <event JSON>`` message per run event, the events tagged
  with their class name as everywhere in helikon (:func:`sse_message`).
- ``GET /ping`` answers ``{"status": "Healthy" | "HealthyBusy",
  "time_of_last_update": <unix seconds>}`` (:class:`PingState`).

A malformed request raises :class:`BadInvocation`, which the server answers
with its status and ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import enum
import ipaddress
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, final

import attrs
import msgspec

from helikon.codec import structure, structure_error, unstructure
from helikon.events import AgentEvent
from helikon.items import AgentInput, Item
from helikon.model import Usage
from helikon.server._wire import JsonRefused, decode_json, item_form

#: The AgentCore session header (HTTP header names are case-insensitive).
SESSION_HEADER: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
#: The contract's bounds on a session id's length, inclusive.
MIN_SESSION_ID: Final = 33
MAX_SESSION_ID: Final = 256
#: The default cap on an invocation's body: the service's own payload limit, 100 MB.
DEFAULT_MAX_BODY: Final = 100 * 1024 * 1024

_TEXT_FIELDS: Final = ("prompt", "input")
_SHAPES: Final = '{"prompt": "..."}, {"input": "..."} or {"messages": [...]}'


class BadInvocation(Exception):
    """A request the contract does not allow: answered with ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@attrs.frozen
class Invocation:
    """A parsed ``POST /invocations`` body."""

    input: AgentInput
    #: The body's ``"stream"`` field: ``None`` when absent (the Accept header decides).
    stream: bool | None = None


def error_body(code: str, message: str) -> bytes:
    """The JSON body of an error answer.

    >>> error_body("bad_json", "no")
    b'{"error":{"code":"bad_json","message":"no"}}'
    """
    return msgspec.json.encode({"error": {"code": code, "message": message}})


def check_session_id(value: str | None) -> str | None:
    """The session id of a request (``None`` when the header is absent).

    >>> check_session_id(None) is None
    True
    >>> check_session_id("s" * 33) == "s" * 33
    True
    >>> try:
    ...     check_session_id("short")
    ... except BadInvocation as bad:
    ...     print(bad.status, bad.code)
    400 bad_session_id

    Raises:
        BadInvocation: 400, the id is too short, too long, or holds a
            character outside visible ASCII (ids become storage keys).
    """
    if value is None:
        return None
    if not MIN_SESSION_ID <= len(value) <= MAX_SESSION_ID:
        raise BadInvocation(
            400,
            "bad_session_id",
            f"{SESSION_HEADER} must be {MIN_SESSION_ID} to {MAX_SESSION_ID} characters long, "
            f"not {len(value)}",
        )
    if not all("!" <= c <= "~" for c in value):
        raise BadInvocation(
            400, "bad_session_id", f"{SESSION_HEADER} may hold only visible ASCII characters (no spaces)"
        )
    return value


def wants_json(accept: str | None, stream: bool | None = None) -> bool:
    """Whether to answer with one JSON object (else with SSE).

    The body's ``stream`` field wins; otherwise the ``Accept`` header picks
    the preferred of ``application/json`` and ``text/event-stream`` (by
    ``q``, then by order); anything else (``*/*``), or no header, means
    JSON, as the official ``bedrock-agentcore`` app answers: SSE only when
    the client asks for it.

    >>> wants_json("application/json"), wants_json("text/event-stream"), wants_json(None)
    (True, False, True)
    >>> wants_json("*/*"), wants_json("text/event-stream;q=0.5, application/json")
    (True, True)
    >>> wants_json("application/json", stream=True)
    False
    """
    if stream is not None:
        return not stream
    best: tuple[float, int, str] | None = None
    for position, part in enumerate((accept or "").split(",")):
        kind, *params = (piece.strip() for piece in part.split(";"))
        if kind.lower() not in ("application/json", "text/event-stream"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0 and (best is None or (q, -position) > (best[0], best[1])):
            best = (q, -position, kind.lower())
    return best is None or best[2] == "application/json"


def parse_invocation(body: bytes) -> Invocation:
    """The invocation a request body asks for.

    >>> parse_invocation(b'{"prompt": "hi", "platform": 1}').input.items[0].content[0].text
    'hi'
    >>> parse_invocation(b'{"input": "hi", "stream": false}').stream
    False

    Raises:
        BadInvocation: 400 for an empty body or one that is not JSON; 422
            for JSON of the wrong shape.
    """
    if not body.strip():
        raise BadInvocation(400, "bad_json", f"the request body is empty; send a JSON object: {_SHAPES}")
    try:
        data = decode_json(body)
    except JsonRefused as refused:
        raise BadInvocation(400, "bad_json", str(refused)) from None
    if not isinstance(data, dict):
        raise BadInvocation(422, "bad_input", f"the body must be a JSON object: {_SHAPES}")
    given = [key for key in (*_TEXT_FIELDS, "messages") if key in data]
    if len(given) != 1:
        what = "none" if not given else " and ".join(repr(k) for k in given)
        raise BadInvocation(
            422, "bad_input", f"give exactly one of 'prompt', 'input', 'messages' (got {what})"
        )
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadInvocation(422, "bad_input", "'stream' must be true or false")
    (key,) = given
    if key == "messages":
        return Invocation(AgentInput(_items(data["messages"])), stream)
    text = data[key]
    if not isinstance(text, str) or not text.strip():
        raise BadInvocation(422, "bad_input", f"{key!r} must be a non-empty string")
    return Invocation(AgentInput.from_user_text(text), stream)


def _items(messages: Any) -> tuple[Item, ...]:
    if not isinstance(messages, list) or not messages:
        raise BadInvocation(422, "bad_input", "'messages' must be a non-empty list of items")
    items: list[Item] = []
    for index, message in enumerate(messages):
        try:
            items.append(structure(item_form(message), Item))
        except Exception as exc:  # cattrs' validation errors, KeyError for a missing tag...
            raise BadInvocation(
                422,
                "bad_input",
                f"messages[{index}] is not a helikon item: {structure_error(exc, f'messages[{index}]')}",
            ) from None
    return tuple(items)


def json_answer(final_output: str, usage: Usage) -> bytes:
    """The body of a JSON-mode answer.

    >>> msgspec.json.decode(json_answer("hi", Usage(3, 1)))["usage"]["input_tokens"]
    3
    """
    return msgspec.json.encode({"final_output": final_output, "usage": unstructure(usage, Usage)})


def sse_message(event: AgentEvent) -> bytes:
    """One SSE message carrying ``event`` (tagged by class name, as in traces)."""
    return b"data: " + msgspec.json.encode(unstructure(event, AgentEvent)) + b"\n\n"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, no port) is this machine.

    >>> [is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "localhost", "::1", "0.0.0.0", "example.com")]
    [True, True, True, True, False, False]
    >>> is_loopback("127.0.0.1.evil.example")  # a name, not an address
    False
    """
    host = host.strip().lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def foreign_request(host: str | None, origin: str | None) -> str | None:
    """Why a request to a server bound to loopback must be refused, or None.

    A loopback server is a developer's: a web page must not reach it, by a
    DNS name rebound to 127.0.0.1 (a foreign ``Host``) or by a cross-site
    ``POST`` (a foreign ``Origin``).

    >>> foreign_request("127.0.0.1:8080", None) is None, foreign_request("[::1]:80", "http://localhost:3000")
    (True, None)
    >>> foreign_request("evil.example:8080", None)
    "the Host 'evil.example:8080' is not this machine"
    >>> foreign_request("localhost", "https://evil.example")
    "requests from the origin 'https://evil.example' are not allowed"
    """
    if host is None or not is_loopback(_without_port(host)):
        return f"the Host {host!r} is not this machine"
    if origin is not None:
        _, _, rest = origin.partition("://")
        if not rest or not is_loopback(_without_port(rest.split("/")[0])):
            return f"requests from the origin {origin!r} are not allowed"
    return None


def _without_port(authority: str) -> str:
    if authority.startswith("["):
        return authority[1 : authority.find("]")] if "]" in authority else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


#: An SSE comment sent while a run is quiet, so proxies keep the stream open.
SSE_KEEPALIVE: Final = b": keep-alive\n\n"


class PingStatus(enum.Enum):
    """What ``GET /ping`` reports (the casing is the contract's)."""

    #: Ready for work.
    HEALTHY = "Healthy"
    #: Background work is registered (:meth:`PingState.busy`): the platform keeps the session.
    HEALTHY_BUSY = "HealthyBusy"


@final
class PingState:
    """The health the server reports, kept apart from every run.

    The status is ``HealthyBusy`` while any :meth:`busy` block (background
    work registered by the application) is open, else ``Healthy``: an
    ordinary invocation in flight leaves it ``Healthy``, as the official
    ``bedrock-agentcore`` app reports; :meth:`force` pins it. ``time_of_last_update`` is the Unix
    time (seconds) of the last change of status, the server's start before
    any: AgentCore reads an advancing timestamp as progress, so a repeated
    report of the same status never moves it. Safe to use from threads.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._active = 0
        self._forced: PingStatus | None = None
        self._status = PingStatus.HEALTHY
        self._changed = int(clock())

    @property
    def status(self) -> PingStatus:
        return self._status

    @property
    def time_of_last_update(self) -> int:
        return self._changed

    def body(self) -> dict[str, str | int]:
        """The ``/ping`` answer."""
        with self._lock:
            return {"status": self._status.value, "time_of_last_update": self._changed}

    def force(self, status: PingStatus | None) -> None:
        """Pin the reported status (``None`` goes back to counting work)."""
        with self._lock:
            self._forced = status
            self._settle()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Report ``HealthyBusy`` while the block runs (background work of your own)."""
        self._add(1)
        try:
            yield
        finally:
            self._add(-1)

    def _add(self, delta: int) -> None:
        with self._lock:
            self._active += delta
            self._settle()

    def _settle(self) -> None:
        automatic = PingStatus.HEALTHY_BUSY if self._active > 0 else PingStatus.HEALTHY
        status = self._forced or automatic
        if status is not self._status:
            self._status = status
            self._changed = int(self._clock())


__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_SESSION_ID",
    "MIN_SESSION_ID",
    "SESSION_HEADER",
    "SSE_KEEPALIVE",
    "BadInvocation",
    "Invocation",
    "PingState",
    "PingStatus",
    "check_session_id",
    "error_body",
    "foreign_request",
    "is_loopback",
    "json_answer",
    "parse_invocation",
    "sse_message",
    "wants_json",
]
