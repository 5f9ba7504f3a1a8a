"""What a durable run costs in Temporal history: measured, not guessed.

Every ``call_model`` activity carries the whole conversation so far, so the
history grows with the square of the number of turns while the largest
single payload (the last turn's request) grows linearly. This test runs 10
tool-calling turns plus the answer with tool outputs of 1, 10 and 50 KiB,
prints the sizes (``pytest -s``; the numbers in ``docs/temporal.md`` come
from here) and checks they stay inside Temporal's limits (2 MiB per payload,
50 MiB per history, by default).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporal_agents import ByTurnModel, Counts

from helikon import LlmAgent, tool
from helikon.temporal import TemporalAgentWorker, TemporalRunner
from helikon.testing import call_tools, say

pytestmark = pytest.mark.integration

QUEUE = "helikon-budget"
TURNS = 10
KIB = 1024


def reporter(output_kib: int) -> LlmAgent[Any]:
    @tool
    async def report(page: int) -> str:
        """Fetch one page of the report.

        Args:
            page: the page number.
        """
        line = f"page {page}: revenue, costs and margins by region, all within plan. "
        return (line * (output_kib * KIB // len(line) + 1))[: output_kib * KIB]

    scripts = [call_tools(("report", {"page": n}), text=f"Reading page {n}.") for n in range(1, TURNS + 1)]
    scripts.append(say("All pages read: everything is within plan."))
    return LlmAgent(name="reporter", model=ByTurnModel(scripts, Counts()), tools=[report])


def sizes(history: Any) -> dict[str, Any]:
    """History size, and the largest payload of each kind, in KiB."""
    names: dict[int, str] = {}
    largest: dict[str, int] = {}

    def note(kind: str, size: int) -> None:
        largest[kind] = max(largest.get(kind, 0), size)

    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            names[event.event_id] = scheduled.activity_type.name
            note(f"{scheduled.activity_type.name} input", scheduled.input.ByteSize())
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            note(f"{names[completed.scheduled_event_id]} result", completed.result.ByteSize())
        elif event.HasField("workflow_execution_completed_event_attributes"):
            note("workflow result", event.workflow_execution_completed_event_attributes.result.ByteSize())
    total = sum(event.ByteSize() for event in history.events)
    return {
        "history": total / KIB,
        "events": len(history.events),
        **{k: v / KIB for k, v in sorted(largest.items())},
    }


@pytest.mark.parametrize("output_kib", [1, 10, 50])
def test_ten_turns_fit_the_payload_budget(temporal: Any, output_kib: int) -> None:
    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(reporter(output_kib)):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("reporter", "Read the report.")
            result = await run.result()
            return result, await run.handle.fetch_history()

    result, history = temporal(body)
    measured = sizes(history)
    print(
        f"\n{TURNS} tool turns + answer, tool output {output_kib} KiB: "
        + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in measured.items())
    )

    assert result.final_output == "All pages read: everything is within plan."
    assert measured["call_model input"] < 2 * KIB  # Temporal's default payload limit: 2 MiB
    assert measured["workflow result"] < 2 * KIB
    assert measured["history"] < 50 * KIB
    # The largest payload is the last turn's request: every tool output so far, once.
    assert measured["call_model input"] >= TURNS * output_kib
