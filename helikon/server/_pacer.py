"""Sharing the event loop between runs and the cheap routes.

Every request of the server, a ``GET /health`` included, is served by the
event loop that also executes the runs. A request takes several turns of
the loop (accept, read, parse, answer), and a turn runs every task that is
ready: with 1,000 runs streaming, each turn does a step of every run, so a
cheap request waited 1,000 steps per turn, many turns over (3 to 10 s at
1,000 runs on a busy 2-core machine).

:class:`Pacer` bounds the run work of one turn. Runs pass through
:meth:`Pacer.checkpoint` after every event; while the loop is quick they pass
straight through (a plain yield). When runs are waiting, a ticker task
measures each turn of the loop and lets the waiting runs go first come, first
served, as many per turn as keep a turn near :data:`TURN_TARGET_S` (2 ms)
(additive increase, multiplicative decrease). A run's expensive step (its
model's next chunk through the machine) follows its release, so the work
per turn follows the number released. Runs still get the whole CPU the
cheap routes leave: nothing sleeps, the runs are only taken in portions.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Final, final

import anyio
import anyio.lowlevel

#: The CPU time one turn of the event loop should take while runs are
#: waiting: a request needing ten turns is answered in about ten times this
#: (CPU time, not wall time: on a machine shared with other processes, time
#: spent descheduled says nothing about the loop's own work). 2 ms rather
#: than 10: under trio, Hypercorn accepts one connection per turn, so a
#: burst's intake takes a turn per connection (1,000 runs: probe p99 over
#: the burst about 1-1.7 s against 2.7-4.2 s with 10 ms); under asyncio it
#: changed nothing measurable (a poll of the sockets per turn is cheap).
TURN_TARGET_S: Final = 0.002
#: Bounds of the number of runs let through per turn.
MIN_PER_TURN: Final = 8
MAX_PER_TURN: Final = 4096
START_PER_TURN: Final = 256


@final
class Pacer:
    """Lets runs through the loop in portions that keep its turns short."""

    def __init__(self, turn_target: float = TURN_TARGET_S) -> None:
        self.turn_target = turn_target
        self.per_turn = float(START_PER_TURN)
        self._left = START_PER_TURN  # runs that may still pass straight through this turn
        self._waiting: deque[anyio.Event] = deque()
        self._calls = 0
        self._idle = True
        self._wake = anyio.Event()

    @property
    def waiting(self) -> int:
        """Runs waiting for a turn."""
        return len(self._waiting)

    async def checkpoint(self) -> None:
        """Yield to the loop; when this turn has let its portion through, wait for a later one."""
        self._calls += 1
        if self._idle:
            self._idle = False
            self._wake.set()
        if not self._waiting and self._left > 0:
            self._left -= 1
            await anyio.lowlevel.checkpoint()
            return
        turn = anyio.Event()
        self._waiting.append(turn)
        await turn.wait()

    async def run(self) -> None:
        """The ticker: once per turn of the loop, measure the turn's CPU time,
        adjust the portion and let that many waiting runs go. Idle (no turn
        measured, nothing spinning) while no run passes."""
        last = time.thread_time()
        while True:
            calls = self._calls
            await anyio.lowlevel.checkpoint()  # one turn: I/O polled, every ready task stepped
            now = time.thread_time()
            turn, last = now - last, now
            if turn > self.turn_target:
                self.per_turn = max(MIN_PER_TURN, self.per_turn * max(0.5, self.turn_target / turn))
            else:
                self.per_turn = min(MAX_PER_TURN, self.per_turn + MIN_PER_TURN)
            portion = int(self.per_turn)
            released = min(len(self._waiting), portion)
            for _ in range(released):
                self._waiting.popleft().set()
            self._left = portion - released
            if not self._waiting and self._calls == calls:  # a quiet turn: sleep until a run passes
                self._idle = True
                self._wake = anyio.Event()
                await self._wake.wait()
                last = time.thread_time()


__all__ = ["TURN_TARGET_S", "Pacer"]
