"""What live-tools replay is for: a bug in a tool's code that a plain replay
cannot see (it feeds back the recorded result), caught by running the tool
for real against the recording."""

from __future__ import annotations

from pathlib import Path

import pytest
from shop import tools
from shop.agents import sales

from helikon.testing import GoldenMismatch, GoldenTraces

GOLDEN = Path(__file__).parent / "goldens" / "sales.jsonl"


@pytest.fixture
def broken_discount(monkeypatch: pytest.MonkeyPatch) -> None:
    """The regression: the ten-item discount is lost."""
    monkeypatch.setattr(tools, "BROKEN", True)


def test_plain_replay_cannot_see_it(broken_discount: None) -> None:
    GoldenTraces().check(sales(), GOLDEN)


def test_live_tools_replay_catches_it(broken_discount: None) -> None:
    with pytest.raises(GoldenMismatch) as caught:
        GoldenTraces(live_tools=True).check(sales(), GOLDEN)

    message = str(caught.value)
    assert "ExecuteTools run live gave another result from quote(" in message
    assert "result.results[0].output.cents: expected 432, got 480" in message
