"""Run helikon's benchmarks and the peer SDKs' in rounds; print medians and the targets.

One invocation runs ``bench/helikon_bench.py`` (W1/W2/W2i/W3 under trio and
asyncio, W4) and every installed peer script from ``shared/bench/peers``
(openai-agents, pydantic-ai, langgraph, agno and the plain-asyncio floor),
round after round, then prints two Markdown tables: the median of every
metric per SDK, and helikon's targets against the best peer.

``--workloads W1,W5`` runs only those: W1 alone (``--only W1``) and W5, one
run of each ``--w5-turns`` length (default 1,000 and 2,000): helikon through
``bench/long_run.py`` (scripted model, trio and asyncio), the peers through
their W1 with ``BENCH_T_W1`` set to that length (one run, no warm-up). The
W5 metric is the mean µs per model turn over the whole run; helikon's
late ÷ early turn ratio is printed too. ``--w5-peers`` limits which peers run
W5 (a 2,000-turn run of openai-agents or pydantic-ai, whose turn cost grows
with the run, takes many minutes).

Targets (helikon against the best peer, per backend):

- W1: µs per model turn <= 1/10 of the fastest peer's;
- W2: wall time <= 1/10 of the fastest peer's, and RSS growth (VmRSS after
  minus before) <= 1/2 of the leanest peer's;
- W3: streamed text deltas per second >= 5x the fastest peer's;
- W4: import time <= 1/3 of the fastest peer's.

Interpreters: helikon runs with this script's Python (or ``--helikon-python``);
the peers with ``$PEERS_PYTHON``, else ``~/.venv-peers/bin/python``. A peer whose
package is not installed there is skipped with a note.

Examples::

    python bench/compare.py                 # full parameters, 3 rounds
    python bench/compare.py --quick         # smoke run: small parameters, 1 round
    python bench/compare.py --json raw.json # also dump every raw result
    python bench/compare.py --workloads W1,W5   # W1 and the long runs, side by side

Instruction counts (callgrind, immune to the machine's load) side by side:
``python bench/instructions.py W1 W5 --sdks all --jobs 3 --table``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HELIKON = "helikon"
FLOOR = "floor (plain asyncio)"
BACKENDS = ("trio", "asyncio")
TIMES = "\u00d7"  # the multiplication sign, in the tables

#: Small parameters for ``--quick`` (an explicit environment variable still wins).
QUICK_ENV = {
    "BENCH_R_W1": "20",
    "BENCH_WARMUP_W1": "2",
    "BENCH_C_W2": "100",
    "BENCH_N_W3": "2000",
    "BENCH_W4_REPEATS": "2",
}


@dataclass(frozen=True)
class Peer:
    """A peer bench script and what it needs installed."""

    sdk: str  #: the ``sdk`` field its lines carry
    script: str
    module: str | None  #: the package it imports (None: stdlib only)
    dists: tuple[str, ...]  #: distributions whose versions are reported
    w4_stmt: str | None = None  #: for the floor: which W4 statement is the comparable one


PEERS = (
    Peer("openai-agents", "openai_agents_bench.py", "agents", ("openai-agents", "openai", "pydantic")),
    Peer("pydantic-ai", "pydantic_ai_bench.py", "pydantic_ai", ("pydantic-ai-slim", "pydantic")),
    Peer(
        "langgraph", "langgraph_bench.py", "langgraph", ("langgraph", "langgraph-prebuilt", "langchain-core")
    ),
    Peer("agno", "agno_bench.py", "agno", ("agno",)),
)
#: The workloads of a full run (W5 only when asked for).
DEFAULT_WORKLOADS = ("W1", "W2", "W3", "W4")
FLOOR_PEER = Peer(FLOOR, "baseline_floor.py", None, (), w4_stmt="import asyncio, json")
HELIKON_W4_STMT = "from helikon import LlmAgent, RunContext, collect, tool"


# -- running -------------------------------------------------------------------


@dataclass
class Run:
    """One script run of one round."""

    sdk: str
    round: int
    cmd: list[str]
    returncode: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str = ""
    seconds: float = 0.0


def run_script(
    sdk: str, round_no: int, cmd: list[str], env: dict[str, str], w5_turns: int | None = None
) -> Run:
    """Run one bench script; keep its JSON lines, tag them with the round.
    With ``w5_turns``, its lines are W5 lines of a run of that many turns
    (workload ``W5@<turns>``: a peer's W1 of one long run, or long_run.py)."""
    print(f"== round {round_no}: {sdk}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    run = Run(sdk, round_no, cmd, proc.returncode, seconds=time.perf_counter() - t0)
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            record = json.loads(line)
            record["round"] = round_no
            if w5_turns is not None:
                record["workload"] = f"W5@{w5_turns}"
            run.records.append(record)
    add_rss_growth(run.records)
    if proc.returncode != 0:
        run.stderr_tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        print(f"   FAILED rc={proc.returncode}\n{run.stderr_tail}", file=sys.stderr, flush=True)
    return run


def add_rss_growth(records: list[dict[str, Any]]) -> None:
    """Derive ``rss_growth_mib`` (after - before) for W2 results that lack it (the peers')."""
    by_key: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        by_key[(r["sdk"], r["workload"], r.get("backend", ""))][r["metric"]] = r
    for (sdk, workload, backend), metrics in by_key.items():
        if "rss_before_mib" in metrics and "rss_after_mib" in metrics and "rss_growth_mib" not in metrics:
            growth = metrics["rss_after_mib"]["value"] - metrics["rss_before_mib"]["value"]
            record: dict[str, Any] = {
                "sdk": sdk,
                "workload": workload,
                "metric": "rss_growth_mib",
                "value": round(growth, 1),
                "unit": "MiB",
                "derived": True,
                "round": metrics["rss_before_mib"]["round"],
            }
            if backend:
                record["backend"] = backend
            records.append(record)


def python_output(python: str, code: str) -> str | None:
    proc = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def installed_modules(python: str, modules: Sequence[str]) -> set[str]:
    code = (
        "import importlib.util\n"
        f"for m in {list(modules)!r}:\n"
        "    print(m if importlib.util.find_spec(m) else '')\n"
    )
    out = python_output(python, code)
    return set(out.split()) if out else set()


def versions(python: str, dists: Sequence[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        f"for d in {list(dists)!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    out = python_output(python, code)
    return json.loads(out) if out else {}


def find_peers_python() -> str | None:
    env = os.environ.get("PEERS_PYTHON")
    if env:
        return env if os.access(env, os.X_OK) else None
    default = Path.home() / ".venv-peers" / "bin" / "python"
    return str(default) if os.access(default, os.X_OK) else None


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{rev or 'no commit'}{' (uncommitted changes)' if dirty else ''}"


# -- aggregation -----------------------------------------------------------------

Key = tuple[str, str, str, str, str]  # sdk, workload, metric, backend, stmt
Medians = dict[Key, tuple[float, list[float], str]]  # median, samples, unit


def medians(runs: Sequence[Run]) -> Medians:
    """Median and samples of every (sdk, workload, metric, backend, stmt) across rounds."""
    samples: dict[Key, list[float]] = defaultdict(list)
    units: dict[Key, str] = {}
    for run in runs:
        for r in run.records:
            key = (r["sdk"], r["workload"], r["metric"], r.get("backend", ""), r.get("stmt", ""))
            samples[key].append(float(r["value"]))
            units[key] = r["unit"]
    return {k: (statistics.median(v), v, units[k]) for k, v in samples.items()}


@dataclass(frozen=True)
class Row:
    """A metric row of the tables."""

    label: str
    workload: str
    metric: str
    fmt: str
    lower_is_better: bool = True
    factor: float | None = None  #: the target: how many times better than the best peer
    helikon_stmt: str = ""  #: W4: which of helikon's statements
    backends: bool = True  #: helikon reports it per backend
    peer_workload: str | None = None  #: compare with the peers' values of this workload instead


ROWS = (
    Row("W1 µs per model turn", "W1", "us_per_model_turn", "{:.1f}", factor=10),
    Row("W2 wall s (C runs, T=4)", "W2", "total_wall_s", "{:.3g}", factor=10),
    Row("W2 RSS growth MiB", "W2", "rss_growth_mib", "{:.1f}", factor=2),
    Row("W2 RSS before MiB", "W2", "rss_before_mib", "{:.1f}"),
    Row("W2 RSS after MiB", "W2", "rss_after_mib", "{:.1f}"),
    Row("W2 peak RSS MiB", "W2", "peak_rss_mib", "{:.1f}"),
    Row("W3 text deltas/s", "W3", "text_deltas_per_s", "{:,.0f}", lower_is_better=False, factor=5),
    Row(
        "W4 import ms (user imports)",
        "W4",
        "import_ms_median",
        "{:.0f}",
        factor=3,
        helikon_stmt=HELIKON_W4_STMT,
        backends=False,
    ),
    Row(
        "W4 import ms (`import helikon`)",
        "W4",
        "import_ms_median",
        "{:.0f}",
        helikon_stmt="import helikon",
        backends=False,
    ),
)
#: helikon only: W2 with every run alive at once.
DIAGNOSTIC_ROWS = (
    Row("W2i wall s", "W2i", "total_wall_s", "{:.3g}"),
    Row("W2i RSS before MiB", "W2i", "rss_before_mib", "{:.1f}"),
    Row("W2i RSS after MiB", "W2i", "rss_after_mib", "{:.1f}"),
    Row("W2i RSS growth MiB", "W2i", "rss_growth_mib", "{:.1f}"),
    Row("W2i peak RSS MiB", "W2i", "peak_rss_mib", "{:.1f}"),
)
#: The targets, in the order the targets table lists them. The W2i rows hold
#: helikon's W2i against the peers' W2: in both, every run is alive at once.
TARGET_ROWS = (
    *ROWS[:3],
    Row("W2i wall s (all runs alive)", "W2i", "total_wall_s", "{:.3g}", factor=10, peer_workload="W2"),
    Row(
        "W2i RSS growth MiB (all runs alive)", "W2i", "rss_growth_mib", "{:.1f}", factor=2, peer_workload="W2"
    ),
    *(row for row in ROWS[3:] if row.factor is not None),
)


def value(med: Medians, sdk: str, row: Row, backend: str = "") -> float | None:
    """The median of ``row`` for ``sdk`` (helikon: for ``backend``), if measured."""
    if sdk == HELIKON:
        key = (sdk, row.workload, row.metric, backend if row.backends else "", row.helikon_stmt)
        hit = med.get(key)
        return hit[0] if hit else None
    wanted = (sdk, row.peer_workload or row.workload, row.metric)
    for (s, workload, metric, _backend, stmt), (m, _, _) in med.items():
        if (s, workload, metric) != wanted:
            continue
        if row.workload == "W4":
            user_imports = row.helikon_stmt == HELIKON_W4_STMT
            if sdk != FLOOR and not user_imports:
                return None  # the peers have no bare-package statement
            if sdk == FLOOR and stmt != (FLOOR_PEER.w4_stmt if user_imports else "pass"):
                continue
        return m
    return None


def advantage(row: Row, helikon: float, other: float) -> float:
    """How many times better helikon is than ``other`` (> 1: better)."""
    if row.lower_is_better:
        return other / helikon if helikon > 0 else float("inf")
    return helikon / other if other > 0 else float("inf")


def fmt(row: Row, v: float | None) -> str:
    return "n/a" if v is None else row.fmt.format(v)


def fmt_x(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3g}{TIMES}" if x < 100 else f"{x:,.0f}{TIMES}"


def helikon_columns(row: Row) -> list[tuple[str, str]]:
    """(column title, backend) pairs for helikon's values in ``row``."""
    if row.backends:
        return [(f"helikon ({b})", b) for b in BACKENDS]
    return [("helikon", "")]


def medians_table(med: Medians, peers: Sequence[str], rows: Sequence[Row]) -> list[str]:
    titles = ["helikon (trio)", "helikon (asyncio)", *peers]
    lines = ["| metric | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(titles)]
    for row in rows:
        cells = [row.label]
        if row.backends:
            cells += [fmt(row, value(med, HELIKON, row, b)) for b in BACKENDS]
        else:
            one = fmt(row, value(med, HELIKON, row))
            cells += [one, one]
        cells += [fmt(row, value(med, sdk, row)) for sdk in peers]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


@dataclass(frozen=True)
class Verdict:
    row: Row
    backend: str
    helikon: float | None
    best_sdk: str | None
    best: float | None
    adv: float | None
    floor_cost: float | None  #: helikon's cost as a multiple of the floor's

    @property
    def holds(self) -> bool | None:
        if self.adv is None or self.row.factor is None:
            return None
        return self.adv >= self.row.factor


def w5_target_rows(turns: Sequence[int]) -> list[Row]:
    """The W5 rows: mean µs per model turn over one run of each length."""
    return [
        Row(
            f"W5 µs per model turn, one {n:,}-turn run (mean)",
            f"W5@{n}",
            "us_per_model_turn",
            "{:.1f}",
        )
        for n in turns
    ]


def late_over_early_lines(med: Medians, turns: Sequence[int]) -> list[str]:
    """helikon's W5 late ÷ early turn cost, per run length and backend."""
    lines = ["| run length | " + " | ".join(f"helikon ({b})" for b in BACKENDS) + " |", "|---|" + "---:|" * 2]
    for n in turns:
        cells = []
        for b in BACKENDS:
            hit = med.get((HELIKON, f"W5@{n}", "late_over_early", b, ""))
            cells.append("n/a" if hit is None else f"{hit[0]:.2f}{TIMES}")
        lines.append(f"| {n:,} turns | " + " | ".join(cells) + " |")
    return lines


def verdicts(med: Medians, peers: Sequence[str], w5_rows: Sequence[Row] = ()) -> list[Verdict]:
    out = []
    real_peers = [p for p in peers if p != FLOOR]
    for row in (*TARGET_ROWS, *w5_rows):
        if row.factor is None and row not in w5_rows:
            continue
        if all(value(med, HELIKON, row, b) is None for _t, b in helikon_columns(row)):
            continue  # a workload this invocation did not run
        candidates = [(p, v) for p in real_peers if (v := value(med, p, row)) is not None]
        best_sdk, best = (None, None)
        if candidates:
            pick: Callable[..., tuple[str, float]] = min if row.lower_is_better else max
            best_sdk, best = pick(candidates, key=lambda c: c[1])
        floor = value(med, FLOOR, row)
        for _title, backend in helikon_columns(row):
            h = value(med, HELIKON, row, backend)
            adv = advantage(row, h, best) if h is not None and best is not None else None
            floor_cost = 1 / advantage(row, h, floor) if h is not None and floor else None
            out.append(Verdict(row, backend or "-", h, best_sdk, best, adv, floor_cost))
    return out


def targets_table(vs: Sequence[Verdict]) -> list[str]:
    lines = [
        "| target | backend | helikon | best peer | best peer's value | helikon is better by | needed "
        "| holds | helikon / floor |",
        "|---|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for v in vs:
        holds = {True: "yes", False: "**NO**", None: "n/a"}[v.holds]
        needed = f"≥{v.row.factor:g}{TIMES}" if v.row.factor is not None else "-"
        lines.append(
            f"| {v.row.label} | {v.backend} | {fmt(v.row, v.helikon)} | {v.best_sdk or 'n/a'} "
            f"| {fmt(v.row, v.best)} | {fmt_x(v.adv)} | {needed} | {holds} "
            f"| {fmt_x(v.floor_cost)} |"
        )
    return lines


def spread_lines(med: Medians) -> list[str]:
    """The largest deviation from the median per SDK (as the peers' README reports)."""
    worst: dict[str, float] = defaultdict(float)
    for (sdk, _w, metric, _b, _s), (m, samples, _u) in med.items():
        if (
            m
            and len(samples) > 1
            and metric in ("us_per_model_turn", "total_wall_s", "text_deltas_per_s", "import_ms_median")
        ):
            worst[sdk] = max(worst[sdk], max(abs(s - m) / abs(m) for s in samples))
    if not worst:
        return ["- one round only: no spread"]
    return [
        f"- {sdk}: every timing sample within {100 * w:.1f}% of its median"
        for sdk, w in sorted(worst.items())
    ]


# -- main ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=None, help="rounds to run (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="smoke run: small parameters")
    parser.add_argument(
        "--json", metavar="PATH", help="write every raw result and the medians to PATH ('-': stdout)"
    )
    parser.add_argument(
        "--peers",
        default="all",
        help="comma-separated peers (openai-agents,pydantic-ai,langgraph,agno,floor), or 'none'",
    )
    parser.add_argument(
        "--workloads",
        default=",".join(DEFAULT_WORKLOADS),
        help="comma-separated: W1,W2,W3,W4 (the default: every script's full run) and/or W5; "
        "W1 and W5 alone run only those",
    )
    parser.add_argument("--w5-turns", default="1000,2000", help="W5 run lengths (BENCH_T_W1 for the peers)")
    parser.add_argument("--w5-peers", default="all", help="the peers that run W5 (default: all selected)")
    parser.add_argument(
        "--peers-dir",
        default=os.environ.get("PEERS_DIR", str(ROOT.parent / "shared/bench/peers")),
        help="where the peer scripts live (default: ../shared/bench/peers, or $PEERS_DIR)",
    )
    parser.add_argument(
        "--helikon-python",
        default=sys.executable,
        help="the Python that has helikon installed (default: this one)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)

    env = os.environ.copy()
    if args.quick:
        for k, v in QUICK_ENV.items():
            env.setdefault(k, v)
    notes: list[str] = []

    wanted = {p.strip() for p in args.peers.split(",")} if args.peers not in ("all", "none") else set()
    selected = [
        p
        for p in (*PEERS, FLOOR_PEER)
        if args.peers == "all"
        or (args.peers != "none" and (p.sdk in wanted or (p is FLOOR_PEER and "floor" in wanted)))
    ]
    peers_python = find_peers_python()
    peers_dir = Path(args.peers_dir)
    runnable: list[tuple[Peer, str]] = []
    if selected and not peers_dir.is_dir():
        notes.append(f"peer scripts not found in {peers_dir}: every peer skipped")
        selected = []
    if selected and peers_python is None:
        notes.append(
            "no peers venv ($PEERS_PYTHON or ~/.venv-peers/bin/python): SDK peers skipped; "
            "the floor runs with helikon's Python"
        )
    have = installed_modules(peers_python, [p.module for p in PEERS if p.module]) if peers_python else set()
    for peer in selected:
        if peer.module is None:
            runnable.append((peer, peers_python or args.helikon_python))
        elif peer.module in have:
            runnable.append((peer, peers_python or ""))
        elif peers_python is not None:
            notes.append(f"{peer.sdk}: package `{peer.module}` not installed in {peers_python}: skipped")

    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in (*DEFAULT_WORKLOADS, "W5")]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}")
    full = any(w in workloads for w in ("W2", "W3", "W4"))
    w5_turns = [int(n) for n in args.w5_turns.split(",") if n.strip()] if "W5" in workloads else []
    w5_wanted = {p.strip() for p in args.w5_peers.split(",")}
    w5_peers = [
        (p, py)
        for p, py in runnable
        if args.w5_peers == "all" or p.sdk in w5_wanted or (p is FLOOR_PEER and "floor" in w5_wanted)
    ]

    runs: list[Run] = []
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    for round_no in range(1, rounds + 1):
        if full or "W1" in workloads:
            only = [] if full else ["--only", "W1"]
            helikon_cmd = [args.helikon_python, str(HERE / "helikon_bench.py"), *only]
            runs.append(run_script(HELIKON, round_no, helikon_cmd, env))
            for peer, python in runnable:
                runs.append(
                    run_script(peer.sdk, round_no, [python, str(peers_dir / peer.script), *only], env)
                )
        for n in w5_turns:
            for backend in BACKENDS:
                cmd = [
                    args.helikon_python,
                    str(HERE / "long_run.py"),
                    "--turns",
                    str(n),
                    "--model",
                    "scripted",
                ]
                runs.append(run_script(HELIKON, round_no, [*cmd, "--backend", backend], env, n))
            w5_env = {**env, "BENCH_T_W1": str(n), "BENCH_R_W1": "1", "BENCH_WARMUP_W1": "0"}
            for peer, python in w5_peers:
                cmd = [python, str(peers_dir / peer.script), "--only", "W1"]
                runs.append(run_script(peer.sdk, round_no, cmd, w5_env, n))
    total_s = time.perf_counter() - t0
    load_after = os.getloadavg()

    med = medians(runs)
    peer_names = [p.sdk for p, _ in runnable]
    failures = [r for r in runs if r.returncode != 0]
    for r in failures:
        last = r.stderr_tail.splitlines()[-1] if r.stderr_tail else ""
        notes.append(f"FAILED: {r.sdk} round {r.round} (rc={r.returncode}): {last}")
    for r in runs:
        for rec in r.records:
            if rec.get("net_attempts"):
                notes.append(f"network attempts recorded: {rec}")

    params = ", ".join(f"{k}={env[k]}" for k in sorted(env) if k.startswith("BENCH_")) or "defaults"
    if w5_turns:
        params += (
            f"; W5: one run of {', '.join(map(str, w5_turns))} turns (peers: BENCH_T_W1, R=1, no warm-up)"
        )
    helikon_py = python_output(args.helikon_python, "import sys; print(sys.version.split()[0])")
    helikon_version = python_output(args.helikon_python, "import helikon; print(helikon.__version__)") or "?"
    info = [
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- rounds: {rounds}{' (quick parameters)' if args.quick else ''}; total {total_s:.0f} s; "
        f"load average (1/5/15 min) before {fmt_load(load_before)}, after {fmt_load(load_after)}",
        f"- parameter overrides: {params}",
        f"- helikon {helikon_version} (git {git_revision()}), Python {helikon_py} ({args.helikon_python})",
    ]
    if peers_python:
        vers = versions(peers_python, [d for p, _ in runnable for d in p.dists])
        pyver = python_output(peers_python, "import sys; print(sys.version.split()[0])")
        info.append(
            f"- peers: Python {pyver} ({peers_python}); " + ", ".join(f"{k} {v}" for k, v in vers.items())
        )

    w5_rows = w5_target_rows(w5_turns)
    vs = verdicts(med, peer_names, w5_rows)
    shown = [row for row in ROWS if full or row.workload in workloads]
    out = [
        "## Environment",
        "",
        *info,
        "",
        "## Medians",
        "",
        *medians_table(med, peer_names, [*shown, *w5_rows]),
        "",
    ]
    if full:
        out += [
            "W2i (helikon only): W2 with one scheduler checkpoint per model call, so all C runs are alive "
            "at once, as the peers' runs are in W2 (helikon's W2 runs, like the floor's, finish one by one).",
            "",
            *medians_table(med, [], DIAGNOSTIC_ROWS),
            "",
        ]
    if w5_turns:
        out += [
            "W5, helikon: a turn late in the run (the last 200) ÷ an early one (turns 21-220):",
            "",
            *late_over_early_lines(med, w5_turns),
            "",
        ]
    out += [
        "## Targets (helikon against the best peer)",
        "",
        *targets_table(vs),
        "",
        "## Spread",
        "",
        *spread_lines(med),
    ]
    if notes:
        out += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    print("\n".join(out))

    if args.json:
        dump = {
            "info": info,
            "notes": notes,
            "runs": [r.__dict__ for r in runs],
            "medians": [
                {
                    "sdk": k[0],
                    "workload": k[1],
                    "metric": k[2],
                    "backend": k[3],
                    "stmt": k[4],
                    "median": m,
                    "samples": s,
                    "unit": u,
                }
                for k, (m, s, u) in sorted(med.items())
            ],
            "targets": [
                {
                    "target": v.row.label,
                    "backend": v.backend,
                    "helikon": v.helikon,
                    "best_peer": v.best_sdk,
                    "best_peer_value": v.best,
                    "advantage": v.adv,
                    "needed": v.row.factor,
                    "holds": v.holds,
                    "floor_cost": v.floor_cost,
                }
                for v in vs
            ],
        }
        text = json.dumps(dump, indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    helikon_ran = any(r.sdk == HELIKON and r.records for r in runs)
    helikon_ok = helikon_ran and not any(r.sdk == HELIKON for r in failures)
    return 0 if helikon_ok else 1


if __name__ == "__main__":
    sys.exit(main())
