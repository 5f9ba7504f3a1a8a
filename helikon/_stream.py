"""A run's events, one at a time, over a stream of whole steps' events.

The machine hands out each step's events together (``outcome.events``), and
:func:`helikon.interpreters._drive.drive_batches` gives them on as one tuple;
a live event (a model's text delta) it gives bare, as it comes.
:class:`RunEvents` is what ``agent.run(...)`` and
:func:`~helikon.interpreters.drive` return: an async generator of single
events over that stream. ``async for`` iterates a native async generator
that takes a step's tuple at a time and hands out its events from it (one
generator resumption per event, none per event of the stream below it), and
:func:`~helikon.results.collect` takes whole steps (:meth:`RunEvents.batches`).

It behaves as the async generator it replaces: ``async for``, ``anext``,
``aclose()`` (and ``contextlib.aclosing``), ``athrow`` and ``asend``; closing
it stops the run where it is (its ``finally`` clauses run, a wave's parts
are cancelled), and an error of the run is raised once the events before
it are handed out.
"""

from __future__ import annotations

import typing
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import aclosing
from typing import Any

from helikon.events import AgentEvent

#: A run's events of one step, in order.
Batch = tuple[AgentEvent, ...]

#: What the stream under a run gives: a step's events, or one live event.
Step = Batch | AgentEvent

Steps = AsyncGenerator[Step, None]


@typing.final
class RunEvents(AsyncGenerator[AgentEvent, None]):
    """The events of a run, one at a time, from ``steps`` (an async
    generator of tuples of events and of single events).

    >>> import anyio
    >>> async def steps():
    ...     yield ("a", "b")
    ...     yield "c"
    >>> async def main():
    ...     return [event async for event in RunEvents(steps())]
    >>> anyio.run(main)
    ['a', 'b', 'c']
    """

    __slots__ = ("_events", "_start", "_steps")

    def __init__(self, steps: Steps) -> None:
        self._steps: Steps | None = steps
        self._start: Callable[[], Steps] | None = None
        self._events: AsyncGenerator[AgentEvent, None] | None = None  # made by the first __aiter__

    @classmethod
    def starting(cls, start: Callable[[], Steps]) -> RunEvents:
        """The events of the generator ``start()`` makes when the first
        event (or step) is asked for, as a generator's body starts: an error
        making it is what the stream raises first, then it is over; a
        stream closed before that never makes it. It spares a generator
        that would only start another and pass its steps on."""
        events = cls.__new__(cls)
        events._steps = None
        events._start = start
        events._events = None
        return events

    def _taken(self) -> Steps:
        """The stream of steps, made now if it is to be made."""
        steps = self._steps
        if steps is None:
            start = self._start
            self._start = None
            self._steps = steps = _over()  # what is left if ``start`` raises (or was closed): nothing
            if start is not None:
                self._steps = steps = start()
        return steps

    def __aiter__(self) -> AsyncGenerator[AgentEvent, None]:
        # ``async for`` asks once, then iterates a native async generator
        # (which holds no reference back: a stream dropped unclosed is
        # finalized at once, not by the cycle collector)
        events = self._events
        if events is None:
            events = self._events = _one_by_one(self._steps, self._start)
            self._start = None  # the generator starts the run now, if it is to
        return events

    def __anext__(self) -> Coroutine[Any, Any, AgentEvent]:
        return self.__aiter__().__anext__()

    async def asend(self, value: None) -> AgentEvent:
        """The next event (a run takes no values: ``value`` must be None)."""
        return await self.__aiter__().asend(value)

    async def athrow(self, *error: Any) -> AgentEvent:
        """Raise the error where the run waits to hand out its next event:
        the run is closed and the error raised."""
        return await self.__aiter__().athrow(*error)

    async def aclose(self) -> None:
        """Stop the run where it is (events not handed out yet are dropped)."""
        events = self.__aiter__()
        await events.aclose()  # if it started: closes the steps too
        self._start = None
        if self._steps is not None:
            await self._steps.aclose()

    def batches(self) -> AsyncGenerator[Step, None]:
        """The rest of the run a step at a time: each step's events as one
        tuple, a live event bare (what :func:`collect
        <helikon.results.collect>` drains). Once events were asked for one
        at a time, the rest comes one at a time too, each as a tuple of one.
        Iterating it moves this stream on; closing it closes the run."""
        if self._events is not None:
            return _each(self._events)
        return self._taken()


async def _one_by_one(
    steps: Steps | None, start: Callable[[], Steps] | None
) -> AsyncGenerator[AgentEvent, None]:
    """The events of ``steps`` (or of those ``start()`` makes) one at a
    time: a step's from its tuple, in order."""
    if steps is None:
        steps = start() if start is not None else _over()
    async with aclosing(steps):
        async for step in steps:
            if type(step) is tuple:
                for event in step:
                    yield event
            else:
                yield step  # type: ignore[misc]


async def _each(events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[Step, None]:
    async with aclosing(events):
        async for event in events:
            yield (event,)


async def _over() -> Steps:
    return
    yield  # an async generator that gives nothing


__all__ = ["Batch", "RunEvents", "Step", "Steps"]
