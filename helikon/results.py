"""Draining a run: :func:`collect`, :func:`collect_typed`, :func:`run_sync`."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any, Generic, TypeVar

import attrs

from helikon._stream import RunEvents
from helikon.errors import OtherError, RunError
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed
from helikon.items import AgentInput, text_of
from helikon.model import Usage

T = TypeVar("T")


@attrs.frozen
class RunResult(Generic[T]):
    """A finished run: its final output, every event, and total usage."""

    final_output: T
    events: tuple[AgentEvent, ...]
    usage: Usage


async def collect(stream: AsyncIterable[AgentEvent]) -> RunResult[str]:
    """Drain ``stream``; the final output is the last assistant message's text.

    A run's own stream (``agent.run(...)``) is drained a step's events at a
    time (:meth:`RunEvents.batches <helikon._stream.RunEvents.batches>`).

    Raises:
        RunError: the run ended with ``RunFailed`` (``.error`` says why;
            ``.events`` holds what happened).
    """
    events: list[AgentEvent] = []
    final = ""
    if isinstance(stream, RunEvents):
        async for step in stream.batches():
            if isinstance(step, tuple):
                events += step
                for event in step:
                    if type(event) is MessageOutput:
                        final = text_of(event.item.content)
            else:
                events.append(step)
                if type(step) is MessageOutput:
                    final = text_of(step.item.content)
        return _finish(events, final)
    async for event in stream:
        events.append(event)
        if type(event) is MessageOutput:
            final = text_of(event.item.content)
    return _finish(events, final)


def _finish(events: list[AgentEvent], final: str) -> RunResult[str]:
    last = events[-1] if events else None
    if type(last) is RunFailed:
        raise RunError(last.error, tuple(events))
    if type(last) is not RunCompleted:
        raise RunError(OtherError("the run ended without a terminal event"), tuple(events))
    return RunResult(final, tuple(events), last.usage)


async def collect_typed(stream: AsyncIterable[AgentEvent], output_type: type[T]) -> RunResult[T]:
    """Drain ``stream`` and parse the final output as ``output_type``.

    Raises:
        RunError: the run failed, or its output is not a valid ``output_type``
            (``OtherError``; a structured run that failed validation raises
            with ``InvalidStructuredOutput``).
    """
    result = await collect(stream)
    return RunResult(parse_output(result.final_output, output_type), result.events, result.usage)


def parse_output(text: str, output_type: type[T]) -> T:
    """Parse JSON ``text`` into ``output_type`` (attrs, dataclass, Struct, TypedDict...)."""
    import msgspec

    try:
        return msgspec.json.decode(text, type=output_type)
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        raise RunError(OtherError(f"final output is not a valid {output_type.__name__}: {exc}")) from None


def run_sync(
    agent: Any,
    input: AgentInput | str,
    *,
    ctx: Any = None,
    config: Any = None,
    output_type: type[Any] | None = None,
    run_id: str | None = None,
) -> RunResult[Any]:
    """Run ``agent`` to completion from synchronous code (under trio).

    Returns the :class:`RunResult`; with ``output_type`` (or when the agent
    has one) its ``final_output`` is parsed into that type. ``run_id`` names
    the run (by default a fresh id).
    """
    import trio

    wanted = output_type or getattr(agent, "output_type", None)

    async def main() -> RunResult[Any]:
        named = {} if run_id is None else {"run_id": run_id}  # an agent of another kind may take none
        stream = agent.run(ctx, input, config=config, **named)
        if wanted is not None:
            return await collect_typed(stream, wanted)
        return await collect(stream)

    return trio.run(main)


__all__ = ["RunResult", "collect", "collect_typed", "parse_output", "run_sync"]
