"""A sample of issue 36's usage-limit property under Temporal: random agent
chains with random limits (cost included, priced on the worker) end at the
same step with the live interpreter's events (the other interpreters:
``tests/property/test_usage_limits_properties.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parents[2] / "property"))
from test_usage_limits_properties import PRICES, build, live, plans, reference

from helikon.events import RunFailed
from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture

pytestmark = pytest.mark.integration

QUEUE = "helikon-limits"


@settings(max_examples=6, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans())
def test_a_sample_of_random_limits_ends_runs_as_the_live_interpreter_does(
    temporal: Any, plan: dict[str, Any]
) -> None:
    expected = live(plan)
    agent, _ = build(plan)

    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, posture=WorkerPosture(prices=PRICES))
        async with worker.register(agent):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            run = await runner.start(agent.name, "go", run_id="run-limits")
            return await run.outcome()

    events = list(temporal(body))
    assert events == expected
    broken = reference(plan)
    assert (isinstance(events[-1], RunFailed) and events[-1].error == broken) or broken is None
