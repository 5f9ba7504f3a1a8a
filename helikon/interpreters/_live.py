"""The live interpreter: performs effects with real models and tools.

It runs under trio or asyncio (through anyio). Model streams are consumed
chunk by chunk, each chunk turned into its raw delta event at once with the
pure :func:`~helikon.loop.delta_event`. Tool calls of one turn, and an
agent tree's branches, run concurrently (:meth:`LiveInterpreter.perform_part`):
each call's pipeline and each branch moves on as soon as its own step is
answered, the round's calls under ``parallel_tool_call_limit``.

Cancellation: tools and instructions run inside a cancel scope tied to the
run's token and deadline, so a cancel interrupts them at once. A round of one
call of a tool that cannot suspend (an ``async def`` with no ``await``, a
``def`` with ``thread=False``) runs without one when no deadline applies:
it reaches no checkpoint, so no scope could interrupt it, and the token is
read when it returns. A model
stream is checked between chunks (a cancel scope must not stay open across
the ``yield`` that streams a delta); model adapters receive the token and
wrap their network waits in :meth:`CancellationToken.scope`.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from types import AsyncGeneratorType
from typing import Any, final

import attrs

from helikon.context import Actions
from helikon.effects import (
    AgentRun,
    AgentRunResult,
    AgentsRan,
    AllPerformed,
    AskApprovals,
    AtPath,
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    NotifyHooks,
    OutputStored,
    PathResult,
    PerformAll,
    RenderInstructions,
    RunAgents,
    RunHooks,
    RunInterrupted,
    StepResult,
    StoreOutput,
    Terminate,
    ToolsExecuted,
)
from helikon.errors import (
    Cancelled,
    ModelError,
    OtherError,
    OtherModelFailure,
    RunSuspended,
    StepError,
    TransportFailure,
)
from helikon.events import AgentEvent, emitted_at
from helikon.ids import RunId
from helikon.interpreters._children import ChildEnd, run_child
from helikon.interpreters._drive import CLOCKED, close_quietly, due, interruption, is_event, is_result
from helikon.interpreters._env import RunEnv
from helikon.interpreters._perform import (
    approvals,
    guardrails,
    instructions,
    notify,
    run_async,
    run_tool_round,
    step_result,
    tool_answered,
    turn_hooks,
)
from helikon.interpreters._steps import _tool_context, callbacks_of
from helikon.interpreters._tree_env import child_of, env_at, is_private
from helikon.loop import Raised
from helikon.loop._deltas import _MAKERS as _DELTAS
from helikon.model import ModelEvent, Usage
from helikon.tools._decorator import FunctionTool, at_once, context_free

#: When work is cut short, on the event loop's clock, and the timeout that set it.
Limit = tuple[float, float] | None


@final
class LiveInterpreter:
    """Performs effects for real. The default interpreter of ``agent.run``.

    Args:
        run_id: use this id for every run (tests); by default each run gets
            a fresh random one.
        clock: the clock the machine is told the time with (seconds;
            ``time.time`` by default, so a deadline kept in a saved state
            holds in another process). Read when a run with a timeout
            begins and after each effect of a run with a deadline.
        lock_step: perform each wave whole and feed its answers at once, in
            order, as earlier versions did (see
            :mod:`helikon.interpreters._waves`): a branch then waits for its
            siblings' steps, and the live events of several members (model
            deltas) come when the wave is over, but a recording no longer
            depends on which part finished first, so it is the same bytes
            every time (golden traces are recorded this way). Without it, a
            wave's events stream as they happen.
    """

    def __init__(
        self, run_id: str | None = None, *, clock: Callable[[], float] | None = None, lock_step: bool = False
    ) -> None:
        self._run_id = run_id
        self._clock = clock if clock is not None else time.time
        if lock_step:
            self.__dict__["perform_part"] = None  # drive then performs waves whole

    def now(self) -> float:
        """The clock reading the machine decides time with."""
        return self._clock()

    def new_run_id(self) -> RunId:
        return RunId(self._run_id if self._run_id is not None else uuid.uuid4().hex)

    def perform(
        self, effect: Effect, env: RunEnv, at: tuple[Limit] | None = None
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        """Perform ``effect`` in ``env``, its work cut short at the machine's
        deadline (:func:`due`; ``at`` gives it for an effect of a tree's wave)."""
        if type(effect) is CallModel:  # a model turn streams from one generator, not two
            return self._call_model(effect, env, at)
        return self._perform(effect, env, at)

    async def _perform(
        self, effect: Effect, env: RunEnv, at: tuple[Limit] | None
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        limit = due(env) if at is None else at[0]
        if type(effect) in _PLAIN:
            yield await self._plain(effect, env, limit)
            return
        stopped = interruption(env, limit)
        if stopped is not None:
            yield stopped
            return
        match effect:
            case AwaitApproval(requests=requests):
                raise RunSuspended(requests)
            case PerformAll(effects=effects):
                async for item in self._perform_all(effects, env):
                    yield item
            case RunAgents(runs=runs, depth=depth):
                async for item in self._run_opaque(runs, depth, env):
                    yield item
            case Handoff():
                raise StepError("a handoff is the agent tree's to perform (see helikon.agents)")
            case Terminate():
                raise StepError("there is nothing to perform after Terminate")

    def perform_part(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        """Perform one part of a wave (one tool step, one path's effect):
        :func:`~helikon.interpreters.drive` runs a wave's parts concurrently
        and feeds each one's result as soon as it comes."""
        return self.perform(effect, env)

    def result_of(self, effect: Effect, env: RunEnv) -> Awaitable[EffectResult] | None:
        """The result of an effect that streams no events, as one awaitable
        (what :func:`~helikon.interpreters._drive.drive` awaits instead of
        iterating :meth:`perform`); None for an effect that may stream."""
        kind = type(effect)
        if kind not in _PLAIN:
            return None
        # ``due``'s own first test, without its call: no clock reading, no deadline
        if env.deadline is not None or env.derived.get(CLOCKED) is not None:
            return self._plain(effect, env, due(env))
        if kind is ExecuteTools:
            # A round of one call of a tool that cannot suspend, in a run that
            # is not cancelled and has no deadline: its own coroutine at once.
            token = env.ctx.cancel
            steps = effect.steps  # type: ignore[union-attr]
            step = steps[0] if len(steps) == 1 else None
            if type(step) is InvokeTool and not token.cancelled and token.deadline is None:
                found = _quick_tool(env, step.tool)
                if found is not None:
                    return _call_at_once(step, found, env)
        return self._plain(effect, env, None)

    async def _plain(self, effect: Effect, env: RunEnv, limit: Limit) -> EffectResult:
        token = env.ctx.cancel
        # a chore is the machine's bookkeeping, never interrupted; without a
        # limit, only a cancelled run is (what ``interruption`` checks first)
        if type(effect) not in _CHORES and (limit is not None or token.cancelled):
            stopped = interruption(env, limit)
            if stopped is not None:
                return stopped
        match effect:
            case ExecuteTools(steps=steps):
                if len(steps) == 1 and type(steps[0]) is InvokeTool:
                    step = steps[0]  # a round of one call of a function tool (the common round)
                    if limit is None and token.deadline is None:
                        found = _quick_tool(env, step.tool)  # one that cannot suspend?
                        if found is not None:
                            return await _call_at_once(step, found, env)
                    tool = env.tools.get(step.tool)
                    if type(tool) is FunctionTool:
                        return await _call_scoped(step, tool, env, limit)
                most = env.spec.config.parallel_tool_call_limit
                return await _interruptible(run_tool_round(steps, callbacks_of(env), most), env, limit)
            case AskApprovals(requests=requests):
                return await _interruptible(run_async(approvals(requests, callbacks_of(env))), env, limit)
            case CheckGuardrails(stage=stage, text=text):
                return await _interruptible(run_async(guardrails(stage, text, callbacks_of(env))), env, limit)
            case RunHooks(turn=turn):
                return await _interruptible(run_async(turn_hooks(turn, callbacks_of(env))), env, limit)
            case RenderInstructions(turn=turn, state=written):
                for key, text in written:  # the run-scoped state, as the run's state holds it
                    env.ctx.state[key] = text
                return await _interruptible(run_async(instructions(turn, callbacks_of(env))), env, limit)
            case NotifyHooks(event=event):
                return await run_async(notify(event, callbacks_of(env)))
            case StoreOutput(key=key, text=text):
                env.ctx.state[key] = text  # the book's run-scoped state[key]
                return OutputStored()
        raise StepError(f"{type(effect).__name__} is not a plain effect")

    async def _perform_all(
        self, effects: tuple[AtPath, ...], env: RunEnv
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        """The effects of several sub-machines of a tree, each with its own
        environment; one streams live, several are joined in order."""

        def world(at: AtPath) -> RunEnv:
            # An opaque child runs whole from its parent's environment.
            path = at.path[:-1] if type(at.effect) is RunAgents else at.path
            return env_at(env, path, self)

        def limit(at: AtPath) -> Limit:
            # the machine's deadline for that path (a member's own, or its parents')
            return due(env, at.path)

        if len(effects) == 1:
            (only,) = effects
            result: EffectResult | None = None
            private = is_private(env, only.path, self)
            async for item in self.perform(only.effect, world(only), (limit(only),)):
                if is_result(item):
                    result = item
                elif not private and is_event(item):
                    yield emitted_at(only.path, item)
            assert result is not None
            yield AllPerformed((PathResult(only.path, result),))
            return
        import anyio

        sinks: list[list[AgentEvent]] = [[] for _ in effects]
        results: list[EffectResult | None] = [None] * len(effects)

        async def one(index: int) -> None:
            at = effects[index]
            async for item in self.perform(at.effect, world(at), (limit(at),)):
                if is_result(item):
                    results[index] = item
                elif is_event(item):
                    sinks[index].append(emitted_at(at.path, item))

        async with anyio.create_task_group() as group:
            for index in range(len(effects)):
                group.start_soon(one, index)
        for at, sink in zip(effects, sinks, strict=True):  # in tree order, whatever order they finished in
            if is_private(env, at.path, self):
                continue  # an agent used as a tool: its turns are its own
            for event in sink:
                yield event
        yield AllPerformed(
            tuple(PathResult(at.path, r) for at, r in zip(effects, results, strict=True) if r is not None)
        )

    async def _run_opaque(
        self, runs: tuple[AgentRun, ...], depth: int, env: RunEnv
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        """A child that is not a helikon machine, run whole: its events
        (forwarded live, as :func:`run_child` gives them), then its result."""
        (run,) = runs
        agent, sub_ctx = child_of(env, run.key)
        if agent is None:
            missing = OtherError(f"no child agent {run.key!r}")
            yield AgentsRan((AgentRunResult(run.key, "", Usage(), missing),))
            return
        ctx = sub_ctx if sub_ctx is not None else attrs.evolve(env.ctx, agent_depth=depth)
        async for item in run_child(agent, ctx, run.input):
            if isinstance(item, ChildEnd):
                ended = AgentRunResult(run.key, item.output, item.usage, item.error, item.escalated)
                yield AgentsRan((ended,))
            else:
                yield item

    async def _call_model(
        self, effect: CallModel, env: RunEnv, at: tuple[Limit] | None
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        if at is not None:
            limit = at[0]
        else:  # ``due``'s own first test, without its call
            limit = None if env.deadline is None and env.derived.get(CLOCKED) is None else due(env)
        token = env.ctx.cancel
        if limit is not None or token.cancelled:
            stopped = interruption(env, limit)
            if stopped is not None:
                yield stopped
                return
        events: list[ModelEvent] = []
        deadline = limit[0] if limit is not None else None
        # The model gets a token that also carries the run's deadline, so an
        # adapter's waits under ``cancel.scope()`` end at the timeout too.
        cancel = token if deadline is None else token.child(deadline)
        try:
            stream = env.model.invoke(effect.request, cancel)
            spent = False  # nothing left to close
            try:
                async for event in stream:
                    events.append(event)
                    make = _DELTAS.get(type(event))  # what ``delta_event`` does, without its frame
                    if make is not None:
                        delta = make(event)
                        if delta is not None:
                            yield delta
                    if cancel.cancelled:
                        break
                    if deadline is not None and len(events) % 64 == 0 and interruption(env, limit):
                        break
                else:  # a spent async generator has nothing left to close
                    spent = isinstance(stream, AsyncGeneratorType)
            except GeneratorExit:
                # The run is closed mid-stream: the model's stream goes with it,
                # and a failure closing it is no answer (none can be given now).
                spent = True
                await close_quietly(stream)
                raise
            finally:
                if not spent:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
        except ModelError as exc:
            yield ModelCallFailed(exc.failure, tuple(events))
            return
        except (OSError, EOFError) as exc:
            yield ModelCallFailed(TransportFailure(f"{type(exc).__name__}: {exc}"), tuple(events))
            return
        except Exception as exc:  # a model adapter bug must not crash the run
            yield ModelCallFailed(OtherModelFailure(f"{type(exc).__name__}: {exc}"), tuple(events))
            return
        finally:
            if cancel is not token:
                cancel.detach()
        # A model adapter may end its stream early when the deadline passes
        # (rather than raise), so a stream past the deadline is not an answer.
        stopped = interruption(env, limit) if limit is not None or token.cancelled else None
        yield stopped if stopped is not None else ModelResponded(tuple(events))


#: Where a run's environment keeps, by name, which of its tools cannot suspend.
_QUICK = "tools at once"


def _quick_tool(env: RunEnv, name: str) -> FunctionTool[..., Any] | None:
    """The run's tool ``name`` if its calls cannot suspend (see
    :func:`~helikon.tools._decorator.at_once`); each name looked at once per run."""
    quick = env.derived.get(_QUICK)
    if quick is None:
        quick = env.derived[_QUICK] = {}
    found: FunctionTool[..., Any] | None
    try:
        found = quick[name]
    except KeyError:
        found = quick[name] = at_once(env.tools.get(name))
    return found


async def _call_at_once(step: InvokeTool, tool: FunctionTool[..., Any], env: RunEnv) -> EffectResult:
    """What ``_interruptible(run_tool_round((step,), ...))`` gives for a run
    with no deadline, without the cancel scope: the call never reaches a
    checkpoint, so no scope could interrupt it, and with no deadline the
    effective deadline the tool could read is the same. A tool that does not
    read its context gets none (``invoke`` ignores it)."""
    actions = None if context_free(tool) else Actions()  # escalating needs the context
    ctx: Any = None if actions is None else _tool_context(env, step.call_id, actions)
    result = await _answer(step, tool, ctx)
    if env.ctx.cancel.cancelled:  # the tool fired the token itself
        return _cancelled()
    return ToolsExecuted((result,), actions is not None and actions.escalated)


async def _call_scoped(
    step: InvokeTool, tool: FunctionTool[..., Any], env: RunEnv, limit: Limit
) -> EffectResult:
    """What ``_interruptible(run_tool_round((step,), ...), env, limit)``
    gives for a round of one call of a function tool (one that can suspend,
    or any in a run with a deadline): the tool's own coroutine awaited in the
    round's cancel scope, with no call record or answer in between (the
    live interpreter's waves make each call of a turn a round of its own)."""
    token = env.ctx.cancel
    actions = None if context_free(tool) else Actions()
    ctx: Any = None if actions is None else _tool_context(env, step.call_id, actions)
    result: StepResult | None = None
    deadline = limit[0] if limit is not None else token.deadline
    with _cancel_scope(env, math.inf if deadline is None else deadline) as scope:
        remove = token.on_cancel(scope.cancel)
        try:
            result = await _answer(step, tool, ctx)
        finally:
            remove()
    if result is None or token.cancelled:
        return interruption(env, limit) or _cancelled()
    return ToolsExecuted((result,), actions is not None and actions.escalated)


async def _answer(step: InvokeTool, tool: FunctionTool[..., Any], ctx: Any) -> StepResult:
    """The step result of the tool's own call (what ``answer_async`` of the
    tool's :class:`Call` and ``step_result`` give); a cancellation propagates."""
    try:
        value = await tool.invoke(ctx, step.args)  # type: ignore[arg-type]  # as the tool's Call passes it
    except Exception as exc:
        return step_result(step, Raised(exc))
    return tool_answered(step.call_id, value)


async def _interruptible(work: Awaitable[EffectResult], env: RunEnv, limit: Limit) -> EffectResult:
    """``work`` under the run's cancel token and ``limit`` (an interruption
    result if either fires first, or if the run was cancelled meanwhile).
    Work that completed is reported as it is, even past the deadline: what
    becomes of it is the machine's decision, from the clock reading drive
    takes next (see :mod:`helikon.loop._clock`)."""
    token = env.ctx.cancel
    result: EffectResult | None = None
    # What ``token.scope(deadline)`` does, without its context-manager
    # generator, and with the event loop's own scope (this wraps every tool
    # round, the hot path of a run).
    deadline = limit[0] if limit is not None else token.deadline
    with _cancel_scope(env, math.inf if deadline is None else deadline) as scope:
        remove = token.on_cancel(scope.cancel)
        try:
            result = await work
        finally:
            remove()
    if result is None or token.cancelled:
        return interruption(env, limit) or _cancelled()
    return result


#: Where a run's environment keeps how it makes a cancel scope.
_SCOPES = "cancel scopes"


def _cancel_scope(env: RunEnv, deadline: float) -> Any:
    """A cancel scope of the event loop the run is on: trio's own under trio
    (what ``anyio.CancelScope`` wraps there, without the wrapper and the
    backend look-up it makes each time), anyio's otherwise. The loop is
    looked up once per run."""
    make = env.derived.get(_SCOPES)
    if make is None:
        make = env.derived[_SCOPES] = _scope_maker()
    return make(deadline)


def _scope_maker() -> Callable[[float], Any]:
    import sniffio

    if sniffio.current_async_library() == "trio":
        import trio

        return lambda deadline: trio.CancelScope(deadline=deadline)
    import anyio

    return lambda deadline: anyio.CancelScope(deadline=deadline)


#: Effects that stream no events: performed to one result, no async generator.
_PLAIN = frozenset(
    {ExecuteTools, AskApprovals, CheckGuardrails, RunHooks, RenderInstructions, NotifyHooks, StoreOutput}
)

#: Effects that only record what the machine decided (observing hooks, a
#: stored output): performed even past the deadline, as every interpreter does.
_CHORES = (NotifyHooks, StoreOutput)


def _cancelled() -> EffectResult:
    return RunInterrupted(Cancelled())


__all__ = ["LiveInterpreter"]
