"""Shared helpers of the Bedrock adapter tests: MockTransport answers in small
pieces, event-stream frames from event lists, signature checks, folding events.

The real recordings are read from ``../shared/fixtures/provider-wire/bedrock/``
(tests skip with a reason when that folder is absent); hand-written payloads
live in ``tests/fixtures/bedrock/``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from helikon.cancel import CancellationToken
from helikon.errors import ModelError
from helikon.ids import RunId
from helikon.items import user_text
from helikon.loop import aggregate
from helikon.model import Finish, ModelEvent, ModelRequest
from helikon.providers._bedrock_eventstream import encode_message
from helikon.providers._bedrock_sigv4 import sign_headers
from helikon.providers.bedrock import AwsCredentials, BedrockModel

ROOT = Path(__file__).resolve().parents[3]
OWN = ROOT / "tests" / "fixtures" / "bedrock"
WIRE = ROOT.parent / "shared" / "fixtures" / "provider-wire" / "bedrock"
needs_wire = pytest.mark.skipif(not WIRE.is_dir(), reason=f"real provider recordings not found at {WIRE}")

KEY = AwsCredentials("AKIDTEST", "test-secret", "test-session-token")
Handler = Callable[[httpx.Request], httpx.Response]


# -- helpers ----------------------------------------------------------------------


class Pieces(httpx.AsyncByteStream):
    """A streamed body delivered in small pieces, with a checkpoint before each."""

    def __init__(self, data: bytes, size: int = 7) -> None:
        self.data, self.size = data, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.size):
            await trio.sleep(0)
            yield self.data[start : start + self.size]


def event_stream(body: bytes, size: int = 7) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "application/vnd.amazon.eventstream"}, stream=Pieces(body, size)
    )


def frames(events: list[Any]) -> bytes:
    """Encode ``[event type, payload]`` pairs (and exception entries) as frames."""
    out = b""
    for entry in events:
        if isinstance(entry, dict):
            headers = {":message-type": "exception", ":exception-type": entry["exception"]}
            out += encode_message(
                {**headers, ":content-type": "application/json"}, json.dumps(entry["payload"]).encode()
            )
        else:
            kind, payload = entry
            headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
            out += encode_message(headers, json.dumps(payload).encode())
    return out


def own_stream(name: str) -> bytes:
    return frames(json.loads((OWN / name).read_text())["events"])


def model(handler: Handler, model_id: str = "us.amazon.nova-micro-v1:0", **kwargs: Any) -> BedrockModel:
    kwargs.setdefault("region", "us-east-1")
    kwargs.setdefault("credentials", KEY)
    return BedrockModel.converse(
        model_id, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), **kwargs
    )


def collect(
    m: BedrockModel, request: ModelRequest, cancel: CancellationToken | None = None
) -> list[ModelEvent]:
    async def main() -> list[ModelEvent]:
        return [event async for event in m.invoke(request, cancel or CancellationToken())]

    return trio.run(main)


def failure(m: BedrockModel, request: ModelRequest) -> tuple[Any, list[ModelEvent]]:
    seen: list[ModelEvent] = []

    async def main() -> None:
        async for event in m.invoke(request, CancellationToken()):
            seen.append(event)

    with pytest.raises(ModelError) as caught:
        trio.run(main)
    return caught.value.failure, seen


def verify_signature(request: httpx.Request, credentials: AwsCredentials = KEY) -> None:
    """Recompute the SigV4 signature of what arrived and compare."""
    when = datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expected = sign_headers(
        method=request.method,
        raw_path=request.url.raw_path.decode(),
        headers={"host": request.headers["host"], "content-type": request.headers["content-type"]},
        body=request.content,
        credentials=credentials,
        region="us-east-1",
        service="bedrock",
        now=when,
    )
    assert request.headers["authorization"] == expected["authorization"]
    assert request.headers["x-amz-security-token"] == credentials.session_token
    assert request.headers["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential=AKIDTEST/{request.headers['x-amz-date'][:8]}/us-east-1/bedrock/"
        "aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="
    )


def body_of(request: httpx.Request) -> Any:
    return msgspec.json.decode(request.content)


def summary(events: list[ModelEvent]) -> dict[str, Any]:
    response = aggregate(tuple(events), RunId("r"), 1)
    finishes = [e for e in events if isinstance(e, Finish)]
    assert len(finishes) == 1 and events[-1] is finishes[0], "exactly one Finish, last"
    return {
        "text": response.text,
        "reasoning": [(p.text, p.signature) for p in response.reasoning],
        "calls": [(c.call_id, c.name, c.arguments) for c in response.calls],
        "usage": response.usage,
        "finish": response.finish,
    }


HI = ModelRequest((user_text("Hi"),))


def json_answer(path: Path, expected_url: str) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == expected_url
        assert request.headers["accept"] == "application/json"
        verify_signature(request)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=path.read_bytes())

    return handler


NOVA_CONVERSE = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.amazon.nova-micro-v1%3A0/converse"


def capture(answer: httpx.Response | None = None) -> tuple[list[httpx.Request], Handler]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        verify_signature(request)
        seen.append(request)
        return answer or event_stream(frames([["messageStop", {"stopReason": "end_turn"}]]))

    return seen, handler
