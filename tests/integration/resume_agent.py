"""An agent for the suspend/resume tests, and the script a fresh process runs.

``python resume_agent.py STATE_FILE MODEL_CALLS_DONE`` loads the state,
resumes the run and prints each event as a JSON line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import trio

from helikon import LlmAgent, load_state, tool
from helikon.codec import to_json
from helikon.events import AgentEvent
from helikon.testing import MockModel, call_tools, say


@tool(idempotent=True)  # resumed after any step: a started call is run again
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


SCRIPTS: list[Any] = [
    call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}), text="Adding."),
    call_tools(("add", {"a": 3, "b": 7})),
    say('{"total": 10}'),
    say('{"total": 10, "parts": [3, 7]}'),
]


@attrs.frozen
class Sum:
    total: int
    parts: list[int]


def make_agent(model_calls_done: int = 0) -> LlmAgent[Any]:
    """The agent, with the model replies left after ``model_calls_done`` calls."""
    return LlmAgent(
        name="adder",
        model=MockModel(SCRIPTS[model_calls_done:]),
        instructions="Add numbers.",
        tools=[add],
        output_type=Sum,
    )


async def _resume(state_file: str, done: int) -> None:
    state = load_state(Path(state_file).read_bytes())
    async for event in make_agent(done).resume(None, state):
        sys.stdout.buffer.write(to_json(event, AgentEvent) + b"\n")


if __name__ == "__main__":
    trio.run(_resume, sys.argv[1], int(sys.argv[2]))
