"""A sample of issue 26's agreement property under Temporal: random agent
trees whose hooks, guardrail and tools answer, answer junk or raise, with
random timeouts (the run's and the handoff targets' own) and random clock
readings, give on the Temporal test server the live interpreter's events
(see ``tests/property/test_interpreter_agreement.py`` for the other
interpreters).

The time-skipping server's ``workflow.now()`` cannot be scripted, so the
worker is given the property's clock (``TemporalAgentWorker(clock=...)``):
the workflow reads it through the ``read_clock`` activity, so the machine
is told the same readings as the live run's, and decides the same."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parents[2] / "property"))
from test_interpreter_agreement import build, clock_of, live, plans

from helikon.temporal import TemporalAgentWorker, TemporalRunner

pytestmark = pytest.mark.integration

QUEUE = "helikon-agreement"


@settings(max_examples=8, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans())
def test_a_sample_of_random_agent_trees_gives_the_live_events_under_temporal(
    temporal: Any, plan: dict[str, Any]
) -> None:
    expected = live(plan, "asyncio", on_agents=True)
    agent, _, _ = build(plan, on_agents=True)

    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, clock=clock_of(plan))
        async with worker.register(agent):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            run = await runner.start(agent.name, "go", run_id="run-agree")
            return await run.outcome()

    assert list(temporal(body)) == expected
