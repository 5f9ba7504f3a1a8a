"""Approvals on the server name their path: two branches of one run whose
models reuse a call id are listed and answered apart (issue 27, defect 4)."""

from __future__ import annotations

import httpx
import pytest
from server_support import approving_context, serving, wait_for

from helikon import LlmAgent, ParallelAgent, tool
from helikon.server import AgentServer
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration


def desk(paid: list[int]) -> ParallelAgent:
    @tool
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: dollars.
        """
        paid.append(amount)
        return f"paid {amount}"

    def branch(name: str, amount: int) -> LlmAgent[None]:
        model = MockModel([call_tools(("c1", "pay", {"amount": amount})), say(f"{name} done")])
        return LlmAgent(name=name, model=model, tools=[pay])

    return ParallelAgent("desk", "Both at once.").add(branch("small", 5)).add(branch("big", 100000))


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
