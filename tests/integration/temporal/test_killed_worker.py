"""A worker process killed with SIGKILL in the middle of a tool call.

Nothing is reported to Temporal: the in-flight ``call_step`` attempt just
stops heartbeating. With the opt-in heartbeat timeout (2 s here) Temporal
gives the call to another worker after about that long — not after the
10-minute activity timeout — and the run finishes there without redoing the
model turns and the tool that had completed: of a single agent, and of a
workflow killed in the middle of its second child.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

import anyio
from temporal_agents import Counts, gated, pipeline

from helikon.interpreters import LiveInterpreter
from helikon.temporal import TemporalAgentWorker, TemporalRunner, replayer

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "worker_process.py"
QUEUE = "helikon-killed"


def kill_mid_run(temporal: Any, tmp_path: Path, kind: str, run_id: str) -> tuple[Any, float]:
    """Run agent ``kind`` on a worker process, SIGKILL it while ``slow`` runs,
    finish the run on a fresh worker: the result and the seconds it took."""
    log = tmp_path / "calls.log"
    marker = tmp_path / "in-slow"
    make = {"gated": gated, "pipeline": pipeline}[kind]

    async def body(env: Any) -> tuple[Any, float]:
        target = env.client.service_client.config.target_host
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(SCRIPT), target, QUEUE, str(log), str(marker), kind
        )
        try:
            agent = make(Counts(log), None, idempotent=True)  # re-run with its call id
            run = await TemporalRunner(env.client, task_queue=QUEUE).start(agent.name, "go", run_id=run_id)
            while not marker.exists():
                await asyncio.sleep(0.02)
            child.kill()
            await child.wait()
            killed_at = time.monotonic()
            worker = TemporalAgentWorker(env.client, task_queue=QUEUE, heartbeat_timeout=timedelta(seconds=2))
            async with worker.register(agent):
                result = await run.result()
            runtime = env.client.service_client.config.runtime
            await replayer(runtime=runtime).replay_workflow(await run.handle.fetch_history())
            return result, time.monotonic() - killed_at
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()

    return temporal(body)  # type: ignore[no-any-return]


def test_a_killed_worker_is_replaced_after_its_heartbeat_times_out(temporal: Any, tmp_path: Path) -> None:
    result, waited = kill_mid_run(temporal, tmp_path, "gated", "run-killed")
    log = tmp_path / "calls.log"

    assert result.final_output == "Done: 1 and 20."
    turns, tools = Counts.read(log)
    assert turns == {1: 1, 2: 1, 3: 1}  # across both processes
    assert tools == {"fast": 1, "slow": 2}  # only the call in flight ran again
    assert waited < 10  # reclaimed by the heartbeat timeout, not the 10-minute tool timeout


def test_a_worker_killed_mid_child_resumes_without_rerunning_finished_work(
    temporal: Any, tmp_path: Path
) -> None:
    result, waited = kill_mid_run(temporal, tmp_path, "pipeline", "run-killed-child")

    async def live() -> Any:
        agent = pipeline(Counts(), None)
        return [e async for e in agent.run(None, "go", interpreter=LiveInterpreter("run-killed-child"))]

    assert list(result.events) == anyio.run(live, backend="asyncio")
    log = tmp_path / "calls.log"
    # The first child's turns and tool, and the second's first turn, ran once across both processes.
    assert Counts.read_steps(log) == {"first 0": 1, "first 1": 1, "second 0": 1, "second 1": 1}
    assert Counts.read(log)[1] == {"fast": 1, "slow": 2}  # only the call in flight ran again
    assert waited < 10
