"""The book's swarm: three finance agents with handoffs among all of them.

``SwarmAgent`` gives every member a ``transfer_to_<slug>`` tool for every
other member (full mesh). The run starts at the entry member (the first one
added unless ``.entry(...)`` says otherwise) and ends as soon as a member
answers instead of handing off; ``.max_handoffs(6)`` bounds a swarm that
never converges. Scripted models make it runnable anywhere:
``python examples/swarm_finance.py``.
"""

from __future__ import annotations

import sys

import trio

from helikon import AgentUpdated, HandoffItem, LlmAgent, MessageOutput, RunCompleted, RunFailed, SwarmAgent
from helikon.items import text_of
from helikon.testing import MockModel, call_tools, say

triage = LlmAgent(
    name="triage",
    description="Routes personal-finance questions to the right specialist.",
    model=MockModel([call_tools(("transfer_to_budgeting", {}))]),
    instructions="Route the question to a specialist; never answer yourself.",
)
budgeting = LlmAgent(
    name="budgeting",
    description="Monthly budgets and cutting spending.",
    model=MockModel(
        [call_tools(("transfer_to_investing", {}), text="Cutting dining to $150 frees $160 a month. ")]
    ),
    instructions="You are a budgeting specialist. Hand investing questions to the investing specialist.",
)
investing = LlmAgent(
    name="investing",
    description="Investing, portfolios, and retirement.",
    model=MockModel([say("Put the $160 a month into a broad index fund on an automatic plan.")]),
    instructions="You are an investing specialist.",
)

swarm = (
    SwarmAgent.builder()
    .name("support_swarm")
    .description("A personal-finance support swarm covering budgeting and investing.")
    .member(triage)
    .member(budgeting)
    .member(investing)
    .entry("triage")
    .max_handoffs(6)
    .build()
)


async def main() -> int:
    for name, member in swarm.members.items():
        print(f"{name} can call: {', '.join(t.name for t in member.spec.model_tools)}")
    question = "I overspend on dining. How do I save and invest the difference?"
    print(f"\nuser: {question}")
    async for event in swarm.run(None, question):
        match event:
            case HandoffItem(from_agent=source, to_agent=target):
                print(f"handoff: {source} -> {target}")
            case AgentUpdated(agent=agent):
                print(f"[{agent} is now speaking]")
            case MessageOutput(item=message):
                print(f"{message.agent}: {text_of(message.content).strip()}")
            case RunCompleted():
                print("[done: the investing member answered]")
            case RunFailed(error=error):
                print(f"[run failed: {error}]", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
