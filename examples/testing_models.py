"""Test models: a run driven one effect per fresh process, and a FunctionModel.

``python examples/testing_models.py`` runs a small budgeting agent twice
with a scripted ``MockModel``: once in this process, and once one effect per
new Python process (each builds the agent and its model anew and continues
from the state the previous one saved) — the events are the same. Then a
``FunctionModel`` answers from the request itself. No network, no API key.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from helikon import (
    AgentEvent,
    LlmAgent,
    advance,
    collect,
    dump_state,
    load_state,
    pending,
    perform,
    run_sync,
    start,
    tool,
)
from helikon.codec import from_json, to_json
from helikon.effects import Terminate
from helikon.interpreters import LiveInterpreter
from helikon.items import ToolResult
from helikon.model import ModelRequest
from helikon.testing import FunctionModel, MockModel, ModelReply, call_tools, say

SPENT = {"dining": 312.40, "groceries": 188.10}


# A dict lookup: no worker thread needed, and safe to run again with the same
# call id, so a process that resumes a stored round re-runs it (a tool with
# side effects would be reconciled instead: docs/interpreters.md).
@tool(thread=False, idempotent=True)
def spent(category: str) -> float:
    """What was spent this month in a category.

    Args:
        category: The spending category.
    """
    return SPENT[category]


SCRIPTS = [
    call_tools(("spent", {"category": "dining"})),
    call_tools(("spent", {"category": "groceries"})),
    say("Dining $312.40 and groceries $188.10: $500.50 in all."),
]


def budget_agent() -> LlmAgent[None]:
    return LlmAgent(name="budget", model=MockModel(SCRIPTS), tools=[spent])


def step(state_file: Path) -> None:
    """Perform the one effect the saved run waits on (or start it), save, print the events."""
    agent = budget_agent()
    if not state_file.exists():
        outcome = start(agent, "What did I spend?", run_id="r")
        events = list(outcome.events)
    else:
        state = load_state(state_file.read_bytes())
        effect = pending(agent, state)
        live, result = trio.run(lambda: perform(agent, effect, run_id="r"))
        outcome = advance(agent, state, result)
        events = [*live, *outcome.events]
    state_file.write_bytes(dump_state(outcome.state))
    for event in events:
        sys.stdout.buffer.write(to_json(event, AgentEvent) + b"\n")
    if isinstance(outcome.effect, Terminate):
        print("DONE")


def across_processes() -> tuple[list[AgentEvent], int]:
    events: list[AgentEvent] = []
    with tempfile.TemporaryDirectory() as tmp:
        state_file = Path(tmp) / "run.state"
        for processes in range(1, 50):
            out = subprocess.run(
                [sys.executable, __file__, "--step", str(state_file)], capture_output=True, check=True
            ).stdout.splitlines()
            done = out[-1:] == [b"DONE"]
            events += [from_json(line, AgentEvent) for line in (out[:-1] if done else out)]
            if done:
                return events, processes
    raise RuntimeError("the run did not end")


def adviser(request: ModelRequest) -> ModelReply:
    """Look up dining spending, then judge it."""
    last = request.messages[-1]
    if isinstance(last, ToolResult):
        amount = float(last.content)
        verdict = "over" if amount > 250 else "within"
        return f"You spent ${amount:.2f} on dining: {verdict} your $250 budget."
    return call_tools(("spent", {"category": "dining"}))


def main() -> None:
    async def one_process() -> list[AgentEvent]:
        result = await collect(
            budget_agent().run(None, "What did I spend?", interpreter=LiveInterpreter("r"))
        )
        return list(result.events)

    in_one = trio.run(one_process)
    stepped, processes = across_processes()
    print(f"one effect per process: {processes} processes, {len(stepped)} events")
    print(f"same events as one process: {stepped == in_one}")

    answer = run_sync(LlmAgent(name="adviser", model=FunctionModel(adviser), tools=[spent]), "Dining?")
    print(f"FunctionModel: {answer.final_output}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--step"]:
        step(Path(sys.argv[2]))
    else:
        main()
