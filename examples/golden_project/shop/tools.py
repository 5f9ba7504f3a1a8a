"""The shop's tools: plain functions, the code a golden's live-tools replay runs."""

from __future__ import annotations

import os

from helikon import tool

PRICES = {"apple": 40, "pear": 55, "plum": 25}  # cents

#: Set to "1" to introduce a bug (a missing discount), to watch the goldens
#: catch it: a plain replay passes, a live-tools replay fails.
BROKEN = os.environ.get("SHOP_BROKEN_DISCOUNT") == "1"


@tool
def quote(item: str, quantity: int) -> dict[str, int]:
    """Price an order: 10% off from ten items.

    Args:
        item: what to buy (apple, pear or plum).
        quantity: how many.
    """
    total = PRICES[item] * quantity
    if quantity >= 10 and not BROKEN:
        total = total * 9 // 10
    return {"cents": total}


@tool
def order_status(order_id: str) -> str:
    """Where an order is.

    Args:
        order_id: the order's id, like A-1001.
    """
    return "shipped" if order_id.endswith(("1", "3", "5", "7", "9")) else "packing"
