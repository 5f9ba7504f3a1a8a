"""The shop's two agents. The model is scripted (``MockModel``), so the
project needs no API key; with a real model the goldens are recorded once
with credentials and replayed offline ever after."""

from __future__ import annotations

from typing import Any

from helikon import Handoff, LlmAgent
from helikon.testing import MockModel, call_tools, say
from shop.tools import order_status, quote


def sales() -> LlmAgent[Any]:
    """Quotes prices."""
    model = MockModel([call_tools(("quote", {"item": "apple", "quantity": 12})), say("12 apples: $4.32.")])
    return LlmAgent(
        name="sales",
        model=model,
        instructions="You quote prices for the shop's fruit. Always call quote.",
        tools=[quote],
    )


def support() -> LlmAgent[Any]:
    """Answers order questions; hands pricing questions to sales."""
    tracking = LlmAgent(
        name="tracking",
        description="Tracks orders.",
        model=MockModel([call_tools(("order_status", {"order_id": "A-1001"})), say("A-1001 has shipped.")]),
        instructions="You track orders with order_status.",
        tools=[order_status],
    )
    return LlmAgent(
        name="support",
        model=MockModel([call_tools(("transfer_to_tracking", {}))]),
        instructions="You route the customer's question to the right colleague.",
        handoffs=[Handoff.to(tracking)],
    )
