"""Perform one effect of the resume agent's run in this process, then exit.

``python step_process.py KIND STATE_FILE`` starts the run of agent ``KIND``
(``adder``: the resume agent; ``handoff``: a triage agent handing off to a
specialist) when ``STATE_FILE`` does not exist; otherwise it loads the
state, performs the effect it waits on with brand-new agents (and so
brand-new ``MockModel`` s holding all their scripts) and saves the next
state. Each event goes to stdout as a JSON line; the last line is ``DONE``
once the run is over.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import trio

from helikon import Handoff, LlmAgent, advance, dump_state, load_state, pending, perform, start, tool
from helikon.codec import to_json
from helikon.effects import Terminate
from helikon.events import AgentEvent
from helikon.testing import MockModel, call_tools, say

sys.path.insert(0, str(Path(__file__).parent))
from resume_agent import make_agent


@tool
async def balance(account: str) -> str:
    """An account's balance.

    Args:
        account: the account.
    """
    return f"{account}: $120"


def handoff_agent() -> LlmAgent[Any]:
    specialist = LlmAgent(
        name="specialist",
        model=MockModel(
            [
                call_tools(("balance", {"account": "savings"})),
                call_tools(("balance", {"account": "checking"})),
                say("Savings and checking hold $120 each."),
            ]
        ),
        tools=[balance],
        description="Answers balance questions.",
    )
    return LlmAgent(
        name="triage",
        model=MockModel(
            [call_tools(("balance", {"account": "main"})), call_tools(("transfer_to_specialist", {}))]
        ),
        tools=[balance],
        handoffs=[Handoff.to(specialist)],
    )


AGENTS = {"adder": make_agent, "handoff": handoff_agent}


def main(kind: str, state_file: Path) -> None:
    agent = AGENTS[kind]()  # every script: each model finds its place in the request
    if not state_file.exists():
        outcome = start(agent, "add", run_id="r")
        events = list(outcome.events)
    else:
        state = load_state(state_file.read_bytes())
        effect = pending(agent, state)
        live, result = trio.run(lambda: perform(agent, effect, run_id="r"))
        outcome = advance(agent, state, result)
        events = [*live, *outcome.events]
        state_file.write_bytes(dump_state(outcome.state))
        # An effect the stored state would not give again (it starts tool
        # steps, which the stored state now marks started) is this job's to
        # perform: a later job would reconcile them instead.
        while outcome.effect != pending(agent, outcome.state):
            live, result = trio.run(functools.partial(perform, agent, outcome.effect, run_id="r"))
            outcome = advance(agent, outcome.state, result)
            events.extend((*live, *outcome.events))
            state_file.write_bytes(dump_state(outcome.state))
    state_file.write_bytes(dump_state(outcome.state))
    for event in events:
        sys.stdout.buffer.write(to_json(event, AgentEvent) + b"\n")
    if isinstance(outcome.effect, Terminate):
        sys.stdout.buffer.write(b"DONE\n")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
