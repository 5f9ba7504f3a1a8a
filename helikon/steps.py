"""The public step API: drive a run one effect at a time.

``start`` gives the first :class:`~helikon.loop.Outcome` of a run;
``advance`` feeds the pending effect's result and gives the next. Every
shipped interpreter is built on these two, and so can yours: perform
``outcome.effect`` however you like, feed its result back, stop when the
effect is :class:`~helikon.effects.Terminate`.
"""

from __future__ import annotations

from typing import Any

from returns.result import Failure, Success

from helikon.context import RunContext
from helikon.effects import Effect, EffectResult
from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, RunState, transition
from helikon.loop import start as _start


def _spec_of(agent: Any) -> AgentSpec:
    if isinstance(agent, AgentSpec):
        return agent
    spec = getattr(agent, "spec", None)
    if not isinstance(spec, AgentSpec):
        raise TypeError(f"expected an agent or an AgentSpec, got {type(agent).__name__}")
    return spec


def start(agent: Any, input: AgentInput | str, *, run_id: str) -> Outcome:
    """Begin a run of ``agent`` (an LlmAgent or AgentSpec) on ``input``."""
    if isinstance(input, str):
        input = AgentInput.from_user_text(input)
    return _start(_spec_of(agent), input, RunId(run_id))


def advance(agent: Any, state: RunState, result: EffectResult) -> Outcome:
    """Feed ``result`` (the pending effect's result) and get the next outcome.

    Raises:
        StepError: ``result`` does not answer the pending effect, or the run
            is already over.
    """
    match transition(state, result, _spec_of(agent)):
        case Success(outcome):
            return outcome  # type: ignore[no-any-return]
        case Failure(error):
            raise error
    raise AssertionError("unreachable")


async def perform(
    agent: Any,
    effect: Effect,
    ctx: RunContext[Any] | None = None,
    *,
    run_id: str,
    interpreter: Any = None,
) -> tuple[tuple[AgentEvent, ...], EffectResult]:
    """Perform one effect of ``agent``'s run for real: ``(live events, result)``.

    With :func:`start`, :func:`advance` and :func:`helikon.dump_state`, this
    lets you run an agent step by step and stop anywhere — for instance
    before an ``ExecuteTools`` that needs a human's approval.
    """
    from helikon.interpreters import RESULT_TYPES, LiveInterpreter, RunEnv

    interp = interpreter or LiveInterpreter()
    env = RunEnv(
        _spec_of(agent),
        agent.model,
        agent.tool_map,
        agent.instructions if callable(agent.instructions) else None,
        ctx or RunContext.ephemeral(None),
        RunId(run_id),
    )
    events: list[AgentEvent] = []
    result: EffectResult | None = None
    async for item in interp.perform(effect, env):
        if type(item) in RESULT_TYPES:
            result = item  # type: ignore[assignment]
        else:
            events.append(item)  # type: ignore[arg-type]
    if result is None:
        raise StepError(f"{type(effect).__name__} was performed without a result")
    return tuple(events), result


__all__ = ["advance", "perform", "start"]
