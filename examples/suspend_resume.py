"""Suspend a run at any effect boundary and resume it in another process.

The first invocation runs the agent step by step until the model asks to
run a side-effecting tool, saves the run's state to disk and exits — as a
service would while a human approves the payment. The second invocation
(``--resume``), in a fresh process, loads the state and finishes the run.

    python examples/suspend_resume.py            # runs until the approval point, saves run.state
    python examples/suspend_resume.py --resume   # picks up from run.state and finishes

The events of the two halves, put together, are the events of an
uninterrupted run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from helikon import LlmAgent, advance, dump_state, load_state, perform, start, tool
from helikon.effects import ExecuteTools, InvokeTool, Terminate
from helikon.testing import MockModel, call_tools, say

STATE = Path("run.state")


@tool
async def pay_invoice(invoice: str, amount: float) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number.
        amount: the amount in dollars.
    """
    return f"paid {invoice}: ${amount:.2f}"


# A scripted model stands in for a real one: each process gets the replies
# the model would give in its half of the run.
FIRST_REPLIES = [call_tools(("pay_invoice", {"invoice": "INV-7", "amount": 120.0}))]
SECOND_REPLIES = [say("Invoice INV-7 is paid.")]


def make_agent(replies: list[list[object]]) -> LlmAgent[None]:
    model = MockModel(replies)  # type: ignore[arg-type]
    return LlmAgent(name="payments", model=model, instructions="Pay what the user asks.", tools=[pay_invoice])


async def first_half() -> None:
    agent = make_agent(FIRST_REPLIES)
    outcome = start(agent, "Please pay invoice INV-7 ($120).", run_id="run-42")
    while not isinstance(outcome.effect, Terminate):
        for event in outcome.events:
            print("  ", event)
        if isinstance(outcome.effect, ExecuteTools):
            STATE.write_bytes(dump_state(outcome.state))
            names = ", ".join(step.tool for step in outcome.effect.steps if isinstance(step, InvokeTool))
            print(f"suspended before running {names}; state saved to {STATE}")
            return
        live_events, result = await perform(agent, outcome.effect, run_id="run-42")
        for event in live_events:
            print("  ", event)
        outcome = advance(agent, outcome.state, result)


async def second_half() -> None:
    # A fresh process: the agent definition is rebuilt, the state loaded.
    agent = make_agent(SECOND_REPLIES)
    state = load_state(STATE.read_bytes())
    print(f"resuming run {state.run_id} in phase {type(state.phase).__name__}")
    async for event in agent.resume(None, state):
        print("  ", event)
    STATE.unlink()


if __name__ == "__main__":
    trio.run(second_half if "--resume" in sys.argv else first_half)
