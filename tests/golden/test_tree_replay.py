"""Multi-agent runs replay like single ones: an agent tree's children are
sub-machines whose effects the trace records with their path, so a change
inside any child is caught, and the divergence names the child."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from helikon import Trace
from helikon.effects import PerformAll
from helikon.interpreters import ReplayDivergence, ReplayInterpreter

sys.path.insert(0, str(Path(__file__).parent))
import scenarios
from scenarios import SCENARIOS

TRACES = Path(__file__).parent / "traces"

#: Each tree scenario and the child a test changes.
TREES = {
    "handoff": "investing specialist",
    "parallel_fan_out": "pessimist",
    "graph_report": "summary",
    "sequential_pipeline": "writer",
    "swarm_handoffs": "saver",
}


def replay(name: str, trace: Trace) -> list[Any]:
    agent, input, ctx = SCENARIOS[name]()

    async def go() -> list[Any]:
        return [e async for e in agent.run(ctx, input, interpreter=ReplayInterpreter(trace))]

    return trio.run(go)


@pytest.mark.parametrize("name", sorted(TREES))
def test_a_tree_trace_records_its_childrens_effects_with_their_paths(name: str) -> None:
    trace = Trace.load(TRACES / f"{name}.jsonl")
    paths = {a.path for s in trace.steps if isinstance(s.effect, PerformAll) for a in s.effect.effects}
    assert any(TREES[name] in path for path in paths)
    assert TREES[name] in trace.header.definition["agents"]


@pytest.mark.parametrize("name", sorted(TREES))
def test_changing_one_childs_instructions_diverges_naming_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = Trace.load(TRACES / f"{name}.jsonl")
    child = TREES[name]
    monkeypatch.setitem(scenarios.TWEAKS, child, "Answer in French.")

    with pytest.raises(ReplayDivergence) as caught:
        replay(name, trace)

    assert f"definition.agents.{child}.instructions: expected None, got 'Answer in French.'" in str(
        caught.value
    )


@pytest.mark.parametrize("name", sorted(TREES))
def test_the_step_that_changed_names_the_childs_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the definition check (a trace that holds none), the first effect
    # that differs is the child's model call, at the child's path.
    recorded = Trace.load(TRACES / f"{name}.jsonl")
    trace = attrs.evolve(recorded, header=attrs.evolve(recorded.header, definition={}))
    child = TREES[name]
    monkeypatch.setitem(scenarios.TWEAKS, child, "Answer in French.")

    with pytest.raises(ReplayDivergence) as caught:
        replay(name, trace)

    message = str(caught.value)
    assert "in the sub-agent at" in message and child in message.split("in the sub-agent at", 1)[1]
    assert "Answer in French." in message


def test_re_recording_after_a_childs_prompt_changed_gives_another_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from helikon.interpreters import LiveInterpreter, RecordingInterpreter

    def record() -> bytes:
        agent, input, ctx = SCENARIOS["graph_report"]()
        recorder = RecordingInterpreter(LiveInterpreter("run-1"))

        async def go() -> None:
            async for _ in agent.run(ctx, input, interpreter=recorder):
                pass

        trio.run(go)
        return recorder.trace.to_bytes()

    before = record()
    monkeypatch.setitem(scenarios.TWEAKS, "summary", "Be brief.")
    assert record() != before
