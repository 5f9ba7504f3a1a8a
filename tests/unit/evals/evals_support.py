"""What the eval tests share: a support agent with one tool, a dataset, and its scripts.

The scripts are a :class:`ScriptFile`, so every case gets a fresh scripted
model (``agent_for``), as ``EvalRun`` users are told to do.
"""

from __future__ import annotations

from typing import Any

from helikon import LlmAgent, tool
from helikon.evals import EvalCase, EvalDataset, ScriptFile

DATASET = """\
{"id": "shipped", "input": "Where is order A1?", "expected": "Order A1 has shipped.", "expected_tools": TOOLS}
{"id": "greeting", "input": "Hello", "expected": "Hi! How can I help?"}

{"id": "wrong-answer", "input": "Where is B2?", "expected": "Order B2 has shipped.", "expected_tools": TOOLS}
{"id": "json", "input": "Status of A1 as JSON", "expected": {"order": "A1", "status": "shipped"}}
{"input": "no expectations at all"}
""".replace("TOOLS", '["lookup_order"]')

SCRIPTS = """{
  "default": [{"say": "I am not sure."}],
  "cases": {
    "shipped": [
      {"call": [{"name": "lookup_order", "arguments": {"order": "A1"}}]},
      {"say": "Order A1 has shipped."}
    ],
    "greeting": [{"say": "Hi! How can I help?"}],
    "wrong-answer": [
      {"call": [{"name": "lookup_order", "arguments": {"order": "B2"}}]},
      {"say": "Order B2 is still in the warehouse."}
    ],
    "json": [{"say": "{\\"status\\": \\"shipped\\", \\"order\\": \\"A1\\"}"}]
  }
}"""

ORDERS = {"A1": "shipped", "B2": "in the warehouse"}


@tool
async def lookup_order(order: str) -> str:
    """Look up an order's status.

    Args:
        order: the order id, e.g. A1.
    """
    return f"order {order}: {ORDERS.get(order, 'unknown')}"


def dataset() -> EvalDataset:
    return EvalDataset.from_jsonl_str(DATASET, source="support.jsonl")


def scripts() -> ScriptFile:
    return ScriptFile.from_json(SCRIPTS, source="support-scripts.json")


def agent_for(case: EvalCase, file: ScriptFile | None = None, **changes: Any) -> LlmAgent[None]:
    """A fresh support agent whose model plays ``case``'s scripts."""
    options: dict[str, Any] = {"tools": [lookup_order], "instructions": "You answer questions about orders."}
    options.update(changes)
    return LlmAgent(name="support", model=(file or scripts()).model_for(case.id), **options)
