"""Issue 31, at the edge of both servers, on real Hypercorn servers on loopback:
nesting bombs are 4xx, the book's message shape is read, SSE frames carry the
book's names, and an authenticator refuses with its own status and message."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from httpx_sse import connect_sse
from server_support import server_for, serving
from starlette.requests import HTTPConnection

from helikon import LlmAgent
from helikon.server import AgentCoreServer, AuthRejection
from helikon.testing import MockModel, say

pytestmark = pytest.mark.integration

BOMBS = [
    b"[" * 100_000,
    b"[" * 100_000 + b"]" * 100_000,
    b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"messages": [' + b"{" + b'"a":{' * 500 + b"}" * 500 + b"}]}",
]
JSON = {"accept": "application/json"}
BOOK_MESSAGES = {"messages": [{"type": "user_message", "content": [{"type": "text", "text": "hello there"}]}]}


@pytest.mark.parametrize("body", BOMBS, ids=["open", "balanced", "in-messages", "objects"])
def test_a_nesting_bomb_is_a_4xx_on_the_agent_server(body: bytes) -> None:
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        response = client.post(
            "/agents/assistant/runs", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert "deeper than" in response.json()["error"]["message"]
        assert client.get("/health").status_code == 200  # still serving


def _agentcore(reply: str = "hi back") -> AgentCoreServer[Any]:
    return AgentCoreServer(LlmAgent(name="echo", model=MockModel([say(reply)])))


async def _agentcore_post(server: AgentCoreServer[Any], **kw: Any) -> httpx.Response:
    async with anyio.create_task_group() as group:
        url: str = await group.start(server.serve, "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            response = await http.post("/invocations", **kw)
            response.read()
        group.cancel_scope.cancel()
    return response


@pytest.mark.parametrize("body", BOMBS, ids=["open", "balanced", "in-messages", "objects"])
def test_a_nesting_bomb_is_a_4xx_on_agentcore(body: bytes) -> None:
    async def main() -> httpx.Response:
        return await _agentcore_post(
            _agentcore(), content=body, headers={"content-type": "application/json", **JSON}
        )

    response = anyio.run(main)
    assert response.status_code == 400, response.text
    assert "deeper than" in response.json()["error"]["message"]


def test_the_books_message_shape_is_read_beside_helikons() -> None:
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        response = client.post("/agents/assistant/runs", json=BOOK_MESSAGES)
        assert response.status_code == 200, response.text
        assert response.json()["output"] == "echo: hello there"


def test_agentcore_reads_the_books_message_shape() -> None:
    async def main() -> httpx.Response:
        return await _agentcore_post(_agentcore(), json=BOOK_MESSAGES, headers={"accept": "application/json"})

    response = anyio.run(main)
    assert response.status_code == 200, response.text
    assert response.json()["final_output"] == "hi back"


def test_sse_frames_carry_the_books_names() -> None:
    url = "/agents/assistant/runs?stream=sse"
    with (
        serving(server_for().app()) as base,
        httpx.Client(base_url=base) as client,
        connect_sse(client, "POST", url, json={"input": "hi"}) as source,
    ):
        names = [event.event for event in source.iter_sse()]
    assert names[0] == "run_started" and names[-1] == "run_completed"
    assert "token_delta" in names or "message_output" in names


def test_the_synthetic_terminal_frame_is_run_failed() -> None:
    from helikon.server import RunLog, sse_message

    log = RunLog()
    log.close("the runner stopped")
    assert b"event: run_failed\n" in sse_message(log.frames[-1])


def test_an_authenticator_refuses_with_its_own_status_and_message() -> None:
    def auth(request: HTTPConnection) -> str:
        token = request.headers.get("authorization", "")
        if token == "Bearer reader-token":
            raise AuthRejection(403, "this token may read but not run agents")
        if token == "Bearer returned-token":
            return AuthRejection(403, "refused by value")  # type: ignore[return-value]
        if token != "Bearer good-token":
            raise AuthRejection(401, "send a bearer token")
        return "alice"

    with serving(server_for(auth=auth).app()) as base, httpx.Client(base_url=base) as client:
        refused = client.post(
            "/agents/assistant/runs", json={"input": "hi"}, headers={"authorization": "Bearer reader-token"}
        )
        assert refused.status_code == 403
        reason = "this token may read but not run agents"
        assert refused.json()["error"] == {"code": "forbidden", "message": reason}
        assert "www-authenticate" not in refused.headers
        returned = client.get("/agents", headers={"authorization": "Bearer returned-token"})
        assert returned.status_code == 403 and returned.json()["error"]["message"] == "refused by value"
        anonymous = client.get("/agents")
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
        assert anonymous.json()["error"]["message"] == "send a bearer token"
        assert client.get("/agents", headers={"authorization": "Bearer good-token"}).status_code == 200


def test_an_auth_rejection_needs_a_client_error_status() -> None:
    from helikon.errors import ConfigError

    with pytest.raises(ConfigError, match="4xx"):
        AuthRejection(500, "no")


@pytest.mark.parametrize("accept", [None, "*/*"])
def test_agentcore_answers_json_unless_sse_is_asked_for(accept: str | None) -> None:
    async def main() -> tuple[httpx.Response, httpx.Response]:
        server = AgentCoreServer(LlmAgent(name="echo", model=MockModel([say("one"), say("two")])))
        async with anyio.create_task_group() as group:
            url: str = await group.start(server.serve, "127.0.0.1", 0)
            async with httpx.AsyncClient(base_url=url) as http:
                headers = {"accept": accept} if accept is not None else {}
                request = http.build_request("POST", "/invocations", json={"prompt": "hi"}, headers=headers)
                if accept is None:
                    del request.headers["accept"]  # httpx adds */* by default
                plain = await http.send(request)
                streamed = await http.post(
                    "/invocations", json={"prompt": "hi"}, headers={"accept": "text/event-stream"}
                )
            group.cancel_scope.cancel()
        return plain, streamed

    plain, streamed = anyio.run(main)
    assert plain.headers["content-type"].startswith("application/json"), plain.text
    assert plain.json()["final_output"] == "one"
    assert streamed.headers["content-type"].startswith("text/event-stream")


def test_agentcore_takes_bodies_up_to_the_services_limit() -> None:
    from helikon.server._agentcore_protocol import DEFAULT_MAX_BODY

    assert DEFAULT_MAX_BODY >= 100 * 1000 * 1000  # the service accepts payloads up to 100 MB
    body = {"prompt": "x" * (3 * 1024 * 1024)}  # 3 MiB: the official app served it, helikon said 413

    async def main() -> tuple[httpx.Response, httpx.Response]:
        smaller = AgentCoreServer(LlmAgent(name="echo", model=MockModel([]))).with_max_body_bytes(1024)
        big = await _agentcore_post(_agentcore("got it"), json=body, headers=JSON)
        small = await _agentcore_post(smaller, json=body, headers=JSON)
        return big, small

    big, small = anyio.run(main)
    assert big.status_code == 200 and big.json()["final_output"] == "got it"
    assert small.status_code == 413  # configurable


def test_the_openapi_document_matches_what_the_handlers_accept() -> None:
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        schema = client.get("/openapi.json").json()
        # no auth configured: no security declared, no 401 promised
        assert "security" not in schema and "securitySchemes" not in schema["components"]
        assert all("401" not in op["responses"] for path in schema["paths"].values() for op in path.values())
        # message items have schemas, in both spellings
        item = schema["components"]["schemas"]["Item"]
        assert {"UserMessage", "user_message"} <= set(item["oneOf"][0]["properties"]["type"]["enum"])
        run = client.post("/agents/assistant/runs?mode=async", json={"input": "hi"}).json()
        events = f"/agents/assistant/runs/{run['run_id']}/events"
        assert client.get(f"{events}?since=-1").status_code == 400  # the schema's minimum 0
        # stream=sse with mode=async (the schema allows both): the events, the run outliving the stream
        with connect_sse(
            client, "POST", "/agents/assistant/runs?stream=sse&mode=async", json={"input": "hi"}
        ) as s:
            assert s.response.status_code == 200
            assert [e.event for e in s.iter_sse()][-1] == "run_completed"
    with serving(server_for(auth=lambda request: "alice").app()) as base:
        assert httpx.get(f"{base}/openapi.json").json()["security"] == [{"bearer": []}]
