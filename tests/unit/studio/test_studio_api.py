"""The studio's JSON API on the real app (Starlette's test client): the run
list over golden traces, a run's timeline with a tree's wave nested by agent
path, runs made through the studio recorded (secrets scrubbed), and files
that are not traces listed with their error."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import attrs
from starlette.testclient import TestClient
from tests_support_studio import GOLDEN, agent_with

from helikon import RunContext, tool
from helikon.governance import GuardRule
from helikon.studio import Catalogue, Studio
from helikon.studio._catalog import MAX_RECORDED
from helikon.testing import call_tools, say
from helikon.trace import Trace

BASE = "http://127.0.0.1:8765"
SECRET = "sk-studio-5e1f0c77aa9d"


def runs_by_name(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get("/api/runs")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    return {row["name"]: row for row in response.json()["runs"]}


def test_the_run_list_shows_agent_status_turns_tokens_and_time_of_each_golden() -> None:
    with TestClient(Studio(golden=GOLDEN).app(), base_url=BASE) as client:
        rows = runs_by_name(client)
    assert len(rows) == len(list(GOLDEN.glob("*.jsonl")))
    single = rows["single_tool.jsonl"]
    assert (single["agent"], single["status"], single["source"]) == (
        "budget-assistant",
        "completed",
        "golden",
    )
    assert (single["turns"], single["steps"]) == (2, 3)
    assert (single["input_tokens"], single["output_tokens"]) == (100, 21)
    assert single["time"].endswith("Z")
    assert rows["model_error.jsonl"]["status"] == "failed"
    assert rows["cancelled_run.jsonl"]["status"] == "cancelled"
    # a tree's turns count every member's model calls
    assert rows["parallel_fan_out.jsonl"]["turns"] == 3


def test_a_tree_runs_wave_is_nested_by_agent_path_with_each_members_request_and_reply() -> None:
    with TestClient(Studio(golden=GOLDEN).app(), base_url=BASE) as client:
        run_id = runs_by_name(client)["parallel_fan_out.jsonl"]["id"]
        data = client.get(f"/api/runs/{run_id}").json()
    wave = data["steps"][0]
    assert (wave["effect_type"], wave["result_type"]) == ("PerformAll", "AllPerformed")
    paths = [child["path"] for child in wave["children"]]
    assert paths == [["optimist"], ["pessimist"], ["realist"]]
    optimist = wave["children"][0]
    assert optimist["effect_type"] == "CallModel" and optimist["result_type"] == "ModelResponded"
    assert optimist["effect"]["request"]["messages"][0]["content"][0]["text"] == "What will the market do?"
    said = "".join(e.get("text", "") for e in optimist["result"]["events"])
    assert said == "It will go up."
    assert data["start"][0]["type"] == "RunStarted"
    assert data["end"][-1]["type"] == "RunCompleted"
    assert data["run"]["agent"] == "three-lenses"


def test_a_tool_steps_arguments_and_output_are_in_the_timeline() -> None:
    with TestClient(Studio(golden=GOLDEN).app(), base_url=BASE) as client:
        run_id = runs_by_name(client)["single_tool.jsonl"]["id"]
        steps = client.get(f"/api/runs/{run_id}").json()["steps"]
    tools = steps[1]
    assert tools["effect_type"] == "ExecuteTools"
    assert tools["effect"]["steps"][0]["args"] == {"category": "Dining"}
    assert tools["result"]["results"][0]["output"] == {"budget": 250.0}
    assert any(e["type"] == "ToolOutputItem" for e in tools["events"])


def test_an_unknown_run_is_404_and_a_file_that_is_no_trace_is_listed_with_its_error(tmp_path: Path) -> None:
    shutil.copy(GOLDEN / "plain_answer.jsonl", tmp_path / "ok.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"kind": "header"\n')
    with TestClient(Studio(traces=[tmp_path]).app(), base_url=BASE) as client:
        rows = runs_by_name(client)
        assert rows["ok.jsonl"]["source"] == "traces" and rows["ok.jsonl"]["status"] == "completed"
        assert "not JSON" in rows["broken.jsonl"]["error"]
        broken = client.get(f"/api/runs/{rows['broken.jsonl']['id']}")
        assert broken.status_code == 422 and broken.json()["error"]["code"] == "not_a_trace"
        assert client.get("/api/runs/..%2F..%2Fetc%2Fpasswd").status_code == 404
        assert client.get("/api/runs/nope").status_code == 404


@tool
async def read_vault(name: str) -> str:
    """Read a vault entry.

    Args:
        name: the entry.
    """
    return f"{name}: token={SECRET}"


def test_a_run_made_through_the_studio_is_recorded_with_its_secrets_scrubbed() -> None:
    desk = agent_with(
        "vault-desk",
        call_tools(("read_vault", {"name": "prod"})),
        say("I read it."),
        tools=[read_vault],
    )
    ctx = RunContext.ephemeral(None).with_extra_secrets([SECRET])
    with TestClient(Studio(agents=[desk], context=ctx).app(), base_url=BASE) as client:
        assert client.get("/api/runs").json() == {"runs": [], "agents": ["vault-desk"]}
        answer = client.post("/server/agents/vault-desk/runs", json={"input": "read the prod entry"})
        assert answer.status_code == 200, answer.text
        rows = client.get("/api/runs").json()["runs"]
        assert [(r["source"], r["agent"], r["status"], r["turns"]) for r in rows] == [
            ("studio", "vault-desk", "completed", 2)
        ]
        page = client.get(f"/api/runs/{rows[0]['id']}")
    assert page.status_code == 200
    assert SECRET not in page.text
    tools = page.json()["steps"][1]
    assert tools["effect_type"] == "ExecuteTools"
    assert "token=" in str(tools["result"])  # the output is there, the secret is not


def test_the_studio_keeps_its_newest_recorded_runs_only() -> None:
    trace = Trace.load(GOLDEN / "plain_answer.jsonl")
    catalogue = Catalogue()
    ids = [
        catalogue.add(attrs.evolve(trace, header=attrs.evolve(trace.header, run_id=f"run-{n}")), float(n)).id
        for n in range(MAX_RECORDED + 2)
    ]
    kept = [entry.id for entry in catalogue.entries()]
    assert len(kept) == MAX_RECORDED
    assert ids[0] not in kept and ids[1] not in kept and kept[0] == ids[-1]


@tool
async def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def wait_for(client: TestClient, url: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        described: dict[str, Any] = client.get(url).json()
        if described["status"] == status:
            return described
        assert time.monotonic() < deadline, described
        time.sleep(0.05)


def test_a_studio_run_approved_by_a_human_is_recorded_with_the_approval() -> None:
    desk = agent_with("desk", call_tools(("pay", {"amount": 12})), say("Paid."), tools=[pay])
    ctx = RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay")]).with_suspend_on_approval()
    with TestClient(Studio(agents=[desk], context=ctx).app(), base_url=BASE) as client:
        started = client.post("/server/agents/desk/runs?mode=async", json={"input": "pay 12"})
        assert started.status_code == 202, started.text
        url = f"/server/agents/desk/runs/{started.headers['x-run-id']}"
        waiting = wait_for(client, url, "awaiting_approval")
        call_id = waiting["pending_approvals"][0]["call_id"]
        decisions = {"decisions": [{"call_id": call_id, "approved": True, "reason": "ok by me"}]}
        assert client.post(f"{url}/approvals", json=decisions).status_code == 200
        wait_for(client, url, "completed")
        rows = client.get("/api/runs").json()["runs"]
        assert [(r["agent"], r["status"]) for r in rows] == [("desk", "completed")]
        steps = client.get(f"/api/runs/{rows[0]['id']}").json()["steps"]
    kinds = [(step["effect_type"], step["result_type"]) for step in steps]
    assert ("AskApprovals", "ApprovalsGiven") in kinds
    given = steps[kinds.index(("AskApprovals", "ApprovalsGiven"))]["result"]["decisions"]
    assert [(d["call_id"], d["approved"]) for d in given] == [(call_id, True)]
    assert "paid 12" in json.dumps(steps)
