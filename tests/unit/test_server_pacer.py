"""The server's pacer (issue 37): while many runs are busy, a turn of the
event loop does a bounded portion of their work, so a cheap request (which
needs several turns) is not served behind every run's step each turn; and
every run still makes progress.

Measured in work, not time: the number of run steps taken while a probe
goes through ten turns of the loop."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from helikon.server._pacer import MIN_PER_TURN, Pacer

RUNS = 100
STEP_S = 0.002  # each step of a run takes this much CPU (more than the turn target / MIN_PER_TURN)


async def _steps_during_ten_turns(
    checkpoint: Callable[[], Awaitable[None]], pacer: Pacer | None
) -> list[int]:
    """Steps of each busy run: [taken during the probe's ten turns, then per
    run over the next three rounds' worth of steps]."""
    steps = [0] * RUNS
    during = 0
    probing = False

    async def busy(index: int) -> None:
        nonlocal during
        while True:
            end = time.thread_time() + STEP_S  # CPU time: the same work however loaded the machine
            while time.thread_time() < end:
                pass
            steps[index] += 1
            if probing:
                during += 1
            await checkpoint()

    async with anyio.create_task_group() as group:
        if pacer is not None:
            group.start_soon(pacer.run)
        for index in range(RUNS):
            group.start_soon(busy, index)
        await anyio.sleep(0.5)  # warm up: the pacer has found its portion
        probing = True
        for _ in range(10):  # a request that needs ten turns of the loop
            await anyio.lowlevel.checkpoint()
        probing = False
        before = list(steps)
        with anyio.move_on_after(60):  # three rounds' worth of steps (work, not time)
            while sum(steps) - sum(before) < 3 * RUNS:
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    return [during, *(after - first for after, first in zip(steps, before, strict=True))]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_turn_of_the_loop_takes_a_portion_of_the_runs_not_all(backend: str) -> None:
    pacer = Pacer()
    paced = anyio.run(_steps_during_ten_turns, pacer.checkpoint, pacer, backend=backend)
    plain = anyio.run(_steps_during_ten_turns, anyio.lowlevel.checkpoint, None, backend=backend)
    # without the pacer every run steps once per turn: ten turns, ~RUNS * 10 steps
    assert plain[0] >= RUNS * 8, plain[0]
    # with it, a portion per turn: it shrinks towards MIN_PER_TURN when steps are
    # slow (asyncio: about 170 against 1,000). Trio runs a turn's tasks in a
    # shuffled order, so the ticker's turns and the probe's align less well: the
    # probe's ten turns saw 350 to 560 steps against 900 unpaced.
    if backend == "asyncio":
        assert paced[0] <= min(MIN_PER_TURN * 10 * 3, plain[0] // 2), (paced[0], plain[0])
    else:
        assert paced[0] < plain[0] * 0.8, (paced[0], plain[0])
    # and no run starves: every one moved on while three rounds' worth of steps were taken
    assert min(paced[1:]) >= 1, paced[1:]


def test_runs_pass_straight_through_while_nothing_waits() -> None:
    async def main() -> int:
        pacer = Pacer()
        async with anyio.create_task_group() as group:
            group.start_soon(pacer.run)
            for _ in range(100):
                await pacer.checkpoint()
            waiting = pacer.waiting
            group.cancel_scope.cancel()
        return waiting

    assert anyio.run(main) == 0
