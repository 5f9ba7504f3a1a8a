"""CPU instructions per model turn, counted by callgrind (immune to machine load).

Each measurement runs a target of ``bench/long_run.py`` twice under
``valgrind --tool=callgrind``, at two sizes, and divides the difference of
the two instruction counts by the turns the larger size adds: start-up,
imports and the first-call caches cancel out.

- ``W1``: 3 and 23 runs of the 10-turn W1 loop (scripted model), per turn;
- ``W5``: one run of 20 and of 220 turns (the early turns) and of N and N+200
  turns (the late turns, N = 1000 and 2000), per turn, with the scripted
  model (framework only) and with ``MockModel``; ``late_over_early`` is the
  ratio.

Usage: ``python bench/instructions.py [W1] [W5] [--sizes 1000,2000] [--model scripted,mock]``;
one JSON line per metric on stdout. Slow (callgrind runs Python ~50x slower):
about a minute for W1, several for W5.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "long_run.py")
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
#: Turns a W5 measurement adds: wide enough that a full collection of the
#: cyclic GC (millions of instructions, every few hundred turns) is spread
#: over it rather than landing in one narrow window or the other.
WINDOW = 200


def instructions(workload: str, size: int, model: str = "scripted") -> int:
    """Instructions executed by one target process (callgrind's total)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={os.path.join(tmp, 'out')}",
            sys.executable,
            TARGET,
            "--icount",
            workload,
            str(size),
            "--model",
            model,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same hashing in every run
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({' '.join(cmd)}):\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_turn(workload: str, small: int, large: int, turns_per_unit: int, model: str = "scripted") -> float:
    low = instructions(workload, small, model)
    high = instructions(workload, large, model)
    return (high - low) / ((large - small) * turns_per_unit)


def emit(workload: str, metric: str, value: float, unit: str = "instructions", **extra: object) -> None:
    line = {"sdk": "helikon", "workload": workload, "metric": metric, "value": value, "unit": unit}
    print(json.dumps({**line, **extra}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["W1", "W5"])
    parser.add_argument("--sizes", default="1000,2000", help="W5 run lengths for the late turns")
    parser.add_argument("--model", default="scripted,mock", help="W5 models")
    args = parser.parse_args()
    if "W1" in args.workloads:
        emit("W1", "instructions_per_model_turn", round(per_turn("W1", 3, 23, 10)), runs="3->23", turns=10)
    if "W5" in args.workloads:
        for model in args.model.split(","):
            early = per_turn("W5", 20, 20 + WINDOW, 1, model)
            emit("W5", "instructions_per_turn", round(early), model=model, turns=f"20->{20 + WINDOW}")
            for size in (int(s) for s in args.sizes.split(",")):
                late = per_turn("W5", size, size + WINDOW, 1, model)
                turns = f"{size}->{size + WINDOW}"
                emit("W5", "instructions_per_turn", round(late), model=model, turns=turns)
                emit("W5", "late_over_early", round(late / early, 3), "x", model=model, turns=size)


if __name__ == "__main__":
    main()
