"""The same agent gives the same events under every interpreter.

For each golden scenario, the scripted test interpreter, the live
interpreter under trio and under asyncio, and the replay of a recording all
yield identical event streams for the same effect results (fed in the same
order: the live interpreter in lock-step, as the scripted one performs
waves). Feeding each part of a wave as it comes (the live default), every
member's events are the same, in the same order; only the interleaving of
different members' events follows the order the answers came in.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from helikon import AgentEvent, FunctionTool, LlmAgent
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.testing import TestInterpreter

sys.path.insert(0, str(Path(__file__).parents[1] / "golden"))
from scenarios import SCENARIOS

from tests.property.strategies import per_path

RUN_ID = "run-1"


def call_synchronously(tool: FunctionTool) -> Any:
    """A scenario tool as a plain function of its arguments (they never suspend)."""

    def call(args: dict[str, Any]) -> Any:
        value = tool(**args)
        if inspect.iscoroutine(value):
            try:
                value.send(None)
            except StopIteration as stop:
                return stop.value
            raise RuntimeError("a scenario tool suspended")
        return value

    return call


def live(name: str, backend: str, interpreter: Any = None) -> list[AgentEvent]:
    agent, input, ctx = SCENARIOS[name]()

    async def go() -> list[AgentEvent]:
        run = agent.run(ctx, input, interpreter=interpreter or LiveInterpreter(RUN_ID, lock_step=True))
        return [event async for event in run]

    return anyio.run(go, backend=backend)


def scripted(name: str) -> list[AgentEvent]:
    agent, input, _ = SCENARIOS[name]()
    interpreter = TestInterpreter(
        model=list(agent.model.remaining),
        tools={tool.name: call_synchronously(tool) for tool in agent.tools},
    )
    return list(interpreter.run(agent.spec, input, RUN_ID).events)


def replayed(name: str) -> list[AgentEvent]:
    recorder = RecordingInterpreter(LiveInterpreter(RUN_ID, lock_step=True))
    live(name, "trio", recorder)
    return live(name, "trio", ReplayInterpreter(recorder.trace))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_interpreter_gives_the_same_events(name: str) -> None:
    reference = live(name, "trio")

    assert live(name, "asyncio") == reference
    assert replayed(name) == reference
    for backend in ("trio", "asyncio"):
        assert per_path(live(name, backend, LiveInterpreter(RUN_ID))) == per_path(reference)
    agent, _, _ = SCENARIOS[name]()
    # The test interpreter has no cancellation token and runs single LLM agents only.
    if name != "cancelled_run" and isinstance(agent, LlmAgent) and not agent.handoffs:
        assert scripted(name) == reference
