"""The book's handoff example: a triage agent routes to a specialist.

``triage`` never answers itself: it has one ``transfer_to_<slug>`` tool per
handoff (``transfer_to_budgeting_specialist``, ``transfer_to_investing_specialist``),
each described by its target's description. When the model calls one, the
run emits ``HandoffItem`` then ``AgentUpdated``, and the specialist finishes
the run with the whole conversation so far. Scripted models stand in for
real ones, so it runs anywhere: ``python examples/triage_handoff.py``.
"""

from __future__ import annotations

import sys

import trio

from helikon import (
    AgentUpdated,
    Handoff,
    HandoffItem,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunContext,
    RunFailed,
    ToolCallItem,
    Usage,
)
from helikon.items import text_of
from helikon.testing import MockModel, call_tools, say

budgeting = LlmAgent(
    name="budgeting specialist",
    description="Answers questions about monthly budgets and cutting spending.",
    model=MockModel([say("Track every expense for a month, then cut the biggest category first.")]),
    instructions="You are a budgeting specialist. Give concrete, friendly advice.",
)

investing = LlmAgent(
    name="investing specialist",
    description="Answers questions about investing, portfolios, and retirement.",
    model=MockModel(
        [
            say(
                "Keep an emergency fund first, then put the $5,000 into a low-cost broad index fund "
                "and add to it every month.",
                usage=Usage(input_tokens=180, output_tokens=32),
            )
        ]
    ),
    instructions="You are an investing specialist. Give concrete, prudent advice.",
)

# The scripted triage model does what a real one would: call the transfer tool.
triage = LlmAgent(
    name="triage",
    model=MockModel(
        [call_tools(("transfer_to_investing_specialist", {}), usage=Usage(input_tokens=95, output_tokens=12))]
    ),
    instructions=(
        "Classify the user's personal-finance question and transfer to the right specialist. "
        "Do not answer yourself — always hand off."
    ),
    handoffs=[Handoff.to(budgeting), Handoff.to(investing)],
)


async def main() -> int:
    question = "How should I start investing $5,000?"
    print(f"user: {question}")
    print("triage sees the tools:", ", ".join(t.name for t in triage.spec.model_tools))
    async for event in triage.run(RunContext.ephemeral(None), question):
        match event:
            case ToolCallItem(item=call):
                print(f"-> {call.name}()")
            case HandoffItem(from_agent=source, to_agent=target):
                print(f"handoff: {source} -> {target}")
            case AgentUpdated(agent=agent):
                print(f"[{agent} is now speaking]")
            case MessageOutput(item=message):
                print(f"{message.agent}: {text_of(message.content)}")
            case RunCompleted(usage=usage):
                print(f"[done: {usage.total_tokens} tokens across both agents]")
            case RunFailed(error=error):
                print(f"[run failed: {error}]", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
