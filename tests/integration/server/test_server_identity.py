"""Runs and sessions belong to the identity that made them (issue 31, item 1),
and a caller lists its own runs a page at a time (item 2): two bearer tokens,
two identities, every run route, SSE, WebSocket and sessions tried as the other
one, on a real server on loopback."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from httpx_ws import connect_ws
from server_support import approving_context, assistant, serving, wait_for

from helikon.server import AgentServer, BearerAuth

pytestmark = pytest.mark.integration

ALICE = "alice-token-0001"
BOB = "bob-token-000002"


def _server(**options: Any) -> AgentServer:
    server = AgentServer(
        context=approving_context(), auth=BearerAuth({"alice": ALICE, "bob": BOB}), **options
    )
    return server.with_agent(assistant())


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_another_identity_cannot_see_approve_or_cancel_a_run() -> None:
    with (
        serving(_server().app()) as base,
        httpx.Client(base_url=base, headers=_as(ALICE)) as alice,
        httpx.Client(base_url=base, headers=_as(BOB)) as bob,
    ):
        run_id = alice.post("/agents/assistant/runs?mode=async", json={"input": "pay 5"}).json()["run_id"]
        url = f"/agents/assistant/runs/{run_id}"
        pending = wait_for(alice, url, "awaiting_approval")["pending_approvals"]
        decisions = {"decisions": [{"call_id": pending[0]["call_id"], "approved": True}]}
        # bob gets what a run that does not exist gets
        assert bob.get(url).status_code == 404
        assert bob.get(f"{url}/events").status_code == 404
        assert bob.post(f"{url}/approvals", json=decisions).status_code == 404
        assert bob.post(f"{url}/cancel").status_code == 404
        ws: Any
        with connect_ws(f"{base}{url}/events", bob) as ws:
            assert ws.receive_json()["error"]["code"] == "unknown_run"
        assert bob.get("/agents/assistant/runs").json() == {"runs": [], "next": None}
        assert alice.get(url).json()["status"] == "awaiting_approval"  # untouched by bob
        # alice can do all of it
        assert alice.post(f"{url}/approvals", json=decisions).status_code == 200
        assert wait_for(alice, url, "completed")["output"] == "The tool said: paid 5"
        assert [r["run_id"] for r in alice.get("/agents/assistant/runs").json()["runs"]] == [run_id]


def test_a_session_id_is_the_callers_own() -> None:
    with (
        serving(_server().app()) as base,
        httpx.Client(base_url=base, headers=_as(ALICE)) as alice,
        httpx.Client(base_url=base, headers=_as(BOB)) as bob,
    ):
        session = {"X-Session-Id": "conversation-1"}
        for text in ("my card is 4111", "and my pin is 1234"):
            assert (
                alice.post("/agents/assistant/runs", json={"input": text}, headers=session).status_code == 200
            )
        heard = bob.post("/agents/assistant/runs", json={"input": "history"}, headers=session).json()
        assert heard["output"] == "I have seen 1 user messages"  # his own only
        mine = alice.post("/agents/assistant/runs", json={"input": "history"}, headers=session).json()
        assert mine["output"] == "I have seen 3 user messages"


def test_authorize_shares_runs_on_purpose() -> None:
    asked: list[tuple[Any, Any, str]] = []

    def authorize(identity: Any, owner: Any, action: str) -> bool:
        asked.append((identity, owner, action))
        return action == "read"  # bob may watch alice's runs, not act on them

    with (
        serving(_server(authorize=authorize).app()) as base,
        httpx.Client(base_url=base, headers=_as(ALICE)) as alice,
        httpx.Client(base_url=base, headers=_as(BOB)) as bob,
    ):
        run_id = alice.post("/agents/assistant/runs", json={"input": "hello"}).json()["run_id"]
        assert bob.get(f"/agents/assistant/runs/{run_id}").json()["status"] == "completed"
        assert bob.post(f"/agents/assistant/runs/{run_id}/cancel").status_code == 404
    assert asked == [("bob", "alice", "read"), ("bob", "alice", "cancel")]


def test_runs_are_listed_newest_first_a_page_at_a_time() -> None:
    with serving(_server().app()) as base, httpx.Client(base_url=base, headers=_as(ALICE)) as alice:
        ids = [
            alice.post("/agents/assistant/runs", json={"input": f"hi {n}"}).json()["run_id"] for n in range(5)
        ]
        seen: list[str] = []
        after: str | None = None
        pages = 0
        while True:
            params = {"limit": "2", **({"after": after} if after else {})}
            page = alice.get("/agents/assistant/runs", params=params).json()
            seen += [r["run_id"] for r in page["runs"]]
            pages += 1
            after = page["next"]
            if after is None:
                break
        assert seen == ids[::-1] and pages == 3
        assert alice.get("/agents/assistant/runs", params={"limit": "0"}).status_code == 400
        assert alice.get("/agents/assistant/runs", params={"after": "nope"}).status_code == 404
        assert alice.get("/agents/nobody/runs").status_code == 404
