"""Eval-run throughput and memory: 200 cases, concurrency 8, a scripted model.

Each case is a support question whose scripted model (from a script file, one
fresh ``MockModel`` per case) calls one tool and then answers; the run scores
it with ``ExactMatch`` and ``ToolUseTrajectory.exact()`` (and, with
``--judge``, an ``LlmJudge`` whose scripted model answers a verdict: one more
agent run per case). Every case is recorded as a trace and in the
session-event form, as ``EvalRun`` always does.

Measured per event loop (trio, asyncio):

- ``run``: wall seconds of ``EvalRun.run()`` (median of ``--rounds``);
- ``run+outputs``: the run, then ``report.save()`` (report.json, report.html,
  200 traces and their pages), an ``SqliteTraceSink`` and a
  ``ParquetTraceSink`` (skipped without pyarrow);
- peak Python heap of one run (``tracemalloc``, measured in a separate
  round since tracing slows the run), and the process' peak RSS
  (``ru_maxrss``) at the end.

It checks itself: 200 results in dataset order, 199 passing and the one
case scripted to answer wrongly failing, 400 model calls and 200 tool calls.
Prints one JSON line per metric (``{"sdk", "workload", "metric", "value",
"unit", "backend"}``).

Usage: ``python bench/evals_bench.py [--cases 200] [--concurrency 8] [--rounds 3] [--judge]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from helikon import LlmAgent, ToolEffect, tool
from helikon.evals import (
    EvalCase,
    EvalDataset,
    EvalReport,
    EvalRun,
    ExactMatch,
    LlmJudge,
    ScriptFile,
    SqliteTraceSink,
    ToolUseTrajectory,
)
from helikon.testing import MockModel, say

SDK = "helikon"
WORKLOAD = "E1"
CALLS = {"model": 0, "tool": 0}


@tool(effect=ToolEffect.READ_ONLY)
async def lookup_order(order: str) -> dict[str, str]:
    """Look up an order's status.

    Args:
        order: the order id.
    """
    CALLS["tool"] += 1
    return {"order": order, "status": "shipped"}


def write_inputs(directory: Path, cases: int) -> tuple[Path, Path]:
    """The dataset and its script file, as a user would keep them."""
    lines, scripts = [], {}
    for n in range(cases):
        order = f"A{n}"
        lines.append(
            msgspec.json.encode(
                {
                    "id": f"order-{n}",
                    "input": f"Where is my order {order}?",
                    "expected": f"Your order {order} has shipped.",
                    "expected_tools": ["lookup_order"],
                }
            ).decode()
        )
        answer = f"Your order {order} has shipped." if n != cases // 2 else "I could not find it."
        scripts[f"order-{n}"] = [
            {"call": [{"name": "lookup_order", "arguments": {"order": order}}]},
            {"say": answer},
        ]
    dataset, script = directory / "orders.jsonl", directory / "orders-scripts.json"
    dataset.write_text("\n".join(lines) + "\n")
    script.write_text(msgspec.json.encode({"default": [], "cases": scripts}).decode())
    return dataset, script


class Counted(MockModel):
    """A scripted model that counts its calls (to check the run)."""

    def invoke(self, request: Any, cancel: Any) -> Any:
        CALLS["model"] += 1
        return super().invoke(request, cancel)


def make_run(
    dataset: EvalDataset, scripts: ScriptFile, concurrency: int, judge: bool, sinks: list[Any]
) -> EvalRun:
    def agent_for(case: EvalCase) -> LlmAgent[None]:
        model = Counted(scripts.scripts_for(case.id))
        return LlmAgent(
            name="support", model=model, instructions="Answer order questions.", tools=[lookup_order]
        )

    evaluators: list[Any] = [ExactMatch(), ToolUseTrajectory.exact()]
    if judge:
        verdict = msgspec.json.encode({"score": 0.9, "reasoning": "On topic."}).decode()
        evaluators.append(LlmJudge(lambda case: MockModel([say(verdict)]), "The answer is helpful."))
    return EvalRun(
        dataset, evaluators, agent_factory=agent_for, concurrency=concurrency, sinks=sinks, run_id="bench"
    )


def check(report: EvalReport, cases: int) -> None:
    assert [c.case.id for c in report.cases] == [f"order-{n}" for n in range(cases)], "dataset order"
    failing = [c.case.id for c in report.failures()]
    assert failing == [f"order-{cases // 2}"], failing
    assert all(c.trace is not None and len(c.trace.steps) == 3 for c in report.cases)
    counted = dict(CALLS)
    assert counted == {"model": 2 * cases, "tool": cases}, counted


def emit(metric: str, value: float, unit: str, backend: str, **extra: Any) -> None:
    record = {
        "sdk": SDK,
        "workload": WORKLOAD,
        "metric": metric,
        "value": value,
        "unit": unit,
        "backend": backend,
    }
    record.update(extra)
    print(json.dumps(record), flush=True)


def one_round(
    backend: str, build: Callable[[list[Any]], EvalRun], cases: int, out: Path | None
) -> tuple[float, EvalReport]:
    CALLS.update(model=0, tool=0)
    sinks: list[Any] = []
    if out is not None:
        sinks.append(SqliteTraceSink(out / "evals.db"))
        try:
            from helikon.evals import ParquetTraceSink

            sinks.append(ParquetTraceSink(out / "parquet"))
        except ImportError:
            print("pyarrow missing: no Parquet sink", file=sys.stderr)
    evals = build(sinks)
    started = time.perf_counter()
    report = anyio.run(evals.run, backend=backend)
    if out is not None:
        report.save(out / "saved")
    elapsed = time.perf_counter() - started
    check(report, cases)
    return elapsed, report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--judge", action="store_true", help="add an LlmJudge with a scripted judge model")
    parser.add_argument("--backend", choices=["trio", "asyncio", "both"], default="both")
    args = parser.parse_args()
    backends = ["trio", "asyncio"] if args.backend == "both" else [args.backend]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dataset_path, scripts_path = write_inputs(root, args.cases)
        dataset = EvalDataset.from_jsonl_path(dataset_path)
        scripts = ScriptFile.load(scripts_path)

        def build(sinks: list[Any]) -> EvalRun:
            return make_run(dataset, scripts, args.concurrency, args.judge, sinks)

        extra = {"cases": args.cases, "concurrency": args.concurrency, "judge": args.judge}
        one_round(backends[0], build, args.cases, None)  # warm-up: imports, compiled validators
        for backend in backends:
            runs = [one_round(backend, build, args.cases, None)[0] for _ in range(args.rounds)]
            emit("run_wall", round(statistics.median(runs), 3), "s", backend, **extra)
            emit("cases_per_s", round(args.cases / statistics.median(runs), 1), "cases/s", backend, **extra)
            outputs = []
            for n in range(args.rounds):
                out = root / f"out-{backend}-{n}"
                out.mkdir()
                outputs.append(one_round(backend, build, args.cases, out)[0])
            emit("run_and_outputs_wall", round(statistics.median(outputs), 3), "s", backend, **extra)
            tracemalloc.start()
            one_round(backend, build, args.cases, None)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            emit("peak_python_heap", round(peak / 2**20, 1), "MiB", backend, **extra)
        maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        emit("peak_rss", round(maxrss_kib / 1024, 1), "MiB", "process", **extra)


if __name__ == "__main__":
    main()
