"""Approvals on the server name their path: two branches of one run whose
models reuse a call id are listed and answered apart (issue 27, defect 4)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import httpx
import pytest
from httpx_sse import connect_sse
from server_support import approving_context, paying_branches, serving, wait_for

from helikon import LlmAgent, ParallelAgent, tool
from helikon.server import AgentServer
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration


def desk(paid: list[int]) -> ParallelAgent:
    """Two branches whose models reuse the call id ``c1``: only the path tells them apart."""
    result: ParallelAgent = paying_branches("desk", paid)
    return result


def test_two_branches_sharing_a_call_id_are_shown_and_answered_apart() -> None:
    paid: list[int] = []
    server = AgentServer(agents=[desk(paid)], context=approving_context())
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        run_id = client.post("/agents/desk/runs?mode=async", json={"input": "pay"}).json()["run_id"]
        url = f"/agents/desk/runs/{run_id}"
        waiting = wait_for(client, url, "awaiting_approval")
        for _ in range(100):  # both branches ask; wait until both questions are listed
            if len(waiting["pending_approvals"]) == 2:
                break
            waiting = client.get(url).json()
        pending = sorted((p["path"], p["call_id"]) for p in waiting["pending_approvals"])
        assert pending == [(["big"], "c1"), (["small"], "c1")]

        ambiguous = client.post(f"{url}/approvals", json={"decisions": [{"call_id": "c1", "approved": True}]})
        assert ambiguous.status_code == 409
        assert "answer with its path" in ambiguous.json()["error"]["message"]

        decisions = [
            {"call_id": "c1", "path": ["small"], "approved": True},
            {"call_id": "c1", "path": ["big"], "approved": False, "reason": "too much"},
        ]
        answered = client.post(f"{url}/approvals", json={"decisions": decisions})
        assert answered.status_code == 200, answered.text
        done = wait_for(client, url, "completed")
        assert done["output"] == '{"big":"big done","small":"small done"}'
    assert paid == [5]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_branchs_approval_reaches_an_sse_client_while_the_other_branch_waits(backend: str) -> None:
    """One branch asks a human; the other's tool runs until the test lets it
    go, after the approval was seen on the SSE stream and answered: the
    request is streamed while its sibling is still in flight (a wave's
    events are not held until the wave is over)."""
    release = threading.Event()
    finished: list[str] = []
    paid: list[int] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: dollars.
        """
        paid.append(amount)
        return f"paid {amount}"

    @tool
    async def slow() -> str:
        """Runs until released."""
        given_up = time.monotonic() + 15
        while not release.is_set() and time.monotonic() < given_up:
            await anyio.sleep(0.02)
        finished.append("slow")
        return "released" if release.is_set() else "gave up"

    payer = LlmAgent(
        name="payer",
        model=MockModel([call_tools(("c1", "pay", {"amount": 5})), say("payer done")]),
        tools=[pay],
    )
    waiter = LlmAgent(
        name="waiter", model=MockModel([call_tools(("slow", {})), say("waiter done")]), tools=[slow]
    )
    tree = ParallelAgent("tree", "Both at once.").add(payer).add(waiter)
    server = AgentServer(agents=[tree], context=approving_context())
    frames: list[dict[str, Any]] = []
    with (
        serving(server.app(), backend) as base,
        httpx.Client(base_url=base, timeout=20) as client,
        connect_sse(client, "POST", "/agents/tree/runs?stream=sse", json={"input": "go"}) as source,
    ):
        assert source.response.status_code == 200
        run_id = source.response.headers["x-run-id"]
        for event in source.iter_sse():
            if not event.data:
                continue  # a keep-alive
            frame = json.loads(event.data)
            frames.append(frame)
            if frame["type"] == "ApprovalRequested":
                assert frame["path"] == ["payer"] and frame["tool"] == "pay"
                assert not finished  # the other branch still waits
                decision = {"call_id": frame["call_id"], "path": frame["path"], "approved": True}
                answered = client.post(
                    f"/agents/tree/runs/{run_id}/approvals", json={"decisions": [decision]}
                )
                assert answered.status_code == 200, answered.text
            elif frame["type"] == "ToolOutputItem" and frame.get("path") == ["payer"]:
                assert not finished
                release.set()  # the paid call's output came while its sibling still ran
    assert frames[-1]["type"] == "RunCompleted", frames[-1]
    outputs = [(f["path"], f["item"]["content"]) for f in frames if f["type"] == "ToolOutputItem"]
    assert outputs == [(["payer"], "paid 5"), (["waiter"], "released")]
    assert paid == [5]
