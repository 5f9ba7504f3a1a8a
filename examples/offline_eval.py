"""An eval run, offline: a dataset through a scripted support agent, scored and reported.

Run it with ``python examples/offline_eval.py``. It needs no network and no
API key: every case's model is scripted by ``examples/evals/support_scripts.json``.
It writes into the current directory:

- ``eval-run/report.html`` — the report to open in a browser (charts, a
  per-case table with each failure's diff, links to each case's trace),
  with ``report.json`` and ``traces/`` beside it;
- ``evals.db`` — the run in SQLite (``eval_runs``, ``eval_cases``, ``eval_events``).

Then it shows the two things a saved run is good for: re-scoring it with
other evaluators (no agent, no model), and replaying it against a changed
agent (here: refunds are now denied) to see which cases would behave
differently, and where.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import msgspec

from helikon import DenyRule, LlmAgent, RunContext, ToolEffect, tool
from helikon.evals import (
    EvalCase,
    EvalDataset,
    EvalRun,
    ExactMatch,
    JsonSchemaEvaluator,
    LlmJudge,
    ScriptFile,
    SqliteTraceSink,
    ToolUseTrajectory,
)
from helikon.testing import MockModel, say

HERE = Path(__file__).resolve().parent / "evals"
ORDERS = {"A1": "shipped", "B2": "delivered", "C3": "processing"}


@tool(effect=ToolEffect.READ_ONLY)
async def lookup_order(order: str) -> dict[str, str]:
    """Look up an order's status.

    Args:
        order: the order id, e.g. A1.
    """
    return {"order": order, "status": ORDERS.get(order, "not found")}


@tool
async def refund_order(order: str) -> str:
    """Refund an order.

    Args:
        order: the order id to refund.
    """
    return f"refunded {order}"


SCRIPTS = ScriptFile.load(HERE / "support_scripts.json")


def support_agent(case: EvalCase) -> LlmAgent[None]:
    """A fresh agent per case: its scripted model plays that case's turns."""
    return LlmAgent(
        name="support",
        model=MockModel.from_script_file(SCRIPTS, case.id),
        instructions="You are a customer-support agent for an online shop. Use the tools.",
        tools=[lookup_order, refund_order],
    )


def judge_model(case: EvalCase) -> MockModel:
    """A scripted judge (a real one would be e.g. an OpenAI or Anthropic model)."""
    kind = "empathetic" if case.metadata.get("topic") == "tone" else "on topic"
    verdict = {"score": 0.9, "reasoning": f"The reply is {kind} and asks for what it needs."}
    return MockModel([say(msgspec.json.encode(verdict).decode())])


def main() -> None:
    dataset = EvalDataset.from_jsonl_path(HERE / "support.jsonl")
    evaluators = [
        ExactMatch(),
        ToolUseTrajectory.exact(),
        JsonSchemaEvaluator(),
        LlmJudge(judge_model, "The reply is polite and helps the customer.", threshold=0.7),
    ]
    run = EvalRun(
        dataset=dataset,
        agent_factory=support_agent,
        evaluators=evaluators,
        concurrency=4,
        sinks=[SqliteTraceSink("evals.db")],
        run_id="support-nightly",
        name="support agent",
    )
    report = run.run_sync()
    print(report.render_table())
    html = report.save("eval-run")
    print(f"\nreport: {html}  (open it in a browser)")
    print(f"passed: {report.passed()}")

    # 1. Re-score the saved run offline, with a laxer exact match: no agent, no model.
    lax = EvalRun(
        dataset=dataset, evaluators=[ExactMatch(case_sensitive=False), ToolUseTrajectory.in_order()]
    )
    rescored = lax.rescore_sync("eval-run")
    print(f"\nre-scored offline: mean {rescored.mean:.2f}, {rescored.counts.failed} case(s) failing")

    # 2. Replay the saved run against a changed agent: refunds are now denied.
    # A loose replay tolerates the changed definition (it warns) and stops
    # each case at the first effect that differs from the recording.
    no_refunds = EvalRun(
        dataset=dataset,
        agent_factory=support_agent,
        ctx_factory=lambda case: RunContext.ephemeral(None).with_deny_rules([DenyRule.tool("refund_order")]),
        evaluators=[ExactMatch()],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replayed = no_refunds.replay_sync("eval-run", strict=False)
    print(f"\nreplayed with refunds denied: {len(replayed.diverged())} case(s) diverge")
    for case in replayed.diverged():
        assert case.divergence is not None
        print(f"  {case.case.id}: step {case.divergence.step}: {case.divergence.headline}")


if __name__ == "__main__":
    main()
