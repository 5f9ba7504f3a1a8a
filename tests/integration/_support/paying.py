"""The two tools the server and protocol tests' agents carry, and the
context under which paying waits for a human."""

from __future__ import annotations

from typing import Any

from helikon import RunContext, tool
from helikon.governance import GuardRule


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def approving_context() -> RunContext[Any]:
    """Payments need a human: with no approval handler, the run suspends
    until the approvals route (or the protocol's equivalent) answers."""
    return RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay")]).with_suspend_on_approval()
