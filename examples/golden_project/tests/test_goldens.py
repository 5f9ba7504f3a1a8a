"""Each agent against its golden trace.

pytest                         # replay: no model, no tools run
pytest --helikon-live-tools    # replay the model, run the tools for real
pytest --helikon-record        # re-record (runs the agents live)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shop.agents import sales, support

from helikon.testing import GoldenTraces

GOLDENS = Path(__file__).parent / "goldens"


def test_sales_quotes_a_discounted_order(helikon_golden: GoldenTraces) -> None:
    helikon_golden.check(sales(), GOLDENS / "sales.jsonl", input="What do 12 apples cost?")


@pytest.mark.anyio
async def test_support_hands_off_to_tracking(helikon_golden: GoldenTraces) -> None:
    # An async test (run under asyncio and trio by anyio's plugin): acheck
    # awaits the replay; check would work here too.
    await helikon_golden.acheck(support(), GOLDENS / "support.jsonl", input="Where is my order A-1001?")
