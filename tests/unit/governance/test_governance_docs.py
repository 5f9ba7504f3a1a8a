"""The Python examples in docs/governance.md run (all but the placeholder wiring section)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "governance.md"
WIRED_FROM = "## Using it in a run"


def examples() -> list[str]:
    text = DOC.read_text(encoding="utf-8").split(WIRED_FROM)[0]
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_the_doc_has_examples() -> None:
    assert len(examples()) >= 6


@pytest.mark.parametrize("code", examples())
def test_example_runs(code: str) -> None:
    exec(compile(code, str(DOC), "exec"), {})
