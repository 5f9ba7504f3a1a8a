"""CPU instructions per model turn, counted by callgrind (immune to machine load).

Each measurement runs a target twice under ``valgrind --tool=callgrind``, at
two sizes, and divides the difference of the two instruction counts by the
turns the larger size adds: start-up, imports and the first-call caches
cancel out.

- ``W1``: 3 and 23 runs of the 10-turn W1 loop (scripted model), per turn;
- ``W5``: one run of 20 and of 220 turns (the early turns) and of N and N+200
  turns (the late turns), per turn; ``late_over_early`` is the ratio. helikon
  runs with the scripted model (framework only) and, with ``--model``, with
  ``MockModel``.

helikon's target is ``bench/long_run.py --icount``. With ``--sdks`` the peers
of ``../shared/bench/peers`` are counted the same way, side by side, through
their own scripts (``X_bench.py --only W1``, run length and count set by
``BENCH_T_W1``/``BENCH_R_W1``/``BENCH_WARMUP_W1``): W1 with ``BENCH_R_W1`` 3
and 23 (T=10, their 5 warm-up runs in both); W5 as one run (R=1, no warm-up)
of ``BENCH_T_W1`` 20 and 220 turns, and of N and N+200 turns for the peers in
``--long-peers`` (default agno, the leanest, and the floor: a late turn of the
others costs tens of millions of instructions, hours under callgrind).

Usage::

    python bench/instructions.py W1 W5                       # helikon only
    python bench/instructions.py W1 W5 --sdks all --jobs 3 --table   # side by side (~40 min)

One JSON line per metric on stdout; ``--table`` then prints a Markdown table
with helikon's ratio to each peer. Slow (callgrind runs Python ~50x slower).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "long_run.py")
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
#: Turns a W5 measurement adds: wide enough that a full collection of the
#: cyclic GC (millions of instructions, every few hundred turns) is spread
#: over it rather than landing in one narrow window or the other.
WINDOW = 200
#: The early W5 window: turns 21..220 of one run.
EARLY = 20
HELIKON = "helikon"
FLOOR = "floor"
#: Peer name -> its script in the peers' directory.
PEER_SCRIPTS = {
    "agno": "agno_bench.py",
    "langgraph": "langgraph_bench.py",
    "pydantic-ai": "pydantic_ai_bench.py",
    "openai-agents": "openai_agents_bench.py",
    FLOOR: "baseline_floor.py",
}
ALL = (HELIKON, *PEER_SCRIPTS)


def peers_python() -> str:
    found = os.environ.get("PEERS_PYTHON")
    return found or str(Path.home() / ".venv-peers" / "bin" / "python")


def peers_dir() -> str:
    return os.environ.get("PEERS_DIR") or str(Path(HERE).parent.parent / "shared" / "bench" / "peers")


def count(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> int:
    """Instructions executed by one process (callgrind's total)."""
    with tempfile.TemporaryDirectory() as tmp:
        full = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={os.path.join(tmp, 'out')}", *cmd]
        # The same hashing in every run.
        run_env = {**os.environ, **(env or {}), "PYTHONHASHSEED": "0"}
        proc = subprocess.run(full, capture_output=True, text=True, check=False, env=run_env, cwd=cwd)
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({' '.join(full)}):\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def instructions(workload: str, size: int, model: str = "scripted") -> int:
    """Instructions of one helikon target process (``long_run.py --icount``)."""
    return count([sys.executable, TARGET, "--icount", workload, str(size), "--model", model])


def peer_instructions(sdk: str, workload: str, size: int) -> int:
    """Instructions of one peer process: W1 with ``size`` runs of 10 turns
    (after its 5 warm-ups), W5 one run of ``size`` turns."""
    if workload == "W1":
        env = {"BENCH_T_W1": "10", "BENCH_R_W1": str(size), "BENCH_WARMUP_W1": "5"}
    else:
        env = {"BENCH_T_W1": str(size), "BENCH_R_W1": "1", "BENCH_WARMUP_W1": "0"}
    where = peers_dir()
    return count([peers_python(), PEER_SCRIPTS[sdk], "--only", "W1"], env, cwd=where)


def emit(
    sdk: str, workload: str, metric: str, value: float, unit: str = "instructions", **extra: object
) -> None:
    line = {"sdk": sdk, "workload": workload, "metric": metric, "value": value, "unit": unit}
    print(json.dumps({**line, **extra}), flush=True)


#: One measurement: (sdk, workload, model, small, large, turns per unit).
Job = tuple[str, str, str, int, int, int]


def plan(args: argparse.Namespace) -> list[Job]:
    sdks = list(ALL) if args.sdks == "all" else [s.strip() for s in args.sdks.split(",") if s.strip()]
    unknown = [s for s in sdks if s not in ALL]
    if unknown:
        raise SystemExit(f"unknown sdk(s) {unknown}; known: {', '.join(ALL)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    long_peers = {s.strip() for s in args.long_peers.split(",")}
    jobs: list[Job] = []
    for sdk in sdks:
        models = args.model.split(",") if sdk == HELIKON else ["scripted"]
        if "W1" in args.workloads:
            jobs.append((sdk, "W1", "scripted", 3, 23, 10))
        if "W5" in args.workloads:
            for model in models:
                jobs.append((sdk, "W5", model, EARLY, EARLY + WINDOW, 1))
                if sdk == HELIKON or sdk in long_peers:
                    jobs.extend((sdk, "W5", model, size, size + WINDOW, 1) for size in sizes)
    return jobs


def run_jobs(jobs: list[Job], workers: int) -> dict[Job, float]:
    """Every process of every job (largest first, ``workers`` at a time);
    the per-turn figure of each job."""
    calls: list[tuple[Job, int, Callable[[], int]]] = []
    for job in jobs:
        sdk, workload, model, small, large, _ = job
        for size in (small, large):
            if sdk == HELIKON:
                calls.append((job, size, lambda w=workload, s=size, m=model: instructions(w, s, m)))
            else:
                calls.append((job, size, lambda d=sdk, w=workload, s=size: peer_instructions(d, w, s)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [(job, size, pool.submit(call)) for job, size, call in calls]
        counts: dict[tuple[Job, int], int] = {}
        for job, size, future in futures:
            counts[(job, size)] = future.result()
            print(
                f"   {job[0]} {job[1]} {job[2]} size {size}: {counts[(job, size)]:,}",
                file=sys.stderr,
                flush=True,
            )
    out: dict[Job, float] = {}
    for job in jobs:
        sdk, workload, model, small, large, unit = job
        out[job] = (counts[(job, large)] - counts[(job, small)]) / ((large - small) * unit)
    return out


def report(results: dict[Job, float]) -> None:
    early: dict[tuple[str, str], float] = {}
    for (sdk, workload, model, small, large, _), value in results.items():
        if workload == "W1":
            emit(sdk, "W1", "instructions_per_model_turn", round(value), runs=f"{small}->{large}", turns=10)
            continue
        emit(sdk, "W5", "instructions_per_turn", round(value), model=model, turns=f"{small}->{large}")
        if small == EARLY:
            early[(sdk, model)] = value
    for (sdk, workload, model, small, _, _), value in results.items():
        first = early.get((sdk, model))
        if workload == "W5" and small != EARLY and first:
            emit(sdk, "W5", "late_over_early", round(value / first, 3), "x", model=model, turns=small)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    return f"{value / 1e3:.0f} k"


def table(results: dict[Job, float]) -> str:
    """Markdown: instructions per model turn, one column per SDK, and
    helikon's ratio to each (scripted model only)."""
    sdks = list(dict.fromkeys(job[0] for job in results))
    rows: dict[str, dict[str, float]] = {}
    labels: list[str] = []
    for (sdk, workload, model, small, large, _), value in results.items():
        if model != "scripted":
            continue
        if workload == "W1":
            label = "W1: 10-turn runs (3 -> 23 runs)"
        elif small == EARLY:
            label = f"W5: turns {small + 1}-{large} of one run"
        else:
            label = f"W5: turns {small + 1}-{large} of one run (late)"
        rows.setdefault(label, {})[sdk] = value
        if label not in labels:
            labels.append(label)
    head = ["instructions per model turn", *sdks]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * len(sdks) + "|"]
    for label in labels:
        lines.append("| " + " | ".join([label, *(_fmt(rows[label].get(s)) for s in sdks)]) + " |")
    if HELIKON in sdks:
        for label in labels:
            mine = rows[label].get(HELIKON)
            ratios = [
                ""
                if s == HELIKON or mine is None or not rows[label].get(s)
                else f"{mine / rows[label][s]:.3g}x"
                for s in sdks
            ]
            lines.append("| " + " | ".join([f"helikon ÷ SDK, {label}", *ratios]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["W1", "W5"])
    parser.add_argument("--sizes", default="1000,2000", help="W5 run lengths for the late turns")
    parser.add_argument("--model", default="scripted,mock", help="helikon's W5 models")
    parser.add_argument("--sdks", default=HELIKON, help=f"'all' or some of {','.join(ALL)}")
    parser.add_argument(
        "--long-peers", default=f"agno,{FLOOR}", help="peers whose late W5 turns are counted too"
    )
    parser.add_argument("--jobs", type=int, default=1, help="callgrind processes at a time")
    parser.add_argument("--table", action="store_true", help="print a Markdown table at the end")
    args = parser.parse_args()
    results = run_jobs(plan(args), args.jobs)
    report(results)
    if args.table:
        print(table(results), flush=True)


if __name__ == "__main__":
    main()
