"""The pure machine of a W1 turn: ``transition`` replaying one recorded W1 run.

Usage: ``python bench/machine_alone.py N`` records one 10-turn W1 run (the
results the live interpreter fed the machine), then feeds the same results to
``transition`` N times from the run's first state: no interpreter, no model,
no tool. Under callgrind, the difference between N=25 and N=5, divided by the
200 turns it adds, is the machine's instructions per model turn::

    for n in 5 25; do valgrind --tool=callgrind python bench/machine_alone.py $n; done
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

os.environ.update(BENCH_T_W1="10", BENCH_R_W1="1", BENCH_WARMUP_W1="0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helikon_bench as B

import helikon.interpreters._machine as M
from helikon.loop._table import transition

recorded: list[tuple[object, object, object]] = []
_transition = M.transition


def _spy(state, result, spec):  # type: ignore[no-untyped-def]
    recorded.append((state, result, spec))
    return _transition(state, result, spec)


def main() -> None:
    M.transition = _spy  # type: ignore[assignment]
    with contextlib.redirect_stdout(io.StringIO()):
        B.w1("trio")
    M.transition = _transition
    first, spec = recorded[0][0], recorded[0][2]
    results = [result for (_state, result, _spec) in recorded]
    assert len(results) == 19, len(results)  # 10 model turns, 9 tool rounds
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        state = first
        for result in results:
            state = transition(state, result, spec).unwrap().state  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
