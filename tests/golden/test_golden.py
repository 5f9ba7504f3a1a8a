"""Replay every committed golden trace (``pytest --helikon-record`` re-records)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helikon.testing import GoldenTraces

sys.path.insert(0, str(Path(__file__).parent))
from scenarios import SCENARIOS

TRACES = Path(__file__).parent / "traces"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_trace_replays(name: str, helikon_golden: GoldenTraces) -> None:
    agent, input, ctx = SCENARIOS[name]()
    trace = helikon_golden.check(agent, TRACES / f"{name}.jsonl", input=input, ctx=ctx)
    assert trace.events, "a golden trace holds the run's events"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_recording_again_gives_the_same_bytes(name: str, tmp_path: Path) -> None:
    committed = TRACES / f"{name}.jsonl"
    if not committed.exists():
        pytest.skip("not recorded yet")
    agent, input, ctx = SCENARIOS[name]()
    target = tmp_path / committed.name
    GoldenTraces(record=True).check(agent, target, input=input, ctx=ctx)
    assert target.read_bytes() == committed.read_bytes()
