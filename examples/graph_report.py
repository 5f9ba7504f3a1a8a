"""The book's graph: spending and income analyses fan into one summary.

``GraphAgent`` runs a DAG: ``spending`` and ``income`` have no predecessors,
so they run at once; ``summary`` runs when both are done, with their outputs
appended to its input as labelled context messages (``[spending]``,
``[income]``). Every node's final text lands in ``ctx.state[node]``; the
single sink's text is the final output. Scripted models make it runnable
anywhere: ``python examples/graph_report.py``.
"""

from __future__ import annotations

import sys

import trio

from helikon import (
    AgentUpdated,
    GraphAgent,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunContext,
    RunFailed,
    ToolOutputItem,
    UserMessage,
    tool,
)
from helikon.items import text_of
from helikon.testing import MockModel, call_tools, say


@tool
async def lookup_spending(month: str) -> dict[str, float]:
    """Total spending by category for a month.

    Args:
        month: Month in YYYY-MM form.
    """
    return {"rent": 1400.0, "dining": 312.4, "groceries": 387.6}


spending = LlmAgent(
    name="spending-analyst",
    model=MockModel(
        [call_tools(("lookup_spending", {"month": "2026-12"})), say("Spent $2,100: rent $1,400, food $700.")]
    ),
    instructions="Summarize the month's spending.",
    tools=[lookup_spending],
)
income = LlmAgent(name="income-analyst", model=MockModel([say("Earned $3,000 in salary.")]))
summary_model = MockModel([say("You saved $900 in December (30% of income). Trim dining first.")])
summary = LlmAgent(name="summarizer", model=summary_model, instructions="Combine the analyses.")

report = (
    GraphAgent.builder()
    .name("finance_report")
    .description("Fans spending and income analysis into a combined summary.")
    .node("spending", spending)
    .node("income", income)
    .node("summary", summary)
    .edge("spending", "summary")
    .edge("income", "summary")
    .build()
)


async def main() -> int:
    ctx = RunContext.ephemeral(None)
    async for event in report.run(ctx, "Report on my December finances."):
        match event:
            case AgentUpdated(agent=agent):
                print(f"[{agent}]")
            case ToolOutputItem(item=result):
                print(f"  <- {result.name}: {result.content}")
            case MessageOutput(item=message):
                print(f"  {text_of(message.content)}")
            case RunCompleted():
                print("[done]")
            case RunFailed(error=error):
                print(f"[run failed: {error}]", file=sys.stderr)
                return 1
    print("\nthe summarizer was given:")
    for item in summary_model.requests[0].messages:
        if isinstance(item, UserMessage):
            print(f"  {text_of(item.content)!r}")
    for key, _ in report.children:  # in node order (state fills in completion order)
        print(f"state[{key!r}] = {ctx.state[key]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
