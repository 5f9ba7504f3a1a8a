"""Shared helpers of the Anthropic adapter tests: a MockTransport that answers
with recorded bytes in small pieces and records what was sent, and a runner
that drains ``invoke`` under trio or asyncio. (No tests here.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx

from helikon.cancel import CancellationToken
from helikon.ids import RunId
from helikon.loop._aggregate import Response, aggregate
from helikon.model import ModelEvent, ModelRequest
from helikon.providers.anthropic import AnthropicModel

#: Payloads written for these tests from Anthropic's public API reference.
OWN = Path(__file__).resolve().parents[2] / "fixtures" / "anthropic"
#: Real recorded responses, shared by the project and read in place.
REAL = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "provider-wire" / "anthropic"
REAL_MISSING = f"the real recorded responses are not here: {REAL}"


class Pieces(httpx.AsyncByteStream):
    """A body delivered ``size`` bytes at a time, so every chunk boundary
    (inside JSON, inside multi-byte UTF-8, between ``\\n`` and ``\\n``) is hit."""

    def __init__(self, body: bytes, size: int = 7) -> None:
        self.body = body
        self.size = size
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), self.size):
            yield self.body[start : start + self.size]

    async def aclose(self) -> None:
        self.closed = True


@attrs.define
class Wire:
    """A fake Anthropic endpoint: answers every request with ``body``."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    size: int = 7
    requests: list[httpx.Request] = attrs.field(factory=list)
    streams: list[Pieces] = attrs.field(factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        stream = Pieces(self.body, self.size)
        self.streams.append(stream)
        headers = {"content-type": self.content_type, "request-id": "req_test", **self.headers}
        return httpx.Response(self.status, headers=headers, stream=stream)

    @property
    def sent(self) -> dict[str, Any]:
        """The JSON body of the last request."""
        body: dict[str, Any] = json.loads(self.requests[-1].content)
        return body

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def wire_for(path: Path, *, status: int | None = None, **kwargs: Any) -> Wire:
    """A :class:`Wire` answering with the file at ``path`` (JSON or SSE by suffix)."""
    content_type = "text/event-stream; charset=utf-8" if path.suffix == ".sse" else "application/json"
    if status is None:
        status = int(path.name.split("_")[1]) if path.name.startswith("error_") else 200
    return Wire(path.read_bytes(), status, content_type, **kwargs)


def model_on(wire: Wire, model_id: str = "claude-sonnet-4-5", **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("api_key", "sk-ant-test")
    kwargs.setdefault("stream", wire.content_type.startswith("text/event-stream"))
    return AnthropicModel.messages(model_id, http_client=wire.client(), **kwargs)


def drain(
    model: AnthropicModel,
    request: ModelRequest,
    cancel: CancellationToken | None = None,
    *,
    backend: str = "trio",
    stop_after: Callable[[list[ModelEvent]], bool] | None = None,
) -> list[ModelEvent]:
    """All events of one ``invoke`` (or those up to ``stop_after``)."""

    async def go() -> list[ModelEvent]:
        events: list[ModelEvent] = []
        async for event in model.invoke(request, cancel or CancellationToken()):
            events.append(event)
            if stop_after is not None and stop_after(events):
                break
        return events

    return anyio.run(go, backend=backend)


def fold(events: list[ModelEvent]) -> Response:
    """The events as the agent loop sees them, aggregated."""
    return aggregate(tuple(events), RunId("r"), 1)
