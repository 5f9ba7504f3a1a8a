"""The book's quickstart in Python: a budgeting assistant with two tools.

Run it with ``python examples/budget_assistant.py``. Without an
``OPENAI_API_KEY`` it uses a scripted model (no network), so the demo runs
anywhere; with a key it calls OpenAI's Chat Completions API (install the
``openai`` extra). Switching provider is the one line in ``choose_model``.
"""

from __future__ import annotations

import os
import sys

import attrs
import trio

from helikon import (
    AgentInput,
    LlmAgent,
    MessageOutput,
    Model,
    RunCompleted,
    RunContext,
    RunFailed,
    TokenDelta,
    ToolCallItem,
    ToolContext,
    ToolEffect,
    ToolOutputItem,
    tool,
)
from helikon.errors import describe


@attrs.frozen
class LookupSpendingArgs:
    category: str
    """Spending category, e.g. "Dining"."""
    month: str
    """Month in YYYY-MM form."""


@attrs.frozen
class Spending:
    total: float
    """Total spent in the category this month, in dollars."""
    count: int
    """Number of transactions."""


@tool(effect=ToolEffect.READ_ONLY)
async def lookup_spending(ctx: ToolContext[None], args: LookupSpendingArgs) -> Spending:
    """Look up the user's total spending and transaction count for a category in a month."""
    ledger = {"dining": Spending(312.40, 18), "groceries": Spending(540.10, 9)}
    return ledger.get(args.category.lower(), Spending(0.0, 0))


@attrs.frozen
class BudgetStatus:
    budget: float
    """Monthly budget for the category, in dollars."""
    spent: float
    """Amount spent so far, in dollars."""
    remaining: float
    """Remaining budget (negative = over budget)."""


@tool(effect=ToolEffect.READ_ONLY)
async def budget_status(category: str) -> BudgetStatus:
    """Look up the user's monthly budget, amount spent, and remaining balance for a category.

    Args:
        category: Spending category, e.g. "Dining".
    """
    budgets = {"dining": BudgetStatus(250.0, 312.40, -62.40), "groceries": BudgetStatus(600.0, 540.10, 59.90)}
    return budgets.get(category.lower(), BudgetStatus(0.0, 0.0, 0.0))


INSTRUCTIONS = (
    "You are a budgeting assistant. Use the tools to look up the user's spending and budget for the "
    "relevant category, then tell them whether they are on track and suggest one concrete action."
)


def scripted_model() -> Model:
    """A model that answers as a real one would, from a script (no network)."""
    from helikon import Usage
    from helikon.testing import MockModel, call_tools, say

    return MockModel(
        [
            call_tools(
                ("lookup_spending", {"category": "Dining", "month": "2026-12"}),
                ("budget_status", {"category": "Dining"}),
                usage=Usage(input_tokens=412, output_tokens=38),
            ),
            say(
                "You're over your dining budget this month: $312.40 spent against $250.00, "
                "so $62.40 over, across 18 transactions. One concrete step: cap dining out at "
                "one meal a week for the rest of the month and cook the rest at home.",
                usage=Usage(input_tokens=530, output_tokens=61),
            ),
        ],
        model_id="scripted-gpt",
    )


def choose_model() -> Model:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from helikon.providers.openai import OpenAIModel  # type: ignore[import-not-found]
        except ImportError:
            print(
                "(OPENAI_API_KEY is set but the OpenAI provider is not available; using the scripted model)"
            )
        else:
            return OpenAIModel.chat("gpt-5-mini")  # type: ignore[no-any-return]
    return scripted_model()


async def main() -> int:
    agent = LlmAgent(
        name="budget-assistant",
        model=choose_model(),
        instructions=INSTRUCTIONS,
        tools=[lookup_spending, budget_status],
    )
    ctx = RunContext.ephemeral(None)
    question = "How am I doing on my dining budget this month?"
    print(f"user: {question}\n")
    async for event in agent.run(ctx, AgentInput.from_user_text(question)):
        match event:
            case ToolCallItem(item=call):
                print(f"-> tool call {call.name}({call.arguments})")
            case ToolOutputItem(item=result):
                print(f"<- {result.name}: {result.content}")
            case TokenDelta(text=text):
                print(text, end="", flush=True)
            case MessageOutput():
                print()
            case RunCompleted(usage=usage):
                print(f"\n[done: {usage.total_tokens} tokens]")
            case RunFailed(error=error):
                print(f"\n[run failed: {describe(error)}]", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
