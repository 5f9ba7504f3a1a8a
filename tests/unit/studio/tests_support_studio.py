"""Shared pieces of the studio tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helikon import LlmAgent
from helikon.testing import MockModel

#: The project's golden traces.
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "traces"


def agent_with(name: str, *script: Any, tools: list[Any] | None = None) -> Any:
    """An agent whose model plays ``script`` (one answer per model call)."""
    return LlmAgent(name=name, model=MockModel(list(script)), tools=tools or [])
