"""Replay speed: effects per second when replaying a 1,000-step trace.

Records one run of an agent that makes 500 tool rounds (500 model calls and
500 tool executions: 1,000 effects), with the scripted model of the other
workloads, through ``RecordingInterpreter``; then replays the trace with
``ReplayInterpreter`` (no IO: every result comes from the recording) several
times and reports the median rate, for a strict and a loose replay. The
target (issue 4) is >= 20,000 effects per second.

``--load`` measures what issue 29 asks for instead: a strict replay of the
run *with loading its trace file included* (bytes -> ``Trace.from_bytes`` ->
``ReplayInterpreter``), for the issue's 450-round run (``--steps 901``); it
reports the median of the load, of the replay loop and of both, in effects
per second, as CPU time (``time.process_time``: the shared machine's load
average is several times its core count, so wall time mostly measures the
neighbours) and as wall time, with the trace's size.

Usage: ``python bench/replay_bench.py [--steps N] [--repeats R] [--load]``;
prints JSON lines like the other bench scripts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # first: telemetry env and network guard
import trio

from helikon import LlmAgent, RunConfig, Trace, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.items import ToolResult
from helikon.model import Finish, FinishReason, ModelCapabilities, ModelRequest, TextChunk, ToolCallChunk


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


class Rounds:
    """Asks for one ``add`` per call for ``rounds`` calls, then answers."""

    capabilities = ModelCapabilities(streaming=True, tools=True)
    provider = "bench"
    model_id = "rounds"

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def invoke(self, request: ModelRequest, cancel: object):  # type: ignore[no-untyped-def]
        last = request.messages[-1]
        k = int(last.call_id.split("_")[1]) if type(last) is ToolResult else 0
        return self._stream(k)

    async def _stream(self, k: int):  # type: ignore[no-untyped-def]
        if k < self.rounds:
            yield ToolCallChunk(0, f"call_{k + 1}", "add", '{"a": 1, "b": 2}')
            yield Finish(FinishReason.TOOL_CALLS)
        else:
            yield TextChunk("done")
            yield Finish(FinishReason.STOP)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--load", action="store_true", help="include loading the trace file (issue 29)")
    args = parser.parse_args()
    rounds = args.steps // 2
    agent = LlmAgent(
        name="replayer",
        model=Rounds(rounds),
        tools=[add],
        config=RunConfig(max_turns=rounds + 1),
        instructions="You add numbers. Always use the add tool, one call per turn.",
    )

    recorder = RecordingInterpreter(LiveInterpreter("bench"))

    async def record() -> None:
        async for _ in agent.run(None, "go", interpreter=recorder):
            pass

    trio.run(record)
    data = recorder.trace.to_bytes()
    trace = Trace.from_bytes(data)
    steps = len(trace.steps)
    C.check(steps >= args.steps, f"{steps} steps recorded")
    if args.load:
        loaded_replay(agent, data, steps, args.repeats)
        return

    for strict in (True, False):
        rates = []
        for _ in range(args.repeats):

            async def replay(strict: bool = strict) -> int:
                count = 0
                async for _ in agent.run(None, "go", interpreter=ReplayInterpreter(trace, strict=strict)):
                    count += 1
                return count

            t0 = time.perf_counter()
            events = trio.run(replay)
            elapsed = time.perf_counter() - t0
            C.check(events == len(trace.events), "replayed every recorded event")
            rates.append(steps / elapsed)
        C.emit(
            "helikon",
            "replay",
            "effects_per_s",
            round(statistics.median(rates)),
            "effects/s",
            steps=steps,
            strict=strict,
            samples=[round(r) for r in rates],
            target=20000,
        )


def loaded_replay(agent: LlmAgent[None], data: bytes, steps: int, repeats: int) -> None:
    """Strict replay with the trace file's loading included (issue 29)."""
    samples: dict[str, list[float]] = {"load": [], "loop": [], "cpu": [], "wall": []}
    for _ in range(repeats):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        trace = Trace.from_bytes(data)
        cpu1 = time.process_time()

        async def replay(trace: Trace = trace) -> None:
            async for _ in agent.run(None, "go", interpreter=ReplayInterpreter(trace)):
                pass

        trio.run(replay)
        cpu2, wall2 = time.process_time(), time.perf_counter()
        samples["load"].append(cpu1 - cpu0)
        samples["loop"].append(cpu2 - cpu1)
        samples["cpu"].append(cpu2 - cpu0)
        samples["wall"].append(wall2 - wall0)
    median = {k: statistics.median(v) for k, v in samples.items()}
    C.emit(
        "helikon",
        "replay_loaded",
        "effects_per_s",
        round(steps / median["cpu"]),
        "effects/s",
        steps=steps,
        trace_bytes=len(data),
        load_effects_per_s=round(steps / median["load"]),
        loop_effects_per_s=round(steps / median["loop"]),
        wall_effects_per_s=round(steps / median["wall"]),
        load_ms=round(median["load"] * 1000, 1),
        loop_ms=round(median["loop"] * 1000, 1),
        target=100000,
    )


if __name__ == "__main__":
    main()
