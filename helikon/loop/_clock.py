"""Time as data: the run's deadline is state, the clock is read by the interpreter.

The core never reads a clock. An interpreter that has one reads it when a
run begins and after it performs each effect, and hands the reading over
(as aioquic's ``handle_timer(now)`` is handed the time); the machine keeps
the deadline in its state and decides, here, when the run is out of time:

- a run's deadline is ``timeout`` seconds after the reading it began with
  (:func:`deadline_after`);
- a result read at or past the deadline is not folded: the run ends with
  ``RunInterrupted(TimedOut(timeout))`` (:func:`on_time`), so work that
  completed after the deadline is discarded under every interpreter alike;
- the results of the effects that only record what the machine decided
  (``HooksNotified``, ``OutputStored``) are folded whatever the time: a run
  that timed out still tells its observing hooks.

An interpreter with no clock (a reading of ``None``) leaves time to the
interruptions it feeds itself.
"""

from __future__ import annotations

from typing import Protocol

from helikon.effects import (
    AllPerformed,
    EffectResult,
    HooksNotified,
    OutputStored,
    RunInterrupted,
)
from helikon.errors import TimedOut


class Timed(Protocol):
    """A run state that keeps a deadline (every machine's does)."""

    @property
    def deadline(self) -> float | None: ...

    @property
    def timeout(self) -> float | None: ...


def deadline_after(now: float | None, timeout: float | None) -> float | None:
    """The deadline of a run that began at the reading ``now``.

    >>> deadline_after(100.0, 2.5)
    102.5
    >>> deadline_after(100.0, None) is None and deadline_after(None, 2.5) is None
    True
    """
    if now is None or timeout is None:
        return None
    return now + timeout


def _chore(result: EffectResult) -> bool:
    if type(result) is HooksNotified or type(result) is OutputStored:
        return True
    return type(result) is AllPerformed and all(_chore(r.result) for r in result.results)


def on_time(state: Timed, result: EffectResult, now: float | None) -> EffectResult:
    """The result the machine folds, given the clock reading ``now`` taken
    when ``result`` came back.

    >>> from helikon.effects import InstructionsRendered
    >>> from types import SimpleNamespace as S
    >>> on_time(S(deadline=10.0, timeout=2.0), InstructionsRendered("x"), 9.5)
    InstructionsRendered(text='x')
    >>> on_time(S(deadline=10.0, timeout=2.0), InstructionsRendered("x"), 10.0)
    RunInterrupted(reason=TimedOut(timeout_s=2.0))
    >>> on_time(S(deadline=10.0, timeout=2.0), HooksNotified(), 11.0)
    HooksNotified()
    """
    deadline = state.deadline
    if deadline is None or now is None or now < deadline or _chore(result):
        return result
    if type(result) is RunInterrupted:
        return result
    return RunInterrupted(TimedOut(state.timeout if state.timeout is not None else 0.0))


__all__ = ["Timed", "deadline_after", "on_time"]
