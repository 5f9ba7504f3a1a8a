"""A Temporal workflow replay is not new work (issue 36, item 4).

A run goes through the real Temporal test server; its history is then
replayed with temporalio's ``Replayer`` in a process where OpenTelemetry is
configured globally (helikon's observer is on for every run there). The
replay adds no span and no token-usage or cost metric point; the same agent
run live in that process afterwards does add them (the observer was on).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")
pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from replay_observed import SPENDING, spender

from helikon.temporal import TemporalAgentWorker, TemporalRunner

pytestmark = pytest.mark.integration

QUEUE = "helikon-replay-observed"
SCRIPT = Path(__file__).parent / "replay_observed.py"


def test_a_workflow_replay_emits_no_spans_and_no_spending_metrics(temporal: Any, tmp_path: Path) -> None:
    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(spender()):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start(
                "spender", "add them", run_id="run-replay-observed"
            )
            result = await run.result()
            return result, await run.handle.fetch_history()

    result, history = temporal(body)
    assert result.final_output == "3" and result.usage.input_tokens == 270
    stored = tmp_path / "history.json"
    stored.write_text(history.to_json())

    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(stored), history.workflow_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    assert seen["replayed"] is True
    assert seen["replay"] == {"spans": [], "points": {name: 0 for name in SPENDING}}
    # The teeth: the same agent run live under the same providers is observed.
    live = seen["live"]
    assert any(name.startswith("invoke_agent") for name in live["spans"]), live
    assert all(live["points"][name] > 0 for name in SPENDING), live
