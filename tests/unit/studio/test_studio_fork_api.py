"""The studio's time-travel API on the real app: the machine state after any
step (secrets redacted), a fork at a tool result with an edited output (a
new run linked to its parent, replayed up to the edit and live after it),
a fork of the user's message, the diff of two runs by field path, and the
refusals (no agent, a bad step or answer)."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient
from tests_support_studio import GOLDEN

from helikon import LlmAgent, RunContext, tool
from helikon.items import ToolResult
from helikon.model import ModelRequest
from helikon.studio import Studio
from helikon.testing import FunctionModel, call_tools

BASE = "http://127.0.0.1:8765"
SECRET = "sk-fork-9d3a61c0b2"


@tool
async def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city} (key {SECRET})"


def forecast(request: ModelRequest) -> Any:
    outputs = [m for m in request.messages if isinstance(m, ToolResult)]
    if not outputs:
        return call_tools(("weather", {"city": "Oslo"}))
    return f"The forecast: {outputs[-1].content}"


def _studio() -> tuple[Studio, FunctionModel]:
    model = FunctionModel(forecast)
    agent = LlmAgent(name="forecaster", model=model, tools=[weather])
    ctx = RunContext.ephemeral(None).with_extra_secrets([SECRET])
    return Studio(agents=[agent], context=ctx, golden=GOLDEN), model


def _chat(client: TestClient) -> str:
    answer = client.post("/server/agents/forecaster/runs", json={"input": "weather in Oslo?"})
    assert answer.status_code == 200, answer.text
    (row,) = [r for r in client.get("/api/runs").json()["runs"] if r["source"] == "studio"]
    return str(row["id"])


def test_the_state_after_each_step_is_a_json_snapshot_with_secrets_redacted() -> None:
    studio, _ = _studio()
    with TestClient(studio.app(), base_url=BASE) as client:
        run = _chat(client)
        steps = client.get(f"/api/runs/{run}").json()["steps"]
        sizes = []
        for k in range(-1, len(steps)):
            response = client.get(f"/api/runs/{run}/state/{k}")
            assert response.status_code == 200, response.text
            assert SECRET not in response.text
            snapshot = response.json()["snapshot"]
            assert snapshot["format"] == "helikon-state"
            sizes.append(len(snapshot["state"]["conversation"]))
        assert sizes[0] == 1 and sizes == sorted(sizes) and sizes[-1] > 2
        assert "sunny in Oslo" in json.dumps(client.get(f"/api/runs/{run}/state/1").json())
        assert client.get(f"/api/runs/{run}/state/{len(steps)}").status_code == 422
        assert client.get(f"/api/runs/{run}/state/x").status_code == 422


def test_a_fork_at_a_tool_result_with_an_edited_output_is_a_new_run_linked_to_its_parent() -> None:
    studio, model = _studio()
    with TestClient(studio.app(), base_url=BASE) as client:
        run = _chat(client)
        steps = client.get(f"/api/runs/{run}").json()["steps"]
        k = next(s["index"] for s in steps if s["effect_type"] == "ExecuteTools")
        edited = json.loads(json.dumps(steps[k]["result"]).replace("sunny in Oslo", "snowing in Oslo"))
        calls = model.calls
        response = client.post(f"/api/runs/{run}/fork", json={"step": k, "answer": edited, "mode": "replay"})
        assert response.status_code == 201, response.text
        made = response.json()
        assert model.calls == calls + 1  # the step after the edit only
        assert [m["how"] for m in made["fork"]["marks"]] == ["replayed"] * k + ["edited", "live"]
        assert made["fork"]["divergences"][0]["step"] == k + 1
        rows = {r["id"]: r for r in client.get("/api/runs").json()["runs"]}
        assert rows[made["id"]]["parent"] == run and rows[made["id"]]["source"] == "fork"
        lineage = client.get(f"/api/runs/{made['id']}/lineage").json()
        assert lineage["parent"]["id"] == run and lineage["fork"]["step"] == k
        assert [c["id"] for c in client.get(f"/api/runs/{run}/lineage").json()["children"]] == [made["id"]]

        compared = client.get("/api/diff", params={"a": run, "b": made["id"]}).json()
        assert compared["same"] is False
        assert "sunny in Oslo" in compared["output"]["a"] and "snowing in Oslo" in compared["output"]["b"]
        assert [d["path"] for d in compared["output"]["differences"]] == ["output"]
        assert any(d["path"].startswith("events[") and "snowing" in d["text"] for d in compared["events"])
        assert any(d["path"].startswith(f"steps[{k}].result") for d in compared["steps"])
        assert SECRET not in json.dumps(compared)

        # an unchanged replayed fork is the same run
        same = client.post(f"/api/runs/{run}/fork", json={"step": 0, "mode": "replay"}).json()
        assert client.get("/api/diff", params={"a": run, "b": same["id"]}).json()["same"] is True
        # a fork of the user's message goes live at the first model call
        other = client.post(f"/api/runs/{run}/fork", json={"step": None, "input": "weather in Bergen?"})
        assert other.status_code == 201, other.text
        assert other.json()["fork"]["marks"][0]["how"] == "live"


def test_forks_and_states_are_refused_without_the_agent_or_with_a_bad_request() -> None:
    studio, _ = _studio()
    with TestClient(studio.app(), base_url=BASE) as client:
        rows = client.get("/api/runs").json()["runs"]
        golden = next(r["id"] for r in rows if r["name"] == "single_tool.jsonl")
        lineage = client.get(f"/api/runs/{golden}/lineage").json()
        assert lineage["forkable"] is False and "--agents or --app" in lineage["reason"]
        assert client.get(f"/api/runs/{golden}/state/0").status_code == 409
        assert client.post(f"/api/runs/{golden}/fork", json={"step": 0}).status_code == 409
        run = _chat(client)
        for body, code in (
            ({"step": 99}, "bad_step"),
            ({"step": True}, "bad_step"),
            ({"step": 1, "answer": {"type": "NoSuchResult"}}, "bad_answer"),
            ({"step": 1, "mode": "sideways"}, "bad_mode"),
            ({}, "bad_request"),
            ({"step": 1, "answer": {"type": "ModelResponded", "events": []}}, "refused"),
            ([1], "bad_request"),
        ):
            response = client.post(f"/api/runs/{run}/fork", json=body)
            assert (response.status_code, response.json()["error"]["code"]) == (422, code), body
        assert client.post("/api/runs/nope/fork", json={"step": 0}).status_code == 404
        assert client.get("/api/diff", params={"a": run, "b": "nope"}).status_code == 404


def test_a_foreign_page_cannot_fork_or_read_states_and_diffs() -> None:
    studio, model = _studio()
    with TestClient(studio.app(), base_url=BASE) as client:
        run = _chat(client)
        calls = model.calls
        for headers in (
            {"origin": "http://evil.example"},
            {"origin": "http://127.0.0.1:9999"},
            {"sec-fetch-site": "cross-site"},
            {"host": "evil.example"},
        ):
            response = client.post(f"/api/runs/{run}/fork", json={"step": 0, "mode": "live"}, headers=headers)
            assert response.status_code == 403, (headers, response.text)
            for path in (
                f"/api/runs/{run}/state/0",
                f"/api/runs/{run}/lineage",
                f"/api/diff?a={run}&b={run}",
            ):
                assert client.get(path, headers=headers).status_code == 403, (headers, path)
        assert model.calls == calls
        assert [r["source"] for r in client.get("/api/runs").json()["runs"]].count("fork") == 0
