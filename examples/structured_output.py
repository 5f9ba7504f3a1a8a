"""Structured output: the agent's final answer is a typed value.

``output_type=TransactionCategory`` makes the loop add a finalizing turn that
asks the model for JSON matching the class's schema (validated; repaired
once if it does not match), and ``collect_typed`` parses it into the class.
Runs with a scripted model, so it needs no network or key.
"""

from __future__ import annotations

import attrs
import trio

from helikon import LlmAgent, RunContext, collect_typed
from helikon.testing import MockModel, say


@attrs.frozen
class TransactionCategory:
    category: str
    """Spending category, e.g. "Groceries", "Dining", "Transport"."""
    confidence: float
    """0.0-1.0 confidence in the category."""
    recurring: bool
    """True if this looks like a recurring charge."""
    reasoning: str
    """One-sentence justification."""


# The scripted model first answers with a field missing, so the run shows the
# one repair turn the loop allows before it gives up.
model = MockModel(
    [
        say('{"category": "Entertainment", "confidence": 0.9, "recurring": true}'),
        say(
            '{"category": "Entertainment", "confidence": 0.93, "recurring": true, '
            '"reasoning": "Netflix is a monthly streaming subscription."}'
        ),
    ]
)

agent = LlmAgent(
    name="transaction-categorizer",
    model=model,
    instructions=(
        "You are a personal-finance assistant. Categorize the transaction into a single spending "
        "category, say whether it looks recurring, and express your confidence between 0.0 and 1.0."
    ),
    output_type=TransactionCategory,
)


async def main() -> None:
    stream = agent.run(RunContext.ephemeral(None), "NETFLIX.COM 866-579-7172 CA - $15.49")
    result = await collect_typed(stream, TransactionCategory)
    print(result.final_output)
    print(f"model calls: {model.calls}")


if __name__ == "__main__":
    trio.run(main)
