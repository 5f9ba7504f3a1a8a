"""A worker process for the killed-worker tests: serves an agent until killed.

Usage: ``python worker_process.py TARGET TASK_QUEUE LOG MARKER [AGENT]``.
AGENT is ``gated`` (the default: one agent, three turns) or ``pipeline`` (a
sequential workflow of two agents). Every model turn and tool call is
appended to LOG; MARKER is created when the ``slow`` tool starts, which then
waits forever (heartbeating) for the SIGKILL.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from temporal_agents import Counts, gated, pipeline
from temporalio.client import Client

from helikon.temporal import TemporalAgentWorker

#: The heartbeat timeout the killed run is scheduled with.
HEARTBEAT = timedelta(seconds=2)

AGENTS = {"gated": gated, "pipeline": pipeline}


class Hang:
    """Marks that the tool started, then never lets it finish."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def started(self) -> None:
        self.marker.touch()

    async def wait(self) -> None:
        await asyncio.Event().wait()


async def main(target: str, queue: str, log: str, marker: str, agent: str = "gated") -> None:
    client = await Client.connect(target)
    # No sticky cache: the test server does not move a dead worker's sticky queue.
    worker = TemporalAgentWorker(
        client, task_queue=queue, heartbeat_timeout=HEARTBEAT, max_cached_workflows=0
    )
    # ``slow`` is idempotent: its lost call is re-run with the same call id.
    worker.register(AGENTS[agent](Counts(Path(log)), Hang(Path(marker)), idempotent=True))
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
