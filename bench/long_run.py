"""W5: one long run. Does a turn late in the run cost what a turn early in it costs?

One agent with the W1 tool ``add(a, b)``; the model calls it on turns 1..N-1
and says "done" on turn N, all in one run. Two models:

- ``scripted``: the W1 model, which reads only the last message (framework
  only: what the loop, the state and the interpreter cost as the run grows);
- ``mock``: :class:`helikon.testing.MockModel` with N scripts (what a test of
  a long run pays, its script position included).

Wall clock (``python bench/long_run.py [--turns 1000,2000] [--model scripted,mock]``):
the tool stamps ``perf_counter`` at every call, so turn k costs the time
between stamps k-1 and k. The early window is turns 21..220, the late window
the last 200 turns; each is a mean (a collector pause counts where it falls).
Two JSON lines per run: ``late_over_early`` (with ``early_us`` and
``late_us``) and ``us_per_model_turn``, the mean over the whole run (the
peers' W1 metric for one run of ``BENCH_T_W1`` turns).

Instructions (``--icount``): the ``W1``/``W5`` targets of
``bench/instructions.py``, one run size per process, nothing printed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import argparse
import itertools
import time
from typing import Any

import _common as C  # first: telemetry env and network guard before any SDK import

from helikon import LlmAgent, RunConfig, collect, tool
from helikon.testing import MockModel, call_tools, say

SDK = "helikon"
STAMPS: list[float] = []
#: The early window starts after this many turns (imports, first-call caches).
SKIP = 20
WINDOW = 200


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    STAMPS.append(time.perf_counter())
    return a + b


def make_model(kind: str, turns: int) -> Any:
    if kind == "scripted":
        import helikon_bench as B

        return B.ScriptedModel(turns)
    scripts = [call_tools(("add", {"a": 1, "b": 2})) for _ in range(turns - 1)]
    return MockModel([*scripts, say("done")])


def make_agent(model: Any, turns: int) -> LlmAgent[Any]:
    return LlmAgent(
        name="bench",
        model=model,
        instructions="You are a benchmark agent.",
        tools=[add],
        config=RunConfig(max_turns=turns + 5),
    )


def one_run(kind: str, turns: int, backend: str = "trio") -> Any:
    """One run of ``turns`` turns (checked), returning its result."""
    import helikon_bench as B

    agent = make_agent(make_model(kind, turns), turns)

    async def go() -> Any:
        return await collect(agent.run(None, "add things"))

    result = B.run_loop(backend, go)
    C.check(result.final_output == "done", f"final output {result.final_output!r}")
    return result


def timed(kind: str, turns: int, backend: str) -> None:
    STAMPS.clear()
    t0 = time.perf_counter()
    one_run(kind, turns, backend)
    wall = time.perf_counter() - t0
    C.check(len(STAMPS) == turns - 1, f"{len(STAMPS)} tool calls for {turns} turns")
    costs = [b - a for a, b in itertools.pairwise(STAMPS)]
    early = sum(costs[SKIP : SKIP + WINDOW]) / WINDOW
    late = sum(costs[-WINDOW:]) / WINDOW
    C.emit(
        SDK,
        "W5",
        "late_over_early",
        round(late / early, 3),
        "x",
        backend=backend,
        model=kind,
        turns=turns,
        early_us=round(early * 1e6, 1),
        late_us=round(late * 1e6, 1),
        wall_s=round(wall, 3),
    )
    # The mean over the whole run, as the peers' W1 reports it for a run of
    # BENCH_T_W1 turns (compare.py puts the two side by side).
    C.emit(
        SDK,
        "W5",
        "us_per_model_turn",
        round(wall / turns * 1e6, 2),
        "us",
        backend=backend,
        model=kind,
        turns=turns,
        wall_s=round(wall, 3),
    )


def icount(workload: str, size: int, kind: str) -> None:
    """The ``bench/instructions.py`` targets: W1 runs ``size`` runs of 10
    turns after one warm-up; W5 one run of ``size`` turns."""
    if workload == "W1":
        import helikon_bench as B

        turns = 10
        agent = B.make_agent(B.ScriptedModel(turns), turns)

        async def go() -> None:
            for _ in range(size + 1):
                B.check_tool_loop(await collect(agent.run(None, "add things")), turns)

        B.run_loop("trio", go)
        return
    one_run(kind, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1000,2000")
    parser.add_argument("--model", default="scripted,mock")
    parser.add_argument("--backend", default="trio", choices=["trio", "asyncio"])
    parser.add_argument("--icount", nargs=2, metavar=("WORKLOAD", "SIZE"))
    args = parser.parse_args()
    if args.icount:
        icount(args.icount[0], int(args.icount[1]), args.model.split(",")[0])
        return
    for kind in args.model.split(","):
        for turns in (int(t) for t in args.turns.split(",")):
            timed(kind, turns, args.backend)


if __name__ == "__main__":
    main()
