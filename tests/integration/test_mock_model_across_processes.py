"""A run driven one effect per fresh process, with a ``MockModel`` of several
replies built anew in each, gives the events of a run in one process: the
model finds its position in the request, not in a counter that each new
process would restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from helikon import AgentEvent
from helikon.codec import from_json
from helikon.interpreters import LiveInterpreter

sys.path.insert(0, str(Path(__file__).parent))
from resume_agent import SCRIPTS, make_agent
from step_process import handoff_agent

STEP = Path(__file__).parent / "step_process.py"


def in_one_process(agent: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [e async for e in agent.run(None, "add", interpreter=LiveInterpreter("r"))]

    return trio.run(go)


def one_effect_per_process(kind: str, state_file: Path) -> tuple[list[AgentEvent], int]:
    events: list[AgentEvent] = []
    for processes in range(1, 40):
        lines = subprocess.run(
            [sys.executable, str(STEP), kind, str(state_file)], capture_output=True, check=True, timeout=60
        ).stdout.splitlines()
        done = lines[-1:] == [b"DONE"]
        events.extend(from_json(line, AgentEvent) for line in (lines[:-1] if done else lines))
        if done:
            return events, processes
    raise AssertionError("the run does not end: a model replays its first script")


def test_one_effect_per_fresh_process_gives_the_events_of_one_process(tmp_path: Path) -> None:
    events, processes = one_effect_per_process("adder", tmp_path / "run.state")

    assert events == in_one_process(make_agent())
    assert type(events[-1]).__name__ == "RunCompleted"
    # every scripted reply was played exactly once, each in its own process
    assert sum(type(e).__name__ == "TurnStarted" for e in events) == len(SCRIPTS)
    # (a tool round runs in the job whose step started it: a stored state
    # marks its calls started, and a later job would reconcile them)
    assert processes > len(SCRIPTS)


def test_across_processes_each_model_skips_the_turns_of_the_agent_before_a_handoff(tmp_path: Path) -> None:
    events, _ = one_effect_per_process("handoff", tmp_path / "run.state")

    assert events == in_one_process(handoff_agent())
    names = [type(e).__name__ for e in events]
    assert "HandoffItem" in names and names[-1] == "RunCompleted"
    outputs = [e for e in events if type(e).__name__ == "ToolOutputItem"]
    assert [o.item.content for o in outputs][-2:] == ["savings: $120", "checking: $120"]
