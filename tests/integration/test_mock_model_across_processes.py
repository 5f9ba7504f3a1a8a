"""A run driven one effect per fresh process, with a ``MockModel`` of several
replies built anew in each, gives the events of a run in one process: the
model finds its position in the request, not in a counter that each new
process would restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from helikon import AgentEvent
from helikon.codec import from_json
from helikon.interpreters import LiveInterpreter

sys.path.insert(0, str(Path(__file__).parent))
from resume_agent import SCRIPTS, make_agent

STEP = Path(__file__).parent / "step_process.py"


def in_one_process() -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [e async for e in make_agent().run(None, "add", interpreter=LiveInterpreter("r"))]

    return trio.run(go)


def test_one_effect_per_fresh_process_gives_the_events_of_one_process(tmp_path: Path) -> None:
    state_file = tmp_path / "run.state"
    events: list[AgentEvent] = []
    processes = 0
    while True:
        lines = subprocess.run(
            [sys.executable, str(STEP), str(state_file)], capture_output=True, check=True, timeout=60
        ).stdout.splitlines()
        processes += 1
        done = lines[-1:] == [b"DONE"]
        events.extend(from_json(line, AgentEvent) for line in (lines[:-1] if done else lines))
        if done:
            break
        assert processes < 40, "the run does not end: the model replays its first script"

    expected = in_one_process()
    assert events == expected
    assert type(events[-1]).__name__ == "RunCompleted"
    # every scripted reply was played exactly once, each in its own process
    assert sum(type(e).__name__ == "TurnStarted" for e in events) == len(SCRIPTS)
    assert processes > len(SCRIPTS) + 1
