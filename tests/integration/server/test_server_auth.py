"""Authentication on the real server: every way around it is refused, and a
refusal never tells which agents exist."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from httpx_ws import WebSocketDisconnect, WebSocketUpgradeError, connect_ws
from server_support import assistant, serving, wait_for
from starlette.requests import HTTPConnection

from helikon import RunContext
from helikon.server import AgentServer, BearerAuth

pytestmark = pytest.mark.integration

TOKEN = "s3cret-token-123"


def refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"error": {"code": "unauthorized", "message": "authentication is required"}}
    assert "payroll" not in response.text and "ledger" not in response.text


def test_bearer_auth_refuses_every_way_around_it() -> None:
    server = AgentServer(
        agents=[assistant(name="payroll"), assistant(name="ledger")], auth=BearerAuth([TOKEN])
    )
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        good = {"Authorization": f"Bearer {TOKEN}"}
        run_id = client.post("/agents/payroll/runs", json={"input": "hi"}, headers=good).json()["run_id"]
        attempts: list[dict[str, str]] = [
            {},
            {"Authorization": TOKEN},
            {"Authorization": "Bearer"},
            {"Authorization": "Bearer  x"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": f"Bearer {TOKEN[:-1]}"},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Bearer x{TOKEN}"},
            {"Authorization": f"Bearer {TOKEN.upper()}"},
            {"X-Authorization": f"Bearer {TOKEN}"},
        ]
        for headers in attempts:
            # known and unknown agents and runs are refused alike: nothing leaks
            refused(client.get("/agents", headers=headers))
            refused(client.post("/agents/payroll/runs", json={"input": "x"}, headers=headers))
            refused(client.post("/agents/nobody/runs", json={"input": "x"}, headers=headers))
            refused(client.get(f"/agents/payroll/runs/{run_id}", headers=headers))
            refused(client.get(f"/agents/payroll/runs/{run_id}/events", headers=headers))
            refused(client.post(f"/agents/payroll/runs/{run_id}/approvals", json={}, headers=headers))
            refused(client.post(f"/agents/payroll/runs/{run_id}/cancel", headers=headers))
            refused(client.get("/nowhere", headers=headers))
        refused(client.get(f"/agents/payroll/runs/{run_id}?access_token={TOKEN}"))
        refused(client.get("/%61gents"))  # an encoded path is still guarded

        # the public page and schema name no agent
        for path in ("/", "/openapi.json"):
            public = client.get(path)
            assert public.status_code == 200
            assert "payroll" not in public.text and "ledger" not in public.text

        # a WebSocket without the token is refused at the handshake
        with (
            pytest.raises((WebSocketUpgradeError, WebSocketDisconnect)),
            connect_ws(f"{base}/agents/payroll/runs/{run_id}/events", client) as ws,
        ):
            ws.receive_text()

        # with it, everything works, "bearer" in any case
        lower = {"Authorization": f"bearer {TOKEN}"}
        assert [a["name"] for a in client.get("/agents", headers=lower).json()["agents"]] == [
            "ledger",
            "payroll",
        ]
        with connect_ws(f"{base}/agents/payroll/runs/{run_id}/events", client, headers=good) as ws:
            assert '"RunStarted"' in ws.receive_text()


def test_a_user_function_authenticates_and_the_context_sees_the_identity() -> None:
    seen: list[Any] = []

    async def who(request: HTTPConnection) -> str | None:
        key = request.headers.get("x-api-key")
        return {"k-alice": "alice", "k-bob": "bob"}.get(key or "")

    def context(request: HTTPConnection, session: Any) -> RunContext[Any]:
        seen.append(request.state.identity)
        return RunContext.ephemeral({"user": request.state.identity}).with_session(session)

    def crashing(request: HTTPConnection) -> str:
        raise RuntimeError("the identity provider is down")

    server = AgentServer(agents=[assistant()], auth=who, context=context)
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        refused(client.get("/agents"))
        refused(client.get("/agents", headers={"x-api-key": "k-eve"}))
        body = client.post(
            "/agents/assistant/runs", json={"input": "hi"}, headers={"x-api-key": "k-bob"}
        ).json()
        assert body["output"] == "echo: hi"
        assert seen == ["bob"]
        status = wait_for(
            client.__class__(base_url=base, headers={"x-api-key": "k-bob"}),
            f"/agents/assistant/runs/{body['run_id']}",
            "completed",
        )
        assert status["status"] == "completed"
        # the run is bob's: alice gets the 404 of a run that does not exist (issue 31)
        other = client.get(f"/agents/assistant/runs/{body['run_id']}", headers={"x-api-key": "k-alice"})
        assert other.status_code == 404

    # an authenticator that raises refuses (fails closed) rather than letting the request in;
    # one that answers False refuses too
    with serving(AgentServer(agents=[assistant()], auth=crashing).app()) as base:
        refused(httpx.get(f"{base}/agents"))
    with serving(AgentServer(agents=[assistant()], auth=lambda request: False).app()) as base:
        refused(httpx.get(f"{base}/agents"))


def test_bearer_auth_needs_real_tokens() -> None:
    with pytest.raises(ValueError, match="8 or more"):
        BearerAuth([])
    with pytest.raises(ValueError, match="8 or more"):
        BearerAuth(["short"])
    assert BearerAuth({"ci": TOKEN})  # named tokens: the name is the identity
