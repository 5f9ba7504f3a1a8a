"""Suspend a run at every effect boundary, resume it in a fresh process, and
get exactly the events of an uninterrupted run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from helikon import AgentEvent, advance, dump_state, perform, start
from helikon.codec import from_json
from helikon.effects import CallModel, Terminate
from helikon.interpreters import LiveInterpreter

sys.path.insert(0, str(Path(__file__).parent))
from resume_agent import make_agent

SCRIPT = Path(__file__).parent / "resume_agent.py"


def uninterrupted() -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [e async for e in make_agent().run(None, "add", interpreter=LiveInterpreter("r"))]

    return trio.run(go)


def boundaries() -> int:
    agent = make_agent()
    outcome = start(agent, "add", run_id="r")
    count = 0
    while not isinstance(outcome.effect, Terminate):
        _, result = trio.run(lambda effect=outcome.effect: perform(agent, effect, run_id="r"))
        outcome = advance(agent, outcome.state, result)
        count += 1
    return count


@pytest.mark.parametrize("stop_after", range(boundaries() + 1))
def test_resume_in_a_fresh_process_after_any_step(stop_after: int, tmp_path: Path) -> None:
    agent = make_agent()
    outcome = start(agent, "add", run_id="r")
    events: list[AgentEvent] = list(outcome.events)
    model_calls = 0
    for _ in range(stop_after):
        effect = outcome.effect
        live, result = trio.run(lambda effect=effect: perform(agent, effect, run_id="r"))
        model_calls += isinstance(effect, CallModel)
        outcome = advance(agent, outcome.state, result)
        events.extend(live)
        events.extend(outcome.events)

    state_file = tmp_path / "run.state"
    state_file.write_bytes(dump_state(outcome.state))
    resumed = subprocess.run(
        [sys.executable, str(SCRIPT), str(state_file), str(model_calls)],
        capture_output=True,
        check=True,
    ).stdout.splitlines()
    events.extend(from_json(line, AgentEvent) for line in resumed)

    assert events == uninterrupted()
    assert type(events[-1]).__name__ == "RunCompleted"
