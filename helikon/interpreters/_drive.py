"""The loop every async interpreter shares: start, perform, transition.

:func:`drive` owns the order of things: it emits each outcome's events,
asks the interpreter to perform the pending effect — streaming whatever live
events it yields — and feeds the result back to the pure machine, until the
effect is ``Terminate`` (so a run that reached a terminal state is never
interrupted). Interpreters differ only in how they perform effects; a live
one answers with :func:`interruption`'s result instead of performing when
the run is cancelled or past its deadline.

Time is data (:mod:`helikon.loop._clock`): an interpreter with a clock
(a ``now()`` method) is read when the run begins — the machine's state then
holds the run's deadline — and after each effect it performs; the machine
decides with each reading whether the run is out of time.
"""

from __future__ import annotations

import typing
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeGuard, TypeVar, cast

import attrs
from returns.result import Failure, Success

from helikon.effects import Effect as Effect
from helikon.effects import (
    EffectResult,
    RunInterrupted,
    Terminate,
)
from helikon.errors import Cancelled, StepError, TimedOut
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._env import RunEnv
from helikon.interpreters._machine import LoopMachine, Machine, OutcomeLike
from helikon.items import AgentInput
from helikon.loop import deadline_after, on_time

#: The result types, to tell them apart from live events in a perform stream.
RESULT_TYPES: frozenset[type] = frozenset(typing.get_args(EffectResult))


def is_result(item: AgentEvent | EffectResult) -> TypeGuard[EffectResult]:
    """Whether an item of a perform stream is the effect's result."""
    return type(item) in RESULT_TYPES


def is_event(item: AgentEvent | EffectResult) -> TypeGuard[AgentEvent]:
    """Whether an item of a perform stream is a live event."""
    return type(item) not in RESULT_TYPES


class Interpreter(Protocol):
    """Performs effects. Implement it to run helikon on your own scheduler.

    ``perform`` yields any live events (the model's raw deltas, made with
    :func:`helikon.loop.delta_event`) and then, last, the effect's result.

    An interpreter may also define ``observe(env, outcome)``: :func:`drive`
    calls it with every outcome before emitting its events (recording and
    replay use it to see the machine's events); and ``result_of(effect,
    env)``: an awaitable of the result of an effect that streams no events
    (or None, then :func:`drive` iterates ``perform``), which spares an
    async generator per effect.
    """

    def new_run_id(self) -> RunId:
        """The id of a run about to start."""
        ...

    def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        """Perform ``effect``: live events first, the result last."""
        ...


Out = TypeVar("Out", bound=OutcomeLike)


def timed(outcome: Out, now: float | None, timeout: float | None) -> Out:
    """``outcome`` of a run that began at the reading ``now``: its state
    keeps the deadline ``timeout`` seconds later."""
    deadline = deadline_after(now, timeout)
    if deadline is None:
        return outcome
    state = attrs.evolve(outcome.state, deadline=deadline, timeout=timeout)
    evolved: Out = attrs.evolve(cast(Any, outcome), state=state)
    return evolved


def interruption(env: RunEnv) -> RunInterrupted | None:
    """The interruption due now (cancelled, or past the deadline), if any."""
    if env.ctx.cancel.cancelled:
        return RunInterrupted(Cancelled())
    if env.deadline is not None:
        import anyio

        if anyio.current_time() >= env.deadline:
            return RunInterrupted(TimedOut(env.timeout_s or env.spec.config.timeout or 0.0))
    return None


async def drive(
    interpreter: Interpreter, env: RunEnv, input: AgentInput, first: OutcomeLike | None = None
) -> AsyncIterator[AgentEvent]:
    """Run ``env``'s agent on ``input`` to a terminal state, yielding events.

    ``first`` resumes from an outcome instead of starting afresh.
    """
    machine: Machine = env.machine if env.machine is not None else LoopMachine(env.spec)
    clock = getattr(interpreter, "now", None)
    if first is not None:
        outcome = first
    else:
        outcome = machine.begin(input, env.run_id, env.ctx.agent_depth)
        if clock is not None and env.spec.config.timeout is not None:
            outcome = timed(outcome, clock(), env.spec.config.timeout)
    observe = getattr(interpreter, "observe", None)
    # an interpreter may perform an effect that streams nothing as one awaitable
    plain = getattr(interpreter, "result_of", None)
    while True:
        if observe is not None:
            observe(env, outcome)
        for event in outcome.events:
            yield event
        effect = outcome.effect
        if type(effect) is Terminate:
            return
        result: EffectResult | None = None
        awaitable = plain(effect, env) if plain is not None else None
        if awaitable is not None:
            result = await awaitable
        else:
            async for item in interpreter.perform(effect, env):
                if is_result(item):
                    result = item
                elif is_event(item):
                    yield item
        if result is None:
            raise StepError(f"{type(interpreter).__name__} performed {type(effect).__name__} with no result")
        if clock is not None and outcome.state.deadline is not None:
            result = on_time(outcome.state, result, clock())
        match machine.step(outcome.state, result):
            case Success(nxt):
                outcome = nxt
            case Failure(error):
                raise error


__all__ = ["RESULT_TYPES", "Interpreter", "drive", "interruption", "is_event", "is_result", "timed"]
