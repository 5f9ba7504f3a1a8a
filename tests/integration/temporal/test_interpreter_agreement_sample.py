"""A sample of issue 26's agreement property under Temporal: random agent
trees whose hooks, guardrail and tools answer, answer junk or raise give, on
the Temporal test server, the live interpreter's events (see
``tests/property/test_interpreter_agreement.py`` for the other interpreters,
and for random clock readings, which the time-skipping test server cannot
script)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parents[2] / "property"))
from test_interpreter_agreement import build, live, plans

from helikon.temporal import TemporalAgentWorker, TemporalRunner

pytestmark = pytest.mark.integration

QUEUE = "helikon-agreement"


@settings(max_examples=6, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans())
def test_a_sample_of_random_agent_trees_gives_the_live_events_under_temporal(
    temporal: Any, plan: dict[str, Any]
) -> None:
    # The test server skips time (workflow.now() jumps), so its clock readings
    # are not the live run's: the clock's part of the property is checked on
    # the other interpreters, with scripted readings.
    plan = {**plan, "timeout": None}
    expected = live(plan, "asyncio", on_agents=True)
    agent, _, _ = build(plan, on_agents=True)

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            run = await runner.start(agent.name, "go", run_id="run-agree")
            return await run.outcome()

    assert list(temporal(body)) == expected
