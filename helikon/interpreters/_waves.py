"""Waves that are not lock-step: each part of a wave moves on as soon as its
own answer comes.

A wave is an effect with several independent parts: the steps of a round of
tool calls (:class:`~helikon.effects.ExecuteTools`, one per call) and the
effects of an agent tree's sub-machines (:class:`~helikon.effects.PerformAll`,
one per path; a path's round of tool calls, one per call). The machine
accepts the answer to any of them, in any order, and lists the parts still
pending beside the answered parts' next effects. :func:`perform_wave`
performs the parts concurrently and feeds each one's result the moment it
arrives, then starts whatever the machine asks next — so one branch never
waits for the slowest step of its siblings.

A part is addressed by ``(path, call id)`` (``call id`` None for a path's
whole effect): an address in flight is not started again while the machine
keeps listing it; an answered address listed again is new work. The steps
of one agent's tool round stay under its ``parallel_tool_call_limit``.

Events are given as they happen, in that order: a part's live events as
they arrive, each answer's events as it is fed. Each part runs in a task of
its own (:class:`_Parts`), outside the generator that gives the events, so
that generator never holds a cancel scope across a ``yield``; a part hands
its events and result over a channel. Closing the generator (the run
cancelled or stopped early) or an error cancels every part and waits for
them. A part's answer is fed in the shape it came in: the machine takes a
root step's answer bare or addressed to the path ``()``, whichever effect
is pending by then. A recording interpreter is told each answer as it is
fed (``answered(env, effect, result, live=...)``), so the trace holds the
order the machine saw and replays exactly.
"""

from __future__ import annotations

import contextvars
import inspect
import math
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import attrs
import sniffio
from returns.result import Failure, Success

from helikon.effects import (
    AtPath,
    Effect,
    EffectResult,
    ExecuteTools,
    PerformAll,
)
from helikon.events import AgentEvent
from helikon.interpreters._env import RunEnv
from helikon.interpreters._machine import Machine, OutcomeLike
from helikon.interpreters._tree_env import env_at
from helikon.loop import on_time

#: Where a part of a wave is: the sub-machine's path and, for one step of a
#: tool round, its call id.
Address = tuple[tuple[str, ...], str | None]

PerformPart = Callable[[Effect, RunEnv], AsyncIterator[AgentEvent | EffectResult]]


def parts(effect: Effect) -> list[tuple[Address, Effect]]:
    """``effect``'s independent parts, each as an effect of its own (whose
    result the machine accepts as a partial answer), in order.

    >>> from helikon.effects import InvokeTool, RenderInstructions
    >>> two = ExecuteTools((InvokeTool("a", "t", {}), InvokeTool("b", "t", {})))
    >>> [address for address, _ in parts(two)]
    [((), 'a'), ((), 'b')]
    >>> [address for address, _ in parts(PerformAll((AtPath(("x",), RenderInstructions(1)),)))]
    [(('x',), None)]
    """
    match effect:
        case ExecuteTools(steps=steps):
            return [(((), s.call_id), ExecuteTools((s,))) for s in steps]
        case PerformAll(effects=effects):
            found: list[tuple[Address, Effect]] = []
            for at in effects:
                if type(at.effect) is ExecuteTools:
                    found.extend(
                        ((at.path, s.call_id), PerformAll((AtPath(at.path, ExecuteTools((s,))),)))
                        for s in at.effect.steps
                    )
                else:
                    found.append(((at.path, None), PerformAll((at,))))
            return found
        case _:
            return [(((), None), effect)]


def answerer(interpreter: Any) -> Callable[..., None] | None:
    """The ``answered`` hook of ``interpreter`` or of one it wraps (a
    recorder's), if any."""
    while interpreter is not None:
        answered = getattr(interpreter, "answered", None)
        if callable(answered):
            return answered  # type: ignore[no-any-return]
        interpreter = getattr(interpreter, "inner", None)
    return None


@attrs.define
class Reached:
    """Where :func:`perform_wave` leaves the outcome the wave reached: the
    latest the machine decided (observed, its events given)."""

    outcome: OutcomeLike


async def perform_wave(
    interpreter: Any,
    perform_part: PerformPart,
    env: RunEnv,
    machine: Machine,
    reached: Reached,
    clock: Callable[[], Any] | None,
    observe: Callable[[RunEnv, OutcomeLike], None] | None,
) -> AsyncGenerator[AgentEvent, None]:
    """Perform the wave of ``reached``'s outcome until nothing is in flight,
    giving every event as it happens (a part's live events as they come,
    each answer's outcome's events as it is fed); ``reached`` holds the
    outcome the machine decided last.

    The parts run in tasks of their own (:class:`_Parts`), not in a task
    group of this generator: a generator must not hold a cancel scope open
    across a ``yield`` (the consumer's code would run inside it). Closing
    the generator, or an error, cancels every part and waits for them.
    """
    import anyio

    outcome = reached.outcome
    send, receive = anyio.create_memory_object_stream[
        tuple[Address, AgentEvent | EffectResult | BaseException]
    ](math.inf)
    live: list[AgentEvent] = []
    running: set[Address] = set()
    answered = answerer(interpreter)

    limiters: dict[tuple[str, ...], Any] = {}  # per agent (path): its round's parallel_tool_call_limit

    def limiter(path: tuple[str, ...]) -> Any:
        found = limiters.get(path)
        if found is None:
            limit = env_at(env, path, interpreter).spec.config.parallel_tool_call_limit
            found = limiters[path] = anyio.CapacityLimiter(limit if limit is not None else math.inf)
        return found

    async def run(address: Address, part: Effect) -> None:
        try:
            if address[1] is not None:  # a tool step: under its agent's limit
                async with limiter(address[0]):
                    await relay(address, part)
            else:
                await relay(address, part)
        except BaseException as exc:  # handed to the wave, which ends the run with it
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                raise
            send.send_nowait((address, exc))

    async def relay(address: Address, part: Effect) -> None:
        async for item in perform_part(part, env):
            send.send_nowait((address, item))

    tasks = _Parts()

    def start_new() -> None:
        for address, part in parts(outcome.effect):
            if address not in running:
                running.add(address)
                tasks.start_soon(run, address, part)

    try:
        start_new()
        while running:
            address, item = await receive.receive()
            if isinstance(item, BaseException):
                raise item
            if not _is_result(item):
                live.append(item)  # type: ignore[arg-type]
                yield item  # type: ignore[misc]
                continue
            running.discard(address)
            if address not in {a for a, _ in parts(outcome.effect)}:
                continue  # no longer asked for (an interruption ended it): dropped
            result: EffectResult = item  # type: ignore[assignment]  # either shape: the machine takes both
            if answered is not None:
                answered(env, outcome.effect, result, live=tuple(live))
            live = []
            if clock is not None and outcome.state.deadline is not None:
                reading = clock()
                if inspect.isawaitable(reading):
                    reading = await reading
                result = on_time(outcome.state, result, reading)
            match machine.step(outcome.state, result):
                case Success(nxt):
                    outcome = reached.outcome = nxt
                case Failure(error):
                    raise error
            if observe is not None:
                observe(env, outcome)
            left = _wave(outcome.effect)
            if running and left:
                start_new()  # before the events go out: a part never waits for the consumer
            for event in outcome.events:
                yield event
            if not running or not left:
                break  # over, or the run left the wave (interrupted, say): what still runs is dropped
    finally:
        await tasks.close()
        send.close()
        receive.close()


@typing.final
class _Parts:
    """A wave's parts, each run in a task of its own (a trio system task, an
    asyncio task) rather than in a task group of the generator that starts
    them: they outlive each ``yield`` of it. Each runs in a copy of the
    starter's context (context variables are seen as in a child task) and
    under a cancel scope of its own; :meth:`close` cancels those still
    running and waits until every one has ended."""

    def __init__(self) -> None:
        self._trio = sniffio.current_async_library() == "trio"
        self._scopes: set[Any] = set()
        self._live = 0
        self._closed = False
        self._idle: Any = None
        self._tasks: set[Any] = set()  # asyncio keeps only weak references to tasks

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        context = contextvars.copy_context()
        self._live += 1
        if self._trio:
            import trio

            trio.lowlevel.spawn_system_task(self._run, fn, args, context=context)
        else:
            import asyncio

            task = asyncio.get_running_loop().create_task(self._run(fn, args), context=context)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        import anyio

        try:
            with anyio.CancelScope() as scope:
                if self._closed:
                    return
                self._scopes.add(scope)
                try:
                    await fn(*args)
                finally:
                    self._scopes.discard(scope)
        finally:
            self._live -= 1
            if not self._live and self._idle is not None:
                self._idle.set()

    async def close(self) -> None:
        """Cancel the parts still running and wait until every one has ended
        (even when the caller is being cancelled: nothing outlives the wave)."""
        import anyio

        self._closed = True
        for scope in self._scopes:
            scope.cancel()
        if self._live:
            self._idle = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self._idle.wait()


def is_wave(effect: Effect) -> bool:
    """Whether ``effect`` has several parts to perform concurrently."""
    return _wave(effect) and len(parts(effect)) > 1


def _wave(effect: Effect) -> bool:
    return type(effect) is ExecuteTools or type(effect) is PerformAll


#: The result types, to tell a part's result from its live events.
_RESULTS: frozenset[type] = frozenset(typing.get_args(EffectResult))


def _is_result(item: object) -> bool:
    return type(item) in _RESULTS


__all__ = ["Address", "Reached", "answerer", "is_wave", "parts", "perform_wave"]
