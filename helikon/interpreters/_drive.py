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

import inspect
import logging
import typing
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeGuard, TypeVar, cast

import attrs
from returns.result import Failure, Success

from helikon._stream import RunEvents, Steps
from helikon.agents import deadline_at
from helikon.effects import Effect as Effect
from helikon.effects import (
    EffectResult,
    ExecuteTools,
    PerformAll,
    RunInterrupted,
    Terminate,
)
from helikon.errors import Cancelled, StepError, TimedOut
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._env import RunEnv
from helikon.interpreters._machine import LoopMachine, Machine, OutcomeLike
from helikon.interpreters._waves import Reached, is_wave, perform_wave
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
    replay use it to see the machine's events). One that defines
    ``perform_part(effect, env)`` (as ``perform``, for one part of a wave)
    gets waves performed part by part, each part's next effect started as
    soon as its answer came and every event given as it happens (see
    :mod:`helikon.interpreters._waves`). One
    that defines ``result_of(effect, env)`` returns an awaitable of the
    result of an effect that streams no events (or None, then :func:`drive`
    iterates ``perform``), which spares an async generator per effect. One
    that defines ``answer_of(effect, env)`` knows an effect's live events
    and result at once (a replay: the recorded ones) and returns them as a
    pair (or None, then ``result_of`` and ``perform`` are asked): the live
    events come as one step, before the machine's next events, as
    ``perform``'s would.
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


#: Where :func:`drive` leaves the machine's state and the latest clock reading
#: in ``env.derived``, for an interpreter to derive how long work may take.
CLOCKED = "clocked"


def due(env: RunEnv, path: tuple[str, ...] = ()) -> tuple[float, float] | None:
    """When work of the sub-machine at ``path`` must be cut short, on the
    event loop's clock, and the timeout that set it (None: never).

    Derived from the machine's state (:func:`helikon.agents.deadline_at`)
    and the latest reading :func:`drive` took, so a member's deadline is the
    one the machine set when the member began. Without a reading (a run not
    driven by :func:`drive`, the step API's ``perform``) it is the deadline
    the environment was built with.
    """
    known = env.derived.get(CLOCKED)
    if known is None:
        if env.deadline is None:
            return None
        return env.deadline, env.timeout_s or env.spec.config.timeout or 0.0
    state, reading = known
    limit = deadline_at(state, path)
    if limit is None:
        return None
    import anyio

    return anyio.current_time() + (limit[0] - reading), limit[1]


def interruption(env: RunEnv, limit: tuple[float, float] | None = None) -> RunInterrupted | None:
    """The interruption due now (cancelled, or past ``limit``, the work's
    cut-short time from :func:`due`), if any."""
    if env.ctx.cancel.cancelled:
        return RunInterrupted(Cancelled())
    if limit is not None:
        import anyio

        if anyio.current_time() >= limit[0]:
            return RunInterrupted(TimedOut(limit[1]))
    return None


async def close_quietly(stream: object) -> None:
    """Close ``stream`` (an effect's, a model's) because its run is over,
    closed or failed: a failure closing it is logged, not raised (it would
    hide why the run ended, as it did not when the collector closed it)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception as exc:
        logging.getLogger("helikon.interpreters").warning(
            "closing a stream of a closed run failed: %s: %s", type(exc).__name__, exc
        )


async def _read(clock: Any) -> float | None:
    """A clock reading (a clock may answer with an awaitable: a Temporal
    worker's clock is read through an activity)."""
    reading = clock()
    if inspect.isawaitable(reading):
        reading = await reading
    return cast(float | None, reading)


def drive(
    interpreter: Interpreter, env: RunEnv, input: AgentInput, first: OutcomeLike | None = None
) -> RunEvents:
    """Run ``env``'s agent on ``input`` to a terminal state, yielding events.

    ``first`` resumes from an outcome instead of starting afresh. The
    events come one at a time from :func:`drive_batches`'s steps (a
    :class:`~helikon._stream.RunEvents`, an async generator of events).
    """
    return RunEvents(drive_batches(interpreter, env, input, first))


async def drive_batches(
    interpreter: Interpreter, env: RunEnv, input: AgentInput, first: OutcomeLike | None = None
) -> Steps:
    """:func:`drive`, a step at a time: each outcome's events as one tuple
    (never an empty one), each live event (a model's text delta, a wave's
    events) bare, as it comes."""
    machine: Machine = env.machine if env.machine is not None else LoopMachine(env.spec)
    clock = getattr(interpreter, "now", None)
    members = clock is not None and machine.timed  # tree members keep deadlines of their own
    if first is not None:
        outcome = first
    else:
        timeout = env.spec.config.timeout
        began = await _read(clock) if clock is not None and (timeout is not None or members) else None
        outcome = timed(machine.begin(input, env.run_id, env.ctx.agent_depth, began), began, timeout)
        if began is not None:
            env.derived[CLOCKED] = (outcome.state, began)
    observe = getattr(interpreter, "observe", None)
    perform_part = getattr(interpreter, "perform_part", None)
    observed = False
    # an interpreter may perform an effect that streams nothing as one awaitable
    plain = getattr(interpreter, "result_of", None)
    # or know an effect's live events and result at once (a replay)
    known = getattr(interpreter, "answer_of", None)
    while True:
        if not observed:
            if observe is not None:
                observe(env, outcome)
            events = outcome.events
            if events:
                yield events if type(events) is tuple else tuple(events)  # a step is a tuple (of any machine)
        observed = False
        effect = outcome.effect
        kind = type(effect)
        if kind is Terminate:
            return
        # a model call or a round of one tool step is no wave (a cheap test before is_wave, which splits it)
        if (
            perform_part is not None
            and (kind is PerformAll or (kind is ExecuteTools and len(effect.steps) > 1))  # type: ignore[union-attr]
            and is_wave(effect)
        ):
            # Each part moves on as soon as its own answer comes (see _waves).
            # Its events come as they happen; ``reached`` holds where it got to.
            reached = Reached(outcome)
            wave = perform_wave(interpreter, perform_part, env, machine, reached, clock, observe)
            try:
                async for event in wave:
                    yield event
            finally:
                await wave.aclose()
            outcome = reached.outcome
            observed = True
            continue
        result: EffectResult | None = None
        answer = known(effect, env) if known is not None else None
        if answer is not None:
            live, result = answer
            if live:
                yield live if type(live) is tuple else tuple(live)  # the live events, as one step (a tuple)
        elif (awaitable := plain(effect, env) if plain is not None else None) is not None:
            result = await awaitable
        else:
            stream = interpreter.perform(effect, env)
            try:
                async for item in stream:
                    if type(item) in RESULT_TYPES:  # (is_result and is_event, inline: a frame less each)
                        result = item  # type: ignore[assignment]
                    else:  # a live event: given as it comes
                        yield item  # type: ignore[misc]
            except BaseException:
                # A run closed (or failed) mid-effect closes the effect's stream
                # now, and with it the model's: not when the collector finds it.
                await close_quietly(stream)
                raise
        if result is None:
            raise StepError(f"{type(interpreter).__name__} performed {type(effect).__name__} with no result")
        now: float | None = None
        if clock is not None and (members or outcome.state.deadline is not None):
            now = await _read(clock)
            result = on_time(outcome.state, result, now)
        match machine.step(outcome.state, result, now):
            case Success(nxt):
                outcome = nxt
                if now is not None:
                    env.derived[CLOCKED] = (outcome.state, now)
            case Failure(error):
                raise error


__all__ = [
    "CLOCKED",
    "RESULT_TYPES",
    "Interpreter",
    "close_quietly",
    "drive",
    "drive_batches",
    "due",
    "interruption",
    "is_event",
    "is_result",
    "timed",
]
