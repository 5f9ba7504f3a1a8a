"""The studio's regression, evals and sessions routes on the real app
(Starlette's test client): a golden replayed against its own agent matches in
every mode and against a broken one diverges at the step and field path that
changed (secrets scrubbed), with the command that re-records it; a saved eval
run's charts' data and each case's link to its run; sessions of the studio's
own chats and of a SQLite file, listed and opened."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from starlette.testclient import TestClient
from studio_views_support import GOLDEN_TESTS, broken, saved_eval_run, scenario
from tests_support_studio import agent_with

from helikon import LlmAgent, RunContext
from helikon.server import InMemorySessions
from helikon.sessions import AssistantMessageEvent, SessionError, SqliteSession, UserMessageEvent
from helikon.studio import MemoryBrowser, Studio, browser_for
from helikon.studio._regression import field, record_command
from helikon.testing import say

BASE = "http://127.0.0.1:8765"
SECRET = "sk-views-9f3a61c2b7d04e"


def golden_copy(tmp_path: Path, *names: str) -> Path:
    """A project-like tests/golden with some of the committed traces and a test file."""
    golden = tmp_path / "tests" / "golden"
    (golden / "traces").mkdir(parents=True)
    (golden / "test_golden.py").write_text("# the goldens' tests\n")
    for name in names:
        shutil.copy(GOLDEN_TESTS / "traces" / f"{name}.jsonl", golden / "traces")
    return golden


def run_id(client: TestClient, name: str) -> str:
    rows = client.get("/api/runs").json()["runs"]
    return next(row["id"] for row in rows if row["name"] == name)


def replay(client: TestClient, name: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/api/runs/{run_id(client, name)}/replay", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("mode", ["strict", "loose", "live_tools"])
def test_a_golden_replayed_against_its_own_agent_matches(mode: str, tmp_path: Path) -> None:
    agent, _, ctx = scenario("single_tool")
    studio = Studio(agents=[agent], context=ctx, golden=golden_copy(tmp_path, "single_tool"))
    with TestClient(studio.app(), base_url=BASE) as client:
        answer = replay(client, "traces/single_tool.jsonl", mode=mode)
    assert (answer["outcome"], answer["mode"], answer["agent"]) == ("matches", mode, "budget-assistant")
    assert answer["message"] == "replay matches the recording (3 steps)"
    assert answer["record_command"].endswith("tests/golden -k single_tool --helikon-record")


def test_changed_instructions_diverge_at_the_first_step_with_the_field_path() -> None:
    studio = Studio(agents=[broken("instructions")], golden=GOLDEN_TESTS)
    with TestClient(studio.app(), base_url=BASE) as client:
        strict = replay(client, "traces/single_tool.jsonl", mode="strict")
        loose = replay(client, "traces/single_tool.jsonl", mode="loose")
    assert strict["outcome"] == "diverged" and strict["step"] == 0
    assert "definition differs" in strict["headline"]
    changed = {d["path"]: d for d in strict["differences"]}
    instructions = next(d for path, d in changed.items() if path.endswith("instructions"))
    assert instructions["expected"] == "'You are a budgeting assistant.'"
    assert instructions["actual"] == "'You are a careless assistant.'"
    assert (
        strict["record_command"]
        == f"pytest {GOLDEN_TESTS.relative_to(Path.cwd())} -k single_tool --helikon-record"
    )
    # a loose replay compares kinds and tool calls only: it matches, and warns of the definition
    assert loose["outcome"] == "matches"
    assert any("different agent definition" in w for w in loose["warnings"])


def test_a_changed_tool_diverges_only_when_tools_run_live() -> None:
    studio = Studio(agents=[broken("tool")], golden=GOLDEN_TESTS)
    with TestClient(studio.app(), base_url=BASE) as client:
        assert replay(client, "traces/single_tool.jsonl", mode="strict")["outcome"] == "matches"
        live = replay(client, "traces/single_tool.jsonl", mode="live_tools")
    assert live["outcome"] == "diverged" and live["step"] == 1
    assert "budget_status" in live["headline"]
    (budget,) = [d for d in live["differences"] if d["path"].endswith("budget")]
    assert (budget["expected"], budget["actual"]) == ("250.0", "300.0")


def test_a_divergence_is_scrubbed_of_the_runs_secrets(tmp_path: Path) -> None:
    agent, _, _ = scenario("single_tool")
    leaky = LlmAgent(
        name=agent.name, model=agent.model, instructions=f"Your key is {SECRET}.", tools=agent.tools
    )
    ctx = RunContext.ephemeral(None).with_extra_secrets([SECRET])
    studio = Studio(agents=[leaky], context=ctx, golden=golden_copy(tmp_path, "single_tool"))
    with TestClient(studio.app(), base_url=BASE) as client:
        response = client.post(f"/api/runs/{run_id(client, 'traces/single_tool.jsonl')}/replay", json={})
    assert response.json()["outcome"] == "diverged"
    assert "Your key is" in response.text and SECRET not in response.text


def test_a_run_without_a_matching_agent_says_how_to_start_one_and_bad_requests_are_refused() -> None:
    studio = Studio(agents=[agent_with("desk", say("hi"))], golden=GOLDEN_TESTS)
    with TestClient(studio.app(), base_url=BASE) as client:
        answer = replay(client, "traces/handoff.jsonl")
        rid = run_id(client, "traces/handoff.jsonl")
        bad_mode = client.post(f"/api/runs/{rid}/replay", json={"mode": "fast"})
        not_json = client.post(
            f"/api/runs/{rid}/replay", content=b"{", headers={"content-type": "application/json"}
        )
        unknown = client.post("/api/runs/nope/replay", json={})
    assert answer["outcome"] == "error" and "no agent named 'triage'" in answer["message"]
    assert "--app or --agents" in answer["message"] and answer["agents"] == ["desk"]
    assert (bad_mode.status_code, bad_mode.json()["error"]["code"]) == (422, "bad_mode")
    assert (not_json.status_code, unknown.status_code) == (400, 404)


def test_a_divergence_line_splits_into_path_expected_and_actual() -> None:
    assert field("request.messages[0].content[0].text: expected 'a: b', got 'c'") == {
        "path": "request.messages[0].content[0].text",
        "expected": "'a: b'",
        "actual": "'c'",
        "line": "request.messages[0].content[0].text: expected 'a: b', got 'c'",
    }
    assert field("events[4]: unexpected {'type': 'X'}")["expected"] is None
    assert field("no path here")["path"] is None


def test_the_record_command_runs_the_nearest_tests_above_the_golden(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    (project / "tests" / "goldens").mkdir(parents=True)
    (project / "tests" / "test_goldens.py").write_text("")
    golden = project / "tests" / "goldens" / "sales.jsonl"
    assert record_command(golden, project / "tests" / "goldens") == (
        f"pytest {project / 'tests'} -k sales --helikon-record"
    )


# ---- evals ----


def test_a_saved_eval_run_is_listed_with_its_charts_data_and_each_case_links_to_its_run(
    tmp_path: Path,
) -> None:
    report = saved_eval_run(tmp_path / "evals" / "nightly")
    (tmp_path / "evals" / "broken").mkdir()
    (tmp_path / "evals" / "broken" / "report.json").write_text('{"format": "something else"}')
    with TestClient(Studio(evals=[tmp_path / "evals"]).app(), base_url=BASE) as client:
        rows = {row["path"]: row for row in client.get("/api/evals").json()["evals"]}
        assert "not a helikon eval report" in rows["broken"]["error"]
        row = rows["nightly"]
        assert (row["name"], row["cases"], row["passed"]) == ("support nightly", 7, False)
        assert (row["passed_cases"], row["failed_cases"], row["mean"]) == (4, 2, pytest.approx(0.8))
        page = client.get(f"/api/evals/{row['id']}").json()
        # the report's charts: the score histogram, per-evaluator outcomes and means
        assert page["histogram"] == [2, 0, 0, 0, 0, 0, 0, 0, 0, 8]
        assert [(s["evaluator"], s["passed"], s["failed"], s["skipped"]) for s in page["stats"]] == [
            ("exact_match", 4, 1, 2),
            ("tool_trajectory", 4, 1, 2),
        ]
        cases = {c["id"]: c for c in page["cases"]}
        assert cases["unknown-order"]["status"] == "failed" and "events" not in cases["unknown-order"]
        run = client.get(f"/api/runs/{cases['refund-b2']['run']}").json()
        assert run["run"]["source"] == "evals" and run["run"]["agent"] == "support"
        assert run["run"]["run_id"] == report.case("refund-b2").run_id
        assert client.get("/api/evals/nope").status_code == 404
        assert client.get(f"/api/evals/{rows['broken']['id']}").status_code == 422


# ---- sessions ----


def test_the_studios_own_chat_sessions_are_listed_and_open_to_their_conversation() -> None:
    studio = Studio(agents=[agent_with("desk", say("Hello there."), say("Still here."))])
    with TestClient(studio.app(), base_url=BASE) as client:
        assert client.get("/api/sessions").json() == {"backend": "memory", "sessions": []}
        for text in ("hi", "again"):
            started = client.post(
                "/server/agents/desk/runs",
                json={"input": text},
                headers={"x-session-id": "tab-1"},
            )
            assert started.status_code == 200, started.text
        listed = client.get("/api/sessions").json()["sessions"]
        assert [(s["id"], s["events"]) for s in listed] == [("tab-1", 4)]
        page = client.get("/api/sessions/tab-1").json()
        assert client.get("/api/sessions/tab-2").status_code == 404
    assert [e["type"] for e in page["events"]] == ["user_message", "assistant_message"] * 2
    assert [item["type"] for item in page["items"]] == ["UserMessage", "AssistantMessage"] * 2
    texts = [part["text"] for item in page["items"] for part in item["content"]]
    assert texts == ["hi", "Hello there.", "again", "Still here."]


def test_the_memory_browser_reads_each_session_through_its_public_log() -> None:
    chats = InMemorySessions()
    anyio.run(chats("tab-1").append, [UserMessageEvent.from_text("hi", at=5)])
    chats("tab-2")  # opened, nothing written yet
    browser = MemoryBrowser(chats)
    assert browser.sessions() == [
        {"id": "tab-1", "events": 1, "last_at": 5},
        {"id": "tab-2", "events": 0, "last_at": None},
    ]
    assert browser.events("tab-1") == chats.sessions["tab-1"].log()
    assert browser.events("tab-3") is None
    with pytest.raises(SessionError, match="--sessions"):
        MemoryBrowser(None).sessions()


def test_a_sqlite_session_database_is_browsable(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"

    async def fill() -> None:
        for sid, words in (("alice", ("hello", "Hi Alice.")), ("bob", ("hey", "Hi Bob."))):
            session = SqliteSession.open(db, sid)
            await session.append([UserMessageEvent.from_text(words[0], at=1000), assistant(words[1], 2000)])
            await session.aclose()

    trio.run(fill)
    with TestClient(Studio(sessions=f"sqlite:{db}").app(), base_url=BASE) as client:
        listed = client.get("/api/sessions").json()
        page = client.get("/api/sessions/bob").json()
        missing = client.get("/api/sessions/carol")
    assert listed["backend"] == "sqlite"
    assert sorted((s["id"], s["events"], s["last_at"]) for s in listed["sessions"]) == [
        ("alice", 2, 2000),
        ("bob", 2, 2000),
    ]
    assert [part["text"] for item in page["items"] for part in item["content"]] == ["hey", "Hi Bob."]
    assert missing.status_code == 404


def test_an_unreachable_backend_is_a_503_with_a_sentence(tmp_path: Path) -> None:
    with TestClient(Studio(sessions=f"sqlite:{tmp_path / 'none.db'}").app(), base_url=BASE) as client:
        response = client.get("/api/sessions")
    assert response.status_code == 503 and "no such database file" in response.json()["error"]["message"]
    with pytest.raises(ValueError, match="names no session backend"):
        browser_for("mongodb://x")


def assistant(text: str, at: int) -> Any:
    return AssistantMessageEvent.from_text(text, at=at)


def test_the_command_takes_evals_and_sessions_and_refuses_an_unknown_backend() -> None:
    from click.testing import CliRunner

    from helikon.cli import app

    listed = CliRunner().invoke(app, ["studio", "--help"])
    assert "--evals" in listed.output and "--sessions" in listed.output
    refused = CliRunner().invoke(app, ["studio", "--sessions", "mongodb://localhost/x"])
    assert refused.exit_code == 2 and "names no session backend" in refused.output


def golden_names() -> list[str]:
    return sorted(p.stem for p in (GOLDEN_TESTS / "traces").glob("*.jsonl"))


@pytest.mark.parametrize("name", golden_names())
def test_every_committed_golden_replays_strictly_through_the_studio(name: str) -> None:
    """Any trace: plain runs, tool rounds, handoffs, failures, cancellations and agent trees."""
    agent, _, ctx = scenario(name)
    studio = Studio(agents=[agent], context=ctx, golden=GOLDEN_TESTS)
    with TestClient(studio.app(), base_url=BASE) as client:
        answer = replay(client, f"traces/{name}.jsonl", mode="strict")
    assert answer["outcome"] == "matches", answer


def test_an_apps_own_session_backend_keeps_the_studios_chats_and_is_browsable(tmp_path: Path) -> None:
    """``--app`` naming an AgentServer with SQLite sessions: the studio's chat
    writes there, and ``--sessions`` browses it; without ``--sessions`` the
    view says where the sessions went."""
    from helikon.server import sessions_from

    db = tmp_path / "app.db"
    chats = sessions_from(lambda sid: SqliteSession.open(db, sid))
    desk = agent_with("desk", say("Noted."))
    with TestClient(
        Studio(agents=[desk], chat_sessions=chats, sessions=f"sqlite:{db}").app(), base_url=BASE
    ) as client:
        started = client.post(
            "/server/agents/desk/runs", json={"input": "remember me"}, headers={"x-session-id": "t-9"}
        )
        assert started.status_code == 200, started.text
        listed = client.get("/api/sessions").json()
        page = client.get("/api/sessions/t-9").json()
    assert (listed["backend"], [s["id"] for s in listed["sessions"]]) == ("sqlite", ["t-9"])
    assert [part["text"] for item in page["items"] for part in item["content"]] == ["remember me", "Noted."]
    with TestClient(Studio(agents=[desk], chat_sessions=chats).app(), base_url=BASE) as client:
        unbrowsable = client.get("/api/sessions")
    assert unbrowsable.status_code == 503 and "--sessions" in unbrowsable.json()["error"]["message"]
