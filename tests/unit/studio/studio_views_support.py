"""Shared pieces of the regression, evals and sessions view tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from helikon import LlmAgent, ToolEffect, tool
from helikon.evals import EvalDataset, EvalReport, EvalRun, ExactMatch, ScriptFile, ToolUseTrajectory
from helikon.testing import MockModel

ROOT = Path(__file__).resolve().parents[3]
GOLDEN_TESTS = ROOT / "tests" / "golden"
EXAMPLE_EVALS = ROOT / "examples" / "evals"


def scenario(name: str) -> tuple[Any, Any, Any]:
    """A golden scenario's (agent, input, ctx), from tests/golden/scenarios.py."""
    if str(GOLDEN_TESTS) not in sys.path:
        sys.path.insert(0, str(GOLDEN_TESTS))
    from scenarios import SCENARIOS

    return SCENARIOS[name]()  # type: ignore[no-any-return]


@tool(effect=ToolEffect.READ_ONLY)
async def budget_status(category: str) -> dict[str, float]:
    """Look up the monthly budget for a category.

    Args:
        category: Spending category, e.g. "Dining".
    """
    return {"budget": 300.0}  # the golden recorded 250.0: a regression in the tool


def broken(kind: str, model_script: Any = None) -> Any:
    """``single_tool``'s agent, broken: its ``instructions`` or its ``tool`` differs from the recording."""
    agent, _, _ = scenario("single_tool")
    if kind == "instructions":
        return LlmAgent(
            name=agent.name,
            model=agent.model,
            instructions="You are a careless assistant.",
            tools=agent.tools,
        )
    tools = [budget_status if t.name == "budget_status" else t for t in agent.tools]
    return LlmAgent(name=agent.name, model=agent.model, instructions=agent.instructions, tools=tools)


async def _lookup_order(order: str) -> dict[str, str]:
    """Look up an order's status.

    Args:
        order: the order id, e.g. A1.
    """
    return {"order": order, "status": {"A1": "shipped", "B2": "delivered"}.get(order, "not found")}


async def _refund_order(order: str) -> str:
    """Refund an order.

    Args:
        order: the order id to refund.
    """
    return f"refunded {order}"


lookup_order = tool(effect=ToolEffect.READ_ONLY)(_lookup_order)
refund_order = tool(_refund_order)


def saved_eval_run(directory: Path) -> EvalReport:
    """examples/evals' dataset through its scripted support agent, saved to ``directory``."""
    dataset = EvalDataset.from_jsonl_path(EXAMPLE_EVALS / "support.jsonl")
    scripts = ScriptFile.load(EXAMPLE_EVALS / "support_scripts.json")

    def support_agent(case: Any) -> Any:
        model = MockModel.from_script_file(scripts, case.id)
        return LlmAgent(name="support", model=model, tools=[lookup_order, refund_order])

    run = EvalRun(
        dataset=dataset,
        agent_factory=support_agent,
        evaluators=[ExactMatch(), ToolUseTrajectory.exact()],
        name="support nightly",
    )
    report = run.run_sync()
    report.save(directory)
    return report
