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
    python bench/instructions.py W1 W5 --sdks all --jobs 4 --table \\
        --cache bench/results/icount-2026-12-05.json   # side by side: ~100 G instructions

With ``--cache`` every count is kept as it is taken (helikon's keyed by its
package's git tree), so an interrupted run resumes, and ``--cached-only`` reports what
is there; after a change to helikon only its counts are taken again.

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
from concurrent.futures import ThreadPoolExecutor, as_completed
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
    """The measurements, in the order they run: W1 for every SDK, then the
    early W5 window for every SDK, then the late windows size by size."""
    sdks = list(ALL) if args.sdks == "all" else [s.strip() for s in args.sdks.split(",") if s.strip()]
    unknown = [s for s in sdks if s not in ALL]
    if unknown:
        raise SystemExit(f"unknown sdk(s) {unknown}; known: {', '.join(ALL)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    long_peers = {s.strip() for s in args.long_peers.split(",")}
    models = {sdk: args.model.split(",") if sdk == HELIKON else ["scripted"] for sdk in sdks}
    jobs: list[Job] = []
    if "W1" in args.workloads:
        jobs.extend((sdk, "W1", "scripted", 3, 23, 10) for sdk in sdks)
    if "W5" in args.workloads:
        jobs.extend((sdk, "W5", m, EARLY, EARLY + WINDOW, 1) for sdk in sdks for m in models[sdk])
        for size in sizes:
            jobs.extend(
                (sdk, "W5", m, size, size + WINDOW, 1)
                for sdk in sdks
                if sdk == HELIKON or sdk in long_peers
                for m in models[sdk]
            )
    return jobs


def _revision() -> str:
    """The git tree of the ``helikon`` package (a cached helikon count is
    valid for that code only), ``+dirty`` with uncommitted changes in it."""
    tree = subprocess.run(
        ["git", "-C", HERE, "rev-parse", "--short", "HEAD:helikon"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no", "--", "../helikon"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (tree or "unknown") + ("+dirty" if dirty else "")


class Cache:
    """Counts already taken (a JSON file): callgrind counts are deterministic
    (fixed hash seed), so an interrupted comparison resumes where it stopped.
    helikon's counts are keyed by the git tree of its package, the peers' by
    name (delete the file when the peers' venv changes)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.counts: dict[str, int] = {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.counts = json.load(f)
        self.revision = _revision()

    def key(self, job: Job, size: int) -> str:
        sdk, workload, model = job[:3]
        who = f"{HELIKON}@{self.revision}" if sdk == HELIKON else sdk
        return f"{who}|{workload}|{model}|{size}"

    def store(self, key: str, value: int) -> None:
        self.counts[key] = value
        if self.path:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.counts, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)


def run_jobs(jobs: list[Job], workers: int, cache: Cache, run: bool = True) -> dict[Job, float]:
    """Every process of every job not in the cache (``workers`` at a time,
    in plan order); the per-turn figure of each job whose two counts are known."""
    calls: dict[str, Callable[[], int]] = {}
    for job in jobs:
        sdk, workload, model, small, large, _ = job
        for size in (small, large):
            key = cache.key(job, size)
            if key in cache.counts or key in calls:
                continue
            if sdk == HELIKON:
                calls[key] = lambda w=workload, s=size, m=model: instructions(w, s, m)
            else:
                calls[key] = lambda d=sdk, w=workload, s=size: peer_instructions(d, w, s)
    if run and calls:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(call): key for key, call in calls.items()}
            for future in as_completed(futures):
                key = futures[future]
                cache.store(key, future.result())
                print(f"   {key}: {cache.counts[key]:,}", file=sys.stderr, flush=True)
    out: dict[Job, float] = {}
    for job in jobs:
        sdk, workload, model, small, large, unit = job
        low, high = cache.counts.get(cache.key(job, small)), cache.counts.get(cache.key(job, large))
        if low is not None and high is not None:
            out[job] = (high - low) / ((large - small) * unit)
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


def table(results: dict[Job, float], sdks: list[str] | None = None) -> str:
    """Markdown: instructions per model turn, one column per SDK, and
    helikon's ratio to each (scripted model only)."""
    sdks = sdks or list(dict.fromkeys(job[0] for job in results))
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
    early = next((label for label in labels if label.startswith("W5") and "late" not in label), None)
    for label in labels:
        if early is None or "late" not in label:
            continue
        cells = [
            f"{rows[label][s] / rows[early][s]:.2f}x" if rows[label].get(s) and rows[early].get(s) else "-"
            for s in sdks
        ]
        lines.append("| " + " | ".join([f"late ÷ early ({label.split(' of ')[0]})", *cells]) + " |")
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
    parser.add_argument("--cache", help="a JSON file of the counts taken: reused, and resumed from")
    parser.add_argument("--cached-only", action="store_true", help="run nothing: report what the cache holds")
    args = parser.parse_args()
    jobs = plan(args)
    results = run_jobs(jobs, args.jobs, Cache(args.cache), run=not args.cached_only)
    report(results)
    if args.table:
        print(table(results, list(dict.fromkeys(job[0] for job in jobs))), flush=True)


if __name__ == "__main__":
    main()
