"""The public step API: drive a run one effect at a time.

``start`` gives the first outcome of a run; ``advance`` feeds the pending
effect's result and gives the next; ``perform`` performs one effect for real.
Every shipped interpreter is built on the same machine, and so can yours:
perform ``outcome.effect`` however you like, feed its result back, stop when
the effect is :class:`~helikon.effects.Terminate`.

The machine an agent runs is completed by its run context: permissions,
hooks, guardrails, where approvals go and which secrets to redact are part of
the spec the machine reads (:func:`helikon.interpreters.build_env` is the one
place that assembles it). Pass the same ``ctx`` to ``start``, ``advance`` and
``perform`` of one run — as ``agent.run`` does.
"""

from __future__ import annotations

from typing import Any

from returns.result import Failure, Success

from helikon.agent import environment, resumed
from helikon.context import RunContext
from helikon.effects import Effect, EffectResult
from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter, RunEnv
from helikon.interpreters._drive import is_event, is_result
from helikon.interpreters._machine import LoopMachine, Machine, OutcomeLike
from helikon.items import AgentInput
from helikon.loop import AgentSpec


def prepare(agent: Any, ctx: RunContext[Any] | None = None, *, run_id: str = "run") -> RunEnv:
    """The environment a run of ``agent`` under ``ctx`` has: its complete
    spec (``env.spec``) and the objects its effects call.

    Raises:
        TypeError: ``agent`` is not a helikon agent.
    """
    if getattr(agent, "make_env", None) is None:
        raise TypeError(f"expected a helikon agent (an LlmAgent or a workflow), got {type(agent).__name__}")
    return environment(agent, ctx or RunContext.ephemeral(None), LiveInterpreter(run_id), run_id=run_id)


def _machine(agent: Any, ctx: RunContext[Any] | None) -> Machine:
    if isinstance(agent, AgentSpec):
        return LoopMachine(agent)
    env = prepare(agent, ctx)
    machine: Machine = env.machine if env.machine is not None else LoopMachine(env.spec)
    return machine


def start(
    agent: Any, input: AgentInput | str, *, run_id: str, ctx: RunContext[Any] | None = None
) -> OutcomeLike:
    """Begin a run of ``agent`` (an agent, or an ``AgentSpec``) on ``input``."""
    if isinstance(input, str):
        input = AgentInput.from_user_text(input)
    depth = ctx.agent_depth if ctx is not None else 0
    return _machine(agent, ctx).begin(input, RunId(run_id), depth)


def advance(
    agent: Any, state: Any, result: EffectResult, *, ctx: RunContext[Any] | None = None
) -> OutcomeLike:
    """Feed ``result`` (the pending effect's result) and get the next outcome.

    Raises:
        StepError: ``result`` does not answer the pending effect, or the run
            is already over.
    """
    match _machine(agent, ctx).step(state, result):
        case Success(outcome):
            stepped: OutcomeLike = outcome
            return stepped
        case Failure(error):
            raise error
    raise AssertionError("unreachable")


def pending(agent: Any, state: Any, *, ctx: RunContext[Any] | None = None) -> Effect:
    """The effect a stored ``state`` waits on (what to perform next).

    Raises:
        StepError: the state cannot be resumed with this agent.
    """
    effect: Effect = resumed(_machine(agent, ctx), state).effect
    return effect


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
    interp = interpreter or LiveInterpreter()
    env = prepare(agent, ctx, run_id=run_id)
    events: list[AgentEvent] = []
    result: EffectResult | None = None
    async for item in interp.perform(effect, env):
        if is_result(item):
            result = item
        elif is_event(item):
            events.append(item)
    if result is None:
        raise StepError(f"{type(effect).__name__} was performed without a result")
    return tuple(events), result


__all__ = ["advance", "pending", "perform", "prepare", "start"]
