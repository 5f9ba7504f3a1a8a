"""Issue 26 under Temporal: a tree member's own timeout is the machine's.

A workflow child with ``RunConfig(timeout=5)`` and a worker clock that
reads one second further each time: the machine, told the readings through
the ``read_clock`` activity, ends the run with ``TimedOut(5.0)`` exactly as
the live interpreter does with the same readings (the performer used to
measure members' timeouts itself, with ``workflow.now()``).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from helikon import LlmAgent, RunConfig, RunContext, RunFailed, SequentialAgent, tool
from helikon.errors import TimedOut
from helikon.events import AgentEvent
from helikon.interpreters import LiveInterpreter
from helikon.temporal import TemporalAgentWorker, TemporalRunner
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

QUEUE = "helikon-member-timeout"
RUN_ID = "member-timeout"


class Ticks:
    """A clock that reads 100, 101, 102, ... (one second per reading)."""

    def __init__(self) -> None:
        self.reading = 99.0

    def __call__(self) -> float:
        self.reading += 1.0
        return self.reading


@tool
def ping() -> str:
    """Answer at once."""
    return "pong"


def tree() -> Any:
    script = [call_tools(("ping", {}))] * 6 + [say("done")]
    worker: LlmAgent[Any] = LlmAgent(name="C", model=MockModel(script), tools=[ping])
    inner = SequentialAgent("B", "", config=RunConfig(timeout=5.0)).then(worker)
    return SequentialAgent("A", "").then(inner)


def test_a_members_timeout_is_decided_by_the_machine_under_temporal(temporal: Any) -> None:
    async def main() -> list[AgentEvent]:
        interpreter = LiveInterpreter(RUN_ID, clock=Ticks())
        return [e async for e in tree().run(RunContext.ephemeral(None), "go", interpreter=interpreter)]

    expected = anyio.run(main, backend="asyncio")
    assert isinstance(expected[-1], RunFailed) and expected[-1].error == TimedOut(5.0)

    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, clock=Ticks())
        async with worker.register(tree()):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("A", "go", run_id=RUN_ID)
            return await run.outcome()

    assert list(temporal(body)) == expected
