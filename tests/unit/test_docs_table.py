"""``docs/architecture.md`` stays true: its phase table is what
``docs/make_state_table.py`` prints today, and its driving loop runs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from helikon.effects import (
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    ModelResponded,
    ToolReturned,
    ToolsExecuted,
)
from helikon.events import RunCompleted, ToolOutputItem
from helikon.loop import AgentSpec
from helikon.model import ToolDef
from helikon.testing import call_tools, say

DOCS = Path(__file__).resolve().parents[2] / "docs"


def table_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_state_table", DOCS / "make_state_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_phase_table_in_the_docs_is_the_generated_one() -> None:
    script = table_script()
    doc = (DOCS / "architecture.md").read_text()
    published = doc.split(script.BEGIN, 1)[1].split(script.END, 1)[0].strip("\n")
    assert published == script.render().strip("\n"), "run: python docs/make_state_table.py --write"


def test_the_table_has_a_row_for_every_pair_the_machine_accepts() -> None:
    from helikon.loop import TABLE

    rows = table_script().render().splitlines()[2:]
    pairs = {tuple(cell.strip(" `") for cell in (row.split("|")[1], row.split("|")[3])) for row in rows}
    assert {(p.__name__, r.__name__) for p, r in TABLE} <= pairs


def test_the_driving_loop_in_the_docs_runs_an_agent() -> None:
    doc = (DOCS / "architecture.md").read_text()
    (code,) = re.findall(r"## Driving the machine.*?```python\n(.*?)```", doc, re.S)
    namespace: dict[str, Any] = {}
    exec(compile(code, "architecture.md", "exec"), namespace)

    spec = AgentSpec("clock-reader", tools=(ToolDef("clock", "The time.", {"type": "object"}),))
    script: list[list[Any]] = [call_tools(("c1", "clock", {})), say("It is noon.")]

    def perform(effect: Effect) -> EffectResult:
        match effect:
            case CallModel():
                return ModelResponded(tuple(script.pop(0)))
            case ExecuteTools(steps=steps):
                return ToolsExecuted(tuple(ToolReturned(s.call_id, "12:00") for s in steps))
        raise AssertionError(f"unexpected {effect!r}")

    events = namespace["drive"](spec, "What time is it?", perform)
    assert any(type(e) is ToolOutputItem and e.item.content == "12:00" for e in events)
    assert type(events[-1]) is RunCompleted
