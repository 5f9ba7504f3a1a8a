"""The timeline and the structural diff behind ``helikon trace show`` / ``trace diff``, on the goldens."""

from __future__ import annotations

from pathlib import Path

import pytest

from helikon import Trace
from helikon.cli._trace import timeline, trace_diff

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "traces"
NAMES = sorted(p.name for p in GOLDEN.glob("*.jsonl"))


@pytest.mark.parametrize("name", NAMES)
def test_a_golden_agrees_with_itself_and_has_a_timeline(name: str) -> None:
    trace = Trace.load(GOLDEN / name)
    assert trace_diff(trace, trace) == []
    lines = timeline(trace)
    assert lines[0].startswith(
        f"agent {trace.header.agent}, run {trace.header.run_id}, {len(trace.steps)} steps"
    )
    assert sum(line.startswith("#") for line in lines) == len(trace.steps)


def test_two_goldens_differ_in_the_header_and_the_steps() -> None:
    single, parallel = Trace.load(GOLDEN / "single_tool.jsonl"), Trace.load(GOLDEN / "parallel_tools.jsonl")
    lines = trace_diff(single, parallel)
    assert "step 0 (CallModel turn 1):" in lines
    assert any(line.startswith("  effect.request.messages[0].content[0].text: expected ") for line in lines)


def test_a_missing_step_is_named() -> None:
    trace = Trace.load(GOLDEN / "single_tool.jsonl")
    shorter = Trace(trace.header, trace.steps[:-1], trace.final_events)
    lines = trace_diff(trace, shorter)
    assert f"steps: expected {len(trace.steps)}, got {len(trace.steps) - 1}" in lines
    assert any(line.startswith(f"step {len(trace.steps) - 1}: missing (expected ") for line in lines)
    assert trace_diff(shorter, trace)[-1].startswith(f"step {len(trace.steps) - 1}: unexpected ")


def test_the_handoff_timeline() -> None:
    lines = timeline(Trace.load(GOLDEN / "handoff.jsonl"))
    assert "#1 PerformAll [investing specialist: CallModel turn 1] -> AllPerformed" in lines
    assert "    ⇢ handoff: triage -> investing specialist" in lines
