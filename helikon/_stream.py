"""A run's events, one at a time, over a stream of whole steps' events.

The machine hands out each step's events together (``outcome.events``), and
:func:`helikon.interpreters._drive.drive_batches` gives them on as one tuple
(a live event, a model's text delta, as a tuple of one: it streams as it
comes). :class:`RunEvents` is what ``agent.run(...)`` and
:func:`~helikon.interpreters.drive` return: an async generator of single
events that takes a step's tuple at a time and hands out its events from
it, so an event costs no generator resumption of its own; :func:`collect
<helikon.results.collect>` takes whole steps (:meth:`RunEvents.batches`).

It behaves as the async generator it replaces: ``async for``,
``anext``, ``aclose()`` (and ``contextlib.aclosing``), ``athrow`` and
``asend``, each reaching the generator of batches under it, so closing it
stops the run where it is (its ``finally`` clauses run, a wave's parts are
cancelled), and an error of the run is raised once the events before it are
handed out.
"""

from __future__ import annotations

import typing
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from contextlib import aclosing
from typing import Any, cast

from helikon.events import AgentEvent

#: A run's events of one step (or one live event), in order.
Batch = Sequence[AgentEvent]

_NONE: Iterator[AgentEvent] = iter(())  # an exhausted iterator: nothing held back


@typing.final
class RunEvents(AsyncGenerator[AgentEvent, None]):
    """The events of a run, one at a time, taken a step's worth at a time
    from ``batches`` (an async generator of tuples of events).

    >>> import anyio
    >>> async def steps():
    ...     yield ("a", "b")
    ...     yield ("c",)
    >>> async def main():
    ...     return [event async for event in RunEvents(steps())]
    >>> anyio.run(main)
    ['a', 'b', 'c']
    """

    __slots__ = ("_batches", "_held")

    def __init__(self, batches: AsyncGenerator[Batch, None]) -> None:
        self._batches = batches
        self._held: Iterator[AgentEvent] = _NONE  # the current batch's events not handed out yet

    @classmethod
    def starting(cls, start: Callable[[], AsyncGenerator[Batch, None]]) -> RunEvents:
        """The events of the generator of batches ``start()`` makes when
        the first event is asked for (as a generator's body starts: an
        error making it is what the stream raises first, then it is over;
        a stream closed before that never makes it). It spares a generator
        that would only start another and pass its batches on."""
        events = cls.__new__(cls)
        events._held = _NONE
        events._batches = cast(AsyncGenerator[Batch, None], _Start(events, start))
        return events

    def __aiter__(self) -> RunEvents:
        return self

    async def __anext__(self) -> AgentEvent:
        for event in self._held:
            return event
        while True:
            batch = await self._batches.__anext__()
            if len(batch) == 1:
                return batch[0]
            held = self._held = iter(batch)
            for event in held:
                return event

    async def asend(self, value: None) -> AgentEvent:
        """The next event (a run's generator takes no values: ``value`` is ignored)."""
        return await self.__anext__()

    @typing.overload
    async def athrow(self, typ: type[BaseException], val: object = ..., tb: Any = ..., /) -> AgentEvent: ...

    @typing.overload
    async def athrow(self, typ: BaseException, val: None = ..., tb: Any = ..., /) -> AgentEvent: ...

    async def athrow(self, typ: Any, val: Any = None, tb: Any = None, /) -> AgentEvent:
        """Raise ``typ`` in the run where it waits (the events held back
        are dropped, as those it had not given yet); the next event if the
        run goes on."""
        self._held = _NONE
        if val is None and tb is None:
            batch = await self._batches.athrow(typ)
        else:  # the old three-argument form, passed on as it came
            batch = await self._batches.athrow(typ, val, tb)
        held = self._held = iter(batch)
        for event in held:
            return event
        return await self.__anext__()

    async def aclose(self) -> None:
        """Stop the run where it is (the events held back are dropped)."""
        self._held = _NONE
        await self._batches.aclose()

    def batches(self) -> AsyncGenerator[Batch, None]:
        """The rest of the run a step's events at a time (first what is
        left of the step being handed out). Iterating it moves this stream
        on; closing it closes the run. A stream made by :meth:`starting`
        that has not started starts now (an error doing so is raised here)."""
        batches = self._batches
        if isinstance(batches, _Start):
            batches = batches.begin()
        rest = tuple(self._held)
        self._held = _NONE
        if not rest:
            return batches
        return _after(rest, batches)


async def _over() -> AsyncGenerator[Batch, None]:
    return
    yield  # an async generator that gives nothing


@typing.final
class _Start:
    """Where a :meth:`RunEvents.starting` stream's generator of batches
    will be: asked for a batch, it makes the generator and puts it in its
    place; closed first, it never makes it."""

    __slots__ = ("_events", "_start")

    def __init__(self, events: RunEvents, start: Callable[[], AsyncGenerator[Batch, None]]) -> None:
        self._events = events
        self._start = start

    def begin(self) -> AsyncGenerator[Batch, None]:
        events = self._events
        events._batches = _over()  # what is left if ``start`` raises: nothing
        batches = events._batches = self._start()
        return batches

    def __anext__(self) -> Awaitable[Batch]:
        return self.begin().__anext__()

    def athrow(self, *error: Any) -> Awaitable[Batch]:
        self._events._batches = closed = _over()  # a generator not started ends at once, with the error
        return closed.athrow(*error)

    async def aclose(self) -> None:
        self._events._batches = _over()


async def _after(first: Batch, rest: AsyncGenerator[Batch, None]) -> AsyncGenerator[Batch, None]:
    async with aclosing(rest):
        yield first
        async for batch in rest:
            yield batch


__all__ = ["Batch", "RunEvents"]
