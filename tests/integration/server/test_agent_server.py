"""The agent server on a real Hypercorn server on loopback, with real clients:
httpx, an SSE client (httpx-sse) and a WebSocket client (httpx-ws)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import httpx_ws
import pytest
from httpx_sse import connect_sse
from httpx_ws import connect_ws
from server_support import ScriptedModel, approving_context, assistant, server_for, serving, wait_for
from starlette.applications import Starlette
from starlette.routing import Mount

from helikon.events import RunStarted
from helikon.server import AgentServer, InProcessRuns

pytestmark = pytest.mark.integration


def sse_frames(client: httpx.Client, method: str, url: str, **kw: Any) -> list[tuple[str, dict[str, Any]]]:
    with connect_sse(client, method, url, **kw) as source:
        assert source.response.status_code == 200, source.response.read()
        return [(event.id, json.loads(event.data)) for event in source.iter_sse()]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_shot_json_lists_and_carries_the_run_id(backend: str) -> None:
    with serving(server_for().app(), backend) as base, httpx.Client(base_url=base) as client:
        agents = client.get("/agents")
        assert agents.json() == {"agents": [{"name": "assistant", "description": "answers by script"}]}
        assert len(agents.headers["x-run-id"]) == 32  # every response has one

        response = client.post("/agents/assistant/runs", json={"input": "weather please"})
        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "completed"
        assert body["output"] == "The tool said: sunny in Paris"
        assert response.headers["x-run-id"] == body["run_id"]
        types = [frame["type"] for frame in body["events"]]
        assert types[0] == "RunStarted" and types[-1] == "RunCompleted"
        assert "ToolCallItem" in types and "ToolOutputItem" in types

        status = client.get(f"/agents/assistant/runs/{body['run_id']}")
        assert status.json()["status"] == "completed"
        assert status.json()["output"] == "The tool said: sunny in Paris"
        assert status.headers["x-run-id"] == body["run_id"]


def test_messages_body_is_read_as_items() -> None:
    messages = [{"type": "UserMessage", "content": [{"type": "TextPart", "text": "hello there"}]}]
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        body = client.post("/agents/assistant/runs", json={"messages": messages}).json()
        assert body["output"] == "echo: hello there"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sse_streams_every_event_in_order(backend: str) -> None:
    with serving(server_for().app(), backend) as base, httpx.Client(base_url=base) as client:
        frames = sse_frames(client, "POST", "/agents/assistant/runs?stream=sse", json={"input": "slow 4"})
        assert [int(i) for i, _ in frames] == list(range(len(frames)))
        assert frames[0][1]["type"] == "RunStarted"
        assert frames[-1][1]["type"] == "RunCompleted"
        assert "".join(f["text"] for _, f in frames if f["type"] == "TokenDelta") == "w0 w1 w2 w3 "


def test_async_mode_returns_202_and_the_run_outlives_the_connection() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.05)))
    with serving(server.app()) as base:
        with httpx.Client(base_url=base) as first:
            started = first.post("/agents/assistant/runs?mode=async", json={"input": "slow 10"})
        # the connection that started it is closed now
        assert started.status_code == 202
        run_id = started.json()["run_id"]
        assert started.headers["x-run-id"] == run_id
        assert started.headers["location"].endswith(f"/agents/assistant/runs/{run_id}")
        with httpx.Client(base_url=base) as second:
            done = wait_for(second, f"/agents/assistant/runs/{run_id}", "completed")
        assert done["output"] == "".join(f"w{i} " for i in range(10))


def test_websocket_replays_then_tails_and_sse_resumes_after_last_event_id() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.1)))
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        run_id = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 8"}).json()["run_id"]
        url = f"/agents/assistant/runs/{run_id}"
        wait_for(client, url, "running")
        time.sleep(0.35)  # some events are out already: the socket replays them, then tails
        received = []
        with connect_ws(f"{base}{url}/events", client) as ws:
            while True:
                frame = json.loads(ws.receive_text())
                received.append(frame)
                if frame["type"] in ("RunCompleted", "RunFailed"):
                    break
        assert [f["seq"] for f in received] == list(range(len(received)))
        assert received[0]["type"] == "RunStarted" and received[-1]["type"] == "RunCompleted"
        assert sum(f["type"] == "TokenDelta" for f in received) == 8

        # a reconnecting SSE client resumes after the last id it saw
        resumed = sse_frames(client, "GET", f"{url}/events", headers={"Last-Event-ID": "3"})
        assert [int(i) for i, _ in resumed] == list(range(4, len(received)))
        assert [f for _, f in resumed] == received[4:]
        # and a fresh one replays all of it
        assert [f for _, f in sse_frames(client, "GET", f"{url}/events")] == received


def test_a_client_disconnect_cancels_an_sse_run() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.1)))
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        with connect_sse(
            client, "POST", "/agents/assistant/runs?stream=sse", json={"input": "slow 100"}
        ) as src:
            run_id = src.response.headers["x-run-id"]
            events = src.iter_sse()
            seen = [json.loads(next(events).data)["type"] for _ in range(4)]
        assert seen[0] == "RunStarted"
        done = wait_for(client, f"/agents/assistant/runs/{run_id}", "cancelled")
        assert done["error"]["type"] == "Cancelled"
        assert done["events"] < 60  # it stopped early: 100 words take 10 s
        assert done["output"].startswith("w0 w1 ")  # what it produced is kept


def test_a_client_disconnect_cancels_a_one_shot_run() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.1)))
    with serving(server.app()) as base:
        with pytest.raises(httpx.ReadTimeout), httpx.Client(base_url=base, timeout=0.5) as client:
            client.post("/agents/assistant/runs", json={"input": "slow 100"})
        (run,) = server.runs.runs.values()  # type: ignore[attr-defined]
        with httpx.Client(base_url=base) as client:
            done = wait_for(client, f"/agents/assistant/runs/{run.run_id}", "cancelled")
        assert done["error"]["type"] == "Cancelled"


def test_runs_of_one_session_are_serialised_and_share_its_history() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.1)))
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        session = {"X-Session-Id": "chat-1"}
        first = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 5"}, headers=session)
        second = client.post("/agents/assistant/runs?mode=async", json={"input": "history"}, headers=session)
        other = client.post("/agents/assistant/runs?mode=async", json={"input": "history"})
        url = "/agents/assistant/runs/{}".format
        assert client.get(url(second.json()["run_id"])).json()["status"] == "queued"
        # a run without a session waits for nobody
        assert wait_for(client, url(other.json()["run_id"]), "completed")["output"] == (
            "I have seen 1 user messages"
        )
        assert client.get(url(first.json()["run_id"])).json()["status"] == "running"
        done = wait_for(client, url(second.json()["run_id"]), "completed")
        first_done = client.get(url(first.json()["run_id"])).json()
        assert first_done["finished_at"] <= done["created_at"] + 10  # sanity
        assert done["output"] == "I have seen 2 user messages"  # it ran after the first, on its history


def test_two_one_shot_requests_with_one_session_run_one_after_the_other() -> None:
    model = ScriptedModel(pause=0.1)
    server = server_for(assistant(model))
    results: list[dict[str, Any]] = []

    with serving(server.app()) as base:

        def post(text: str) -> None:
            with httpx.Client(base_url=base, timeout=30) as client:
                response = client.post(
                    "/agents/assistant/runs", json={"input": text}, headers={"X-Session-Id": "s"}
                )
                results.append(response.json())

        threads = [threading.Thread(target=post, args=(t,)) for t in ("slow 5", "slow 5")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [r["status"] for r in results] == ["completed", "completed"]
    runs = sorted(server.runs.runs.values(), key=lambda r: r.created_at)  # type: ignore[attr-defined]
    first, second = runs
    # the second started streaming only after the first had finished
    assert first.finished_at is not None
    assert second.log.frames[0]["type"] == "RunStarted"
    assert _started_at(second) >= first.finished_at


def _started_at(run: Any) -> float:
    return float(run.started_at)


def test_retention_sweeps_old_and_surplus_runs() -> None:
    server = AgentServer(agents=[assistant()]).with_retention(max_age=1.0, max_runs=2, sweep_every=0.1)
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        ids = [
            client.post("/agents/assistant/runs", json={"input": f"n{i}"}).json()["run_id"] for i in range(3)
        ]
        time.sleep(0.3)
        codes = [client.get(f"/agents/assistant/runs/{i}").status_code for i in ids]
        assert codes == [404, 200, 200]  # beyond the count: the oldest went
        time.sleep(1.2)
        assert [client.get(f"/agents/assistant/runs/{i}").status_code for i in ids] == [404, 404, 404]
        gone = client.get(f"/agents/assistant/runs/{ids[0]}")
        assert gone.json()["error"]["code"] == "unknown_run"


def test_approvals_resume_a_suspended_run() -> None:
    server = AgentServer(agents=[assistant()], context=approving_context())
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        for approved, expected in [
            (True, "The tool said: paid 7"),
            (False, "The tool said: denied: not today"),
        ]:
            run_id = client.post("/agents/assistant/runs?mode=async", json={"input": "pay 7"}).json()[
                "run_id"
            ]
            url = f"/agents/assistant/runs/{run_id}"
            waiting = wait_for(client, url, "awaiting_approval")
            (pending,) = waiting["pending_approvals"]
            assert pending["tool"] == "pay" and json.loads(pending["arguments"]) == {"amount": 7}

            wrong = client.post(
                f"{url}/approvals", json={"decisions": [{"call_id": "nope", "approved": True}]}
            )
            assert wrong.status_code == 409
            assert "nope" in wrong.json()["error"]["message"]
            bad = client.post(f"{url}/approvals", json={"decisions": [{"call_id": 3}]})
            assert bad.status_code == 422

            decision = {"call_id": pending["call_id"], "approved": approved, "reason": "not today"}
            answered = client.post(f"{url}/approvals", json={"decisions": [decision]})
            assert answered.status_code == 200, answered.text
            done = wait_for(client, url, "completed")
            assert done["output"] == expected
            again = client.post(f"{url}/approvals", json={"decisions": [decision]})
            assert again.status_code == 409  # nothing is pending any more


class _Broken:
    """An agent whose stream stops without a terminal event, or never starts."""

    def __init__(self, name: str, start: bool) -> None:
        self.name = name
        self.start = start

    def run(self, ctx: Any, input: Any) -> Any:
        if not self.start:
            raise RuntimeError("the runner could not start")
        return self._events()

    async def _events(self) -> Any:
        yield RunStarted(self.name, "r")
        raise RuntimeError("the stream broke")


def test_a_stream_that_ends_early_gets_a_synthetic_run_failed_frame() -> None:
    server = server_for(_Broken("early", True), _Broken("never", False))
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        frames = sse_frames(client, "POST", "/agents/early/runs?stream=sse", json={"input": "x"})
        assert [f["type"] for _, f in frames] == ["RunStarted", "RunFailed"]
        assert frames[-1][1]["synthetic"] is True
        assert "the stream broke" in frames[-1][1]["error"]["message"]
        # one-shot: a started run that broke is a 200 with the partial result; one that never started a 500
        partial = client.post("/agents/early/runs", json={"input": "x"})
        assert partial.status_code == 200 and partial.json()["status"] == "failed"
        never = client.post("/agents/never/runs", json={"input": "x"})
        assert never.status_code == 500 and never.json()["status"] == "failed"
        ws_frames = []
        with connect_ws(f"{base}/agents/never/runs/{never.json()['run_id']}/events", client) as ws:
            ws_frames.append(json.loads(ws.receive_text()))
        assert ws_frames[0]["type"] == "RunFailed" and ws_frames[0]["synthetic"] is True


def test_bad_input_gets_clear_4xx_errors() -> None:
    server = server_for().with_max_body_bytes(1000)
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        runs = "/agents/assistant/runs"

        def code(response: httpx.Response) -> tuple[int, str]:
            return response.status_code, response.json()["error"]["code"]

        assert code(client.post(runs, json={"input": "x" * 2000})) == (413, "too_large")
        chunked = client.post(runs, content=iter([b'{"input": "', b"x" * 1500, b'"}']))
        assert code(chunked) == (413, "too_large")
        assert code(client.post(runs, content=b"{nope", headers={"content-type": "application/json"})) == (
            400,
            "bad_json",
        )
        assert code(client.post(runs, content=b"hi", headers={"content-type": "text/plain"}))[0] == 415
        assert code(client.post(runs, json=[1])) == (422, "bad_input")
        assert code(client.post(runs, json={"input": 3})) == (422, "bad_input")
        assert code(client.post(runs, json={"input": "a", "messages": []})) == (422, "bad_input")
        assert code(client.post(runs, json={"messages": [{"type": "Nope"}]})) == (422, "bad_input")
        assert code(client.post(runs, json={"inptu": "a"})) == (422, "bad_input")
        assert code(client.post("/agents/nobody/runs", json={"input": "a"})) == (404, "unknown_agent")
        assert code(client.post(f"{runs}?stream=ws", json={"input": "a"})) == (400, "bad_query")
        assert code(client.post(runs, json={"input": "a"}, headers={"X-Session-Id": "x" * 300})) == (
            400,
            "bad_session_id",
        )
        run_id = client.post(runs, json={"input": "a"}).json()["run_id"]
        assert code(client.get(f"{runs}/{run_id}/events", headers={"Last-Event-ID": "abc"})) == (
            400,
            "bad_resume",
        )
        assert code(client.get(f"/agents/other/runs/{run_id}")) == (404, "unknown_agent")
        assert code(client.get("/nowhere")) == (404, "not_found")
        assert code(client.delete(runs))[0] == 405


def test_mounted_under_a_prefix_in_another_starlette_app() -> None:
    server = server_for()
    outer = Starlette(routes=[Mount("/api", server.app())], lifespan=server.lifespan)
    with serving(outer) as base, httpx.Client(base_url=base) as client:
        body = client.post("/api/agents/assistant/runs?mode=async", json={"input": "hi"}).json()
        assert body["status_url"].startswith(f"{base}/api/agents/assistant/runs/")
        assert wait_for(client, body["status_url"], "completed")["output"] == "echo: hi"
        assert "<form" in client.get("/api/").text


def test_cancel_ends_an_async_run_and_a_run_waiting_for_approval() -> None:
    server = AgentServer(agents=[assistant(ScriptedModel(pause=0.1))], context=approving_context())
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        slow = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 100"}).json()["run_id"]
        waiting = client.post("/agents/assistant/runs?mode=async", json={"input": "pay 5"}).json()["run_id"]
        wait_for(client, f"/agents/assistant/runs/{slow}", "running")
        wait_for(client, f"/agents/assistant/runs/{waiting}", "awaiting_approval")
        for run_id in (slow, waiting):
            assert client.post(f"/agents/assistant/runs/{run_id}/cancel").status_code == 202
            done = wait_for(client, f"/agents/assistant/runs/{run_id}", "cancelled")
            assert done["error"]["type"] == "Cancelled", done
            assert done["pending_approvals"] == []
        assert client.post("/agents/assistant/runs/nope/cancel").status_code == 404


def test_a_reader_going_away_cancels_nothing() -> None:
    server = server_for(assistant(ScriptedModel(pause=0.05)))
    with serving(server.app()) as base, httpx.Client(base_url=base) as client:
        run_id = client.post("/agents/assistant/runs?mode=async", json={"input": "slow 10"}).json()["run_id"]
        url = f"/agents/assistant/runs/{run_id}"
        with connect_sse(client, "GET", f"{url}/events") as source:
            first = next(source.iter_sse())
        assert json.loads(first.data)["type"] == "RunStarted"
        with connect_ws(f"{base}{url}/events", client) as ws:
            assert json.loads(ws.receive_text())["seq"] == 0
        assert wait_for(client, url, {"completed", "failed"})["status"] == "completed"


def test_a_websocket_for_an_unknown_run_is_closed_with_the_reason() -> None:
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        with connect_ws(f"{base}/agents/assistant/runs/nope/events", client) as ws:
            assert json.loads(ws.receive_text())["error"]["code"] == "unknown_run"
            with pytest.raises(httpx_ws.WebSocketDisconnect) as closed:
                ws.receive_text()
        assert closed.value.code == 4404


class _FailingFind:
    """A backend whose lookups fail (a broken database, say)."""

    def __init__(self) -> None:
        self.inner = InProcessRuns()

    async def start(self, request: Any) -> Any:
        return await self.inner.start(request)

    async def find(self, agent: str, run_id: str) -> Any:
        raise RuntimeError("the run store is down: secret connection string")

    async def sweep(self) -> int:
        return 0

    async def serve(self) -> None:
        await self.inner.serve()


def test_an_unexpected_failure_is_a_json_500_that_leaks_nothing() -> None:
    def broken_sessions(session_id: str | None) -> Any:
        raise RuntimeError("no database: secret connection string")

    with serving(AgentServer(agents=[assistant()], backend=_FailingFind()).app()) as base:
        response = httpx.get(f"{base}/agents/assistant/runs/abc")
        assert response.status_code == 500
        assert response.json() == {"error": {"code": "internal", "message": "the server failed; see its log"}}
        assert len(response.headers["x-run-id"]) == 32
    with serving(AgentServer(agents=[assistant()], sessions=broken_sessions).app()) as base:
        response = httpx.post(f"{base}/agents/assistant/runs", json={"input": "x"})
        assert response.status_code == 500
        assert response.json()["error"]["code"] == "start_failed"
        assert "secret" not in response.text
