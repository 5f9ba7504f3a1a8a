"""The mock OpenAI server the Chat Completions, Responses and profile tests
share: bodies delivered in small pieces, a server that answers from a list
and keeps the requests, and ``invoke`` helpers over ``OpenAIModel.invoke``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import attrs
import httpx
import pytest

from helikon.cancel import CancellationToken
from helikon.errors import ModelError, ModelFailure
from helikon.ids import RunId
from helikon.items import user_text
from helikon.loop._aggregate import Response, aggregate
from helikon.model import ModelEvent, ModelRequest
from helikon.providers.openai import OpenAIModel


class Chunked(httpx.AsyncByteStream):
    """A response body delivered in small pieces (7 bytes by default), then
    ``then()`` awaited. An iterator object, not a generator, so a stream the
    client stops early leaves nothing to finalise."""

    def __init__(self, body: bytes, size: int = 7, then: Callable[[], Any] | None = None) -> None:
        self._pieces = [body[start : start + size] for start in range(0, len(body), size)]
        self._then = then

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._pieces:
            return self._pieces.pop(0)
        if self._then is not None:
            await self._then()
        raise StopAsyncIteration


def json_reply(
    body: bytes | object, status: int = 200, headers: dict[str, str] | None = None
) -> httpx.Response:
    """A JSON answer (``body`` encoded unless it is bytes already), in pieces."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(
        status, headers={"content-type": "application/json", **(headers or {})}, stream=Chunked(raw)
    )


@attrs.define
class Server:
    """Answers each request with the next reply (an exception in the list is
    raised, as a transport would) and keeps the requests."""

    replies: list[httpx.Response | Exception]
    requests: list[httpx.Request] = attrs.field(factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def body(self, n: int = -1) -> Any:
        """Request ``n``'s JSON body (the last by default)."""
        return json.loads(self.requests[n].content)

    def client(self) -> httpx.AsyncClient:
        """An HTTP client whose every request this server answers."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


HELLO = ModelRequest((user_text("hi"),))


def invoke(model: OpenAIModel, request: ModelRequest = HELLO) -> list[ModelEvent]:
    """What ``model.invoke`` streams for ``request`` (under trio)."""

    async def main() -> list[ModelEvent]:
        return [event async for event in model.invoke(request, CancellationToken())]

    return anyio.run(main, backend="trio")


def reply_of(events: list[ModelEvent]) -> Response:
    return aggregate(tuple(events), RunId("r"), 1)


def failure_of(model: OpenAIModel, request: ModelRequest = HELLO) -> tuple[ModelFailure, list[ModelEvent]]:
    """The ModelError's failure, and the events streamed before it."""
    seen: list[ModelEvent] = []

    async def main() -> None:
        async for event in model.invoke(request, CancellationToken()):
            seen.append(event)

    with pytest.raises(ModelError) as caught:
        anyio.run(main, backend="trio")
    return caught.value.failure, seen
