"""Time travel over a recorded run, without any UI.

- :func:`state_after` — the machine's state after any step of a trace,
  recomputed by feeding the trace's first answers through the pure machine
  (the step API: :func:`helikon.steps.start` and :func:`~helikon.steps.advance`).
- :func:`fork` — a new run of the recorded agent that retraces the trace up
  to a step, takes an edited answer there, and continues replayed (what does
  not depend on the edit answered from the recording) or live; it is
  recorded, and says how each of its steps was answered and where it left
  the recording (:class:`~helikon.interpreters.ForkInterpreter`).

>>> import trio
>>> from helikon import LlmAgent
>>> from helikon.interpreters import RecordingInterpreter
>>> from helikon.testing import MockModel, say
>>> agent = LlmAgent(name="a", model=MockModel([say("hello")]))
>>> recorder = RecordingInterpreter()
>>> _ = trio.run(collect_run, agent.run(None, "hi", interpreter=recorder))
>>> forked = trio.run(lambda: fork(agent, recorder.trace, 0))
>>> [m.how for m in forked.marks], forked.trace.steps == recorder.trace.steps
(['edited'], True)
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import attrs

from helikon import steps
from helikon.context import RunContext
from helikon.effects import EffectResult
from helikon.errors import RunSuspended
from helikon.events import AgentEvent
from helikon.interpreters import RecordingInterpreter, ReplayDivergence
from helikon.interpreters._drive import Interpreter
from helikon.interpreters._fork import ForkInterpreter, StepMark
from helikon.items import AgentInput
from helikon.trace import Trace


def state_after(agent: Any, trace: Trace, step: int, ctx: RunContext[Any] | None = None) -> Any:
    """The machine's state once step ``step``'s recorded answer was fed
    (``step=-1``: the state the run began in), computed with no IO: the
    trace's answers fed one by one through the pure machine of ``agent``
    (the recorded agent; ``ctx`` its run context). Its JSON is
    :func:`helikon.dump_state`'s.

    Raises:
        ValueError: ``step`` is not a step of the trace.
        StepError: an answer does not fit the machine (another agent).
    """
    if not -1 <= step < len(trace.steps):
        raise ValueError(f"step {step} is not a step of the recording (it has {len(trace.steps)})")
    run_id = trace.header.run_id
    outcome = steps.start(
        agent, AgentInput(trace.header.input), run_id=run_id, ctx=ctx, now=trace.header.started
    )
    for recorded in trace.steps[: step + 1]:
        outcome = steps.advance(agent, outcome.state, recorded.result, ctx=ctx, now=recorded.now)
    return outcome.state


@attrs.frozen
class Forked:
    """A fork's run: its trace, how each step was answered, where it left
    the recording, and whether it ended suspended at an approval."""

    trace: Trace
    marks: tuple[StepMark, ...]
    divergences: tuple[ReplayDivergence, ...]
    suspended: bool = False


async def collect_run(stream: AsyncIterable[AgentEvent]) -> list[AgentEvent]:
    """Drain a run's events; a run that suspends at an approval just ends."""
    events: list[AgentEvent] = []
    try:
        async for event in stream:
            events.append(event)
    except RunSuspended:
        pass
    return events


async def fork(
    agent: Any,
    trace: Trace,
    at: int | None,
    answer: EffectResult | None = None,
    *,
    ctx: RunContext[Any] | None = None,
    input: AgentInput | str | None = None,
    replay: bool = True,
    run_id: str | None = None,
    inner: Interpreter | None = None,
) -> Forked:
    """Fork ``trace`` (a run of ``agent``) at step ``at`` with ``answer``
    (None: the recorded one) and run the fork to its end.

    ``input`` replaces the user's message (then ``at`` is usually None: the
    run's first model call differs, and the fork is live from there).
    ``run_id`` names the fork (the recorded run's id by default: an
    unchanged replayed fork is then the recorded run, byte for byte).

    Raises:
        ReplayDivergence: the run reached step ``at`` with another effect
            than the recorded one (the agent changed before the fork point).
    """
    interpreter = ForkInterpreter(trace, at, answer, replay=replay, inner=inner, run_id=run_id)
    recorder = RecordingInterpreter(interpreter)
    given = AgentInput(trace.header.input) if input is None else input
    suspended = False
    try:
        async for _ in agent.run(ctx, given, interpreter=recorder):
            pass
    except RunSuspended:
        suspended = True
    return Forked(recorder.trace, tuple(interpreter.marks), tuple(interpreter.divergences), suspended)


__all__ = ["Forked", "collect_run", "fork", "state_after"]
