"""A worker process killed with SIGKILL in the middle of a tool call.

Nothing is reported to Temporal: the in-flight ``call_step`` attempt just
stops heartbeating. With the opt-in heartbeat timeout (2 s here) Temporal
gives the call to another worker after about that long — not after the
10-minute activity timeout — and the run finishes there without redoing the
model turns and the tool that had completed.
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

from temporal_agents import Counts, gated

from helikon.temporal import TemporalAgentWorker, TemporalRunner, replayer

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "worker_process.py"
QUEUE = "helikon-killed"


def test_a_killed_worker_is_replaced_after_its_heartbeat_times_out(temporal: Any, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    marker = tmp_path / "in-slow"

    async def body(env: Any) -> tuple[Any, float]:
        target = env.client.service_client.config.target_host
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(SCRIPT), target, QUEUE, str(log), str(marker)
        )
        try:
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-killed")
            while not marker.exists():
                await asyncio.sleep(0.02)
            child.kill()
            await child.wait()
            killed_at = time.monotonic()
            worker = TemporalAgentWorker(env.client, task_queue=QUEUE, heartbeat_timeout=timedelta(seconds=2))
            async with worker.register(gated(Counts(log), None)):
                result = await run.result()
            runtime = env.client.service_client.config.runtime
            await replayer(runtime=runtime).replay_workflow(await run.handle.fetch_history())
            return result, time.monotonic() - killed_at
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()

    result, waited = temporal(body)

    assert result.final_output == "Done: 1 and 20."
    turns, tools = Counts.read(log)
    assert turns == {1: 1, 2: 1, 3: 1}  # across both processes
    assert tools == {"fast": 1, "slow": 2}  # only the call in flight ran again
    assert waited < 10  # reclaimed by the heartbeat timeout, not the 10-minute tool timeout
