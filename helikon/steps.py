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

A run is compiled once: ``start`` builds its environment (the agent tree,
the secrets to redact, the deadline of ``RunConfig.timeout``) and
``advance``/``perform`` of the same run id reuse it, so the timeout bounds
the run, not each call. A context whose governance differs from the one the
run started with is refused with :class:`~helikon.errors.StepError` naming
what changed.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

import attrs
from returns.result import Failure, Success

from helikon.agent import check_definition, environment, resumed
from helikon.agents import TreeState
from helikon.context import RunContext
from helikon.effects import AwaitApproval, Effect, EffectResult
from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, RunEnv
from helikon.interpreters._drive import is_event, is_result, timed
from helikon.interpreters._machine import LoopMachine, Machine, OutcomeLike
from helikon.interpreters._recording import tree_of
from helikon.items import AgentInput
from helikon.loop import AgentSpec, RunState, on_time
from helikon.trace import fingerprint, governance_of


def prepare(agent: Any, ctx: RunContext[Any] | None = None, *, run_id: str = "run") -> RunEnv:
    """The environment a run of ``agent`` under ``ctx`` has: its complete
    spec (``env.spec``) and the objects its effects call.

    Raises:
        TypeError: ``agent`` is not a helikon agent.
    """
    if getattr(agent, "make_env", None) is None:
        raise TypeError(f"expected a helikon agent (an LlmAgent or a workflow), got {type(agent).__name__}")
    return environment(agent, ctx or RunContext.ephemeral(None), LiveInterpreter(run_id), run_id=run_id)


@attrs.frozen
class _Compiled:
    """A run compiled once: its agent, the context it started with, its world."""

    agent: Any
    ctx: RunContext[Any] | None
    env: RunEnv
    machine: Machine


#: The runs the step API compiled, by run id (the most recent few hundred):
#: ``start`` compiles a run; ``advance`` and ``perform`` of the same run id
#: reuse its environment (tree, secrets, deadline) instead of rebuilding it.
_RUNS: OrderedDict[str, _Compiled] = OrderedDict()
_KEEP = 256


def _compile(agent: Any, ctx: RunContext[Any] | None, run_id: str) -> _Compiled:
    env = prepare(agent, ctx, run_id=run_id)
    machine: Machine = env.machine if env.machine is not None else LoopMachine(env.spec)
    compiled = _Compiled(agent, ctx, env, machine)
    _RUNS[run_id] = compiled
    _RUNS.move_to_end(run_id)
    while len(_RUNS) > _KEEP:
        _RUNS.popitem(last=False)
    return compiled


def _changed(before: RunEnv, after: RunEnv) -> list[str]:
    """What differs between two environments' governance, by name."""
    old, new = governance_of(before.spec), governance_of(after.spec)
    changed = [key for key in sorted(old) if old[key] != new.get(key)]
    if before.spec.governance.secrets != after.spec.governance.secrets:
        changed.append("secrets")
    return changed


def _compiled(agent: Any, ctx: RunContext[Any] | None, run_id: str) -> _Compiled:
    """The compiled run ``run_id`` of ``agent``: the one ``start`` made when
    the agent and context are the same; a context whose governance differs
    from the one the run started with is refused."""
    known = _RUNS.get(run_id)
    if known is not None and known.agent is agent and (ctx is None or known.ctx is ctx):
        _RUNS.move_to_end(run_id)
        return known
    if known is None or known.agent is not agent:
        return _compile(agent, ctx, run_id)
    fresh = prepare(agent, ctx, run_id=run_id)
    changed = _changed(known.env, fresh)
    if changed:
        raise StepError(
            f"run {run_id!r} was started under a run context with other governance: "
            f"{', '.join(changed)} changed. Pass the context the run started with"
        )
    return known


def _world(
    agent: Any, ctx: RunContext[Any] | None, run_id: str | None = None
) -> tuple[Machine, RunEnv | None]:
    if isinstance(agent, AgentSpec):
        return LoopMachine(agent), None
    if run_id is None:
        env = prepare(agent, ctx)
        return (env.machine if env.machine is not None else LoopMachine(env.spec)), env
    compiled = _compiled(agent, ctx, run_id)
    return compiled.machine, compiled.env


def start(
    agent: Any,
    input: AgentInput | str,
    *,
    run_id: str,
    ctx: RunContext[Any] | None = None,
    recorder: RecordingInterpreter | None = None,
    now: float | None = None,
) -> OutcomeLike:
    """Begin a run of ``agent`` (an agent, or an ``AgentSpec``) on ``input``.

    ``now`` is a clock reading (seconds, any clock you keep using for this
    run): with it, the state keeps the run's deadline (``RunConfig.timeout``
    after ``now``), and :func:`advance` given later readings decides when the
    run is out of time — in this process or another.

    The state records the fingerprint of the agent's definition, so that
    :func:`pending` and ``agent.resume`` refuse to continue it with another.
    With ``recorder``, the run is recorded as ``agent.run`` would record it:
    pass the same recorder to :func:`perform` (as its interpreter) and to
    :func:`advance`, and ``recorder.trace`` is the run's trace.
    """
    if isinstance(input, str):
        input = AgentInput.from_user_text(input)
    depth = ctx.agent_depth if ctx is not None else 0
    if not isinstance(agent, AgentSpec):
        _RUNS.pop(run_id, None)  # a fresh start compiles afresh
    machine, env = _world(agent, ctx, run_id)
    timeout = (env.spec if env is not None else agent).config.timeout
    began = now if timeout is not None or machine.timed else None
    outcome = machine.begin(input, RunId(run_id), depth, began)
    state = outcome.state
    if isinstance(state, RunState | TreeState):  # a bare workflow machine's state records none
        stamp = fingerprint(agent) if env is None else fingerprint(env.spec, tree_of(env))
        outcome = attrs.evolve(cast(Any, outcome), state=attrs.evolve(state, definition=stamp))
    outcome = timed(outcome, began, timeout)
    if recorder is not None:
        recorder.new_run_id()  # a fresh recording
        if began is not None:
            recorder.note_reading(began)
        _observe(recorder, env, outcome)
    return outcome


def advance(
    agent: Any,
    state: Any,
    result: EffectResult,
    *,
    ctx: RunContext[Any] | None = None,
    recorder: RecordingInterpreter | None = None,
    now: float | None = None,
) -> OutcomeLike:
    """Feed ``result`` (the pending effect's result) and get the next outcome.

    ``now`` is the clock reading taken when ``result`` came back: a reading at
    or past the state's deadline ends the run with ``TimedOut`` (see
    :mod:`helikon.loop._clock`); without one, time is not checked.

    Raises:
        StepError: ``result`` does not answer the pending effect, or the run
            is already over.
    """
    machine, env = _world(agent, ctx, state.run_id)
    asked = resumed(machine, state).effect if recorder is not None else None
    if now is not None and (machine.timed or getattr(state, "deadline", None) is not None):
        if recorder is not None:
            recorder.note_reading(now)
        result = on_time(state, result, now)
    else:
        now = None  # as drive: no reading is taken where no deadline is kept
    match machine.step(state, result, now):
        case Success(outcome):
            stepped: OutcomeLike = outcome
            if recorder is not None:
                if type(asked) is AwaitApproval and env is not None:
                    # Nobody performs a suspension: the human's answer is its step.
                    recorder.answered(env, asked, result)
                _observe(recorder, env, stepped)
            return stepped
        case Failure(error):
            raise error
    raise AssertionError("unreachable")


def _observe(recorder: RecordingInterpreter, env: RunEnv | None, outcome: OutcomeLike) -> None:
    if env is None:
        raise TypeError("recording a run needs the agent, not a bare AgentSpec")
    recorder.observe(env, outcome)


def pending(
    agent: Any,
    state: Any,
    *,
    ctx: RunContext[Any] | None = None,
    allow_changed_definition: bool = False,
) -> Effect:
    """The effect a stored ``state`` waits on: what to perform next.

    This is how a scheduler picks up a run it loaded with
    :func:`helikon.load_state`; the effect is a function of the state, so
    nothing else needs saving. The state must fit the agent: its own agent,
    its conversation consistent, and (for a state begun by :func:`start`)
    the same definition, unless ``allow_changed_definition``.

    Raises:
        StepError: the state cannot be resumed with this agent, naming why.
    """
    machine, env = _world(agent, ctx, getattr(state, "run_id", None))
    if env is not None:
        check_definition(env, state, allow_changed_definition)
    effect: Effect = resumed(machine, state).effect
    return effect


#: :func:`pending` by the name the step API's documentation uses.
pending_effect = pending


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
    _, compiled_env = _world(agent, ctx, run_id)
    if compiled_env is None:
        raise TypeError("performing an effect needs the agent, not a bare AgentSpec")
    env = compiled_env
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


__all__ = ["advance", "pending", "pending_effect", "perform", "prepare", "start"]
