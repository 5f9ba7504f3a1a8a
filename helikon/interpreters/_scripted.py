"""A synchronous, in-memory interpreter for tests.

:class:`TestInterpreter` drives the pure machine with scripted model turns
and plain Python tool functions, with no event loop at all. It streams the
same raw deltas as the live interpreter (through the same
:func:`~helikon.loop.delta_event`), so a scripted run's events match a live
run's for the same effect results.

It runs through :func:`~helikon.interpreters.drive`, the loop the live
interpreter runs (driven here without an event loop), and calls user code
through the same performer (:func:`~helikon.interpreters._perform.run_sync`),
so clock readings, guardrails, trees and children that are not helikon
machines give the events a live run gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast, final

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.agents import TreeNode, TreeOutcome, TreeSpec, TreeState, private_path
from helikon.config import RunConfig
from helikon.context import Actions, RunContext
from helikon.effects import (
    AgentRunResult,
    AgentsRan,
    AllPerformed,
    AskApprovals,
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    ModelCallFailed,
    ModelResponded,
    NotifyHooks,
    OutputStored,
    PathResult,
    PerformAll,
    RenderInstructions,
    RunAgents,
    RunHooks,
    StoreOutput,
    Terminate,
)
from helikon.errors import ModelError, OtherError, OtherModelFailure, StepError
from helikon.events import AgentEvent, emitted_at
from helikon.ids import CallId, RunId
from helikon.interpreters._children import ChildEnd, run_child
from helikon.interpreters._drive import drive
from helikon.interpreters._env import RunEnv
from helikon.interpreters._machine import OutcomeLike, TreeMachine
from helikon.interpreters._perform import (
    Call,
    Callbacks,
    approvals,
    guardrails,
    instructions,
    notify,
    run_sync,
    tool_round,
    turn_hooks,
)
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, RunState, delta_event
from helikon.model import ModelEvent, Usage
from helikon.protocols import Model

T = TypeVar("T")

#: A scripted tool: JSON arguments in, a JSON-compatible value out.
ToolFn = Callable[[JsonObject], JsonValue]


@attrs.frozen
class Step:
    """One performed effect and the result fed back."""

    effect: Effect
    result: EffectResult


@attrs.frozen
class ScriptedRun:
    """What a scripted run produced (``state`` is suspended in
    ``NeedsApproval`` when the run waits for a human)."""

    events: tuple[AgentEvent, ...]
    state: RunState | TreeState
    steps: tuple[Step, ...]


@final
class TestInterpreter:
    """Runs an agent spec synchronously against scripts.

    Governance is the machine's, so a scripted run is governed exactly like
    a live one: build the spec with :func:`helikon.prepare` (or give it a
    :class:`~helikon.loop.Governance`) and pass the same hooks, policy and
    approval handler here, as synchronous functions.

    Args:
        model: one list of model events per model call, in order; a
            :class:`~helikon.errors.ModelError` in a list fails the call there.
        tools: tool functions by name, called with the parsed arguments; a
            :class:`~helikon.errors.ToolError` becomes a tool failure, any
            other exception a crashed tool.
        instructions: renders dynamic instructions for a turn number.
        hooks: the hooks ``(ctx, event) -> decision``, in fire order.
        policy: the permission policy ``(ctx, tool, args) -> decision``.
        approval_handler: ``(request) -> Allow() | Deny(reason)``.
        ctx: the run context hooks and the policy receive.
        agents: for an agent tree, the scripted interpreter of each member
            by name (the members not named use this one); a child that is
            not a helikon machine is given here as itself (any object with
            ``run(ctx, input)``), and run whole as the live interpreter runs it.
        input_guardrails: the agent's input guardrails ``(ctx, UserText)``
            (the run context's are checked too).
        output_guardrails: the agent's output guardrails ``(ctx, ModelOutput)``.
        clock: the clock readings the machine decides time with, as the
            live interpreter's (read when a run with a timeout begins and
            after each effect of a run with a deadline); none by default.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        model: Iterable[Sequence[ModelEvent | ModelError | object]] = (),
        tools: Mapping[str, ToolFn] | None = None,
        instructions: Callable[[int], str] | None = None,
        *,
        hooks: Sequence[Callable[..., object]] = (),
        policy: Callable[..., object] | None = None,
        approval_handler: Callable[..., object] | None = None,
        ctx: RunContext[Any] | None = None,
        agents: Mapping[str, TestInterpreter | Any] | None = None,
        input_guardrails: Sequence[Callable[..., object]] = (),
        output_guardrails: Sequence[Callable[..., object]] = (),
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.scripts = [list(s) for s in model]
        self.tools = dict(tools or {})
        self.instructions = instructions
        self.hooks = tuple(hooks)
        self.policy = policy
        self.approval_handler = approval_handler
        self.ctx = ctx if ctx is not None else RunContext.ephemeral(None)
        self.agents = dict(agents or {})
        self.input_guardrails = tuple(input_guardrails)
        self.output_guardrails = tuple(output_guardrails)
        self.clock = clock

    def run(self, spec: AgentSpec | TreeSpec, input: AgentInput | str, run_id: str = "run-1") -> ScriptedRun:
        """Run to a terminal state (or a suspension) and return the events and
        steps. ``spec`` is an agent's, or an agent tree's (then ``agents``
        scripts each member of the tree by name)."""
        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        return self._drive(spec, input, run_id, None)

    def resume(self, spec: AgentSpec | TreeSpec, outcome: Outcome | TreeOutcome) -> ScriptedRun:
        """Continue from ``outcome`` (for instance a reloaded state's); stops
        at ``Terminate`` or at an ``AwaitApproval`` (the run is suspended)."""
        return self._drive(spec, AgentInput(()), outcome.state.run_id, outcome)

    def _drive(
        self, spec: AgentSpec | TreeSpec, input: AgentInput, run_id: str, first: OutcomeLike | None
    ) -> ScriptedRun:
        """The run through :func:`~helikon.interpreters.drive`, the loop the
        live interpreter runs, driven without an event loop."""
        performer = _Scripted(self, first)
        env = _env_of(spec, self.ctx, RunId(run_id))
        events: list[AgentEvent] = []
        try:
            for event in iterate_sync(drive(performer, env, input, first)):
                events.append(event)
        except _Suspended:
            pass  # the run waits for a human: its state is in NeedsApproval
        assert performer.current is not None
        state = performer.current.state
        assert isinstance(state, RunState | TreeState)
        return ScriptedRun(tuple(events), state, tuple(performer.steps))

    def _perform_tree(self, state: TreeState, effect: Effect, emit: list[AgentEvent]) -> EffectResult:
        """An agent tree's effect: each sub-machine's with the interpreter
        that scripts its agent (``agents``), one after another, in order."""
        if type(effect) is not PerformAll:
            return self._member(state.root.agent).perform(effect, emit)
        results: list[PathResult] = []
        for at in effect.effects:
            sink: list[AgentEvent] = []
            if type(at.effect) is RunAgents:
                results.append(PathResult(at.path, self._opaque(at.effect, sink)))
            else:
                agent = _agent_at(state.root, at.path)
                results.append(PathResult(at.path, self._member(agent).perform(at.effect, sink)))
            if not private_path(state.root, at.path):  # an agent used as a tool: private
                emit.extend(emitted_at(at.path, e) for e in sink)  # marked with the member's path
        return AllPerformed(tuple(results))

    def _opaque(self, effect: RunAgents, emit: list[AgentEvent]) -> EffectResult:
        """A child that is not a helikon machine (``agents`` maps its name to
        any object with ``run(ctx, input)``), run whole as the live
        interpreter runs it (:func:`~helikon.interpreters._children.run_child`)."""
        (run,) = effect.runs
        agent = self.agents.get(run.agent)
        if agent is None or isinstance(agent, TestInterpreter):
            missing = OtherError(f"no child agent {run.key!r}")
            return AgentsRan((AgentRunResult(run.key, "", Usage(), missing),))
        ctx = attrs.evolve(self.ctx, agent_depth=effect.depth)
        for item in iterate_sync(run_child(agent, ctx, run.input)):
            if isinstance(item, ChildEnd):
                ended = AgentRunResult(run.key, item.output, item.usage, item.error, item.escalated)
                return AgentsRan((ended,))
            emit.append(item)
        raise StepError(f"child agent {run.key!r} ended without a result")

    def _member(self, agent: str) -> TestInterpreter:
        found = self.agents.get(agent, self)
        return found if isinstance(found, TestInterpreter) else self

    def perform(self, effect: Effect, emit: list[AgentEvent]) -> EffectResult:
        """Perform one effect, appending live events to ``emit``."""
        match effect:
            case CallModel():
                return self._call_model(emit)
            case ExecuteTools(steps=steps):
                return run_sync(tool_round(steps, self._callbacks()))
            case AskApprovals(requests=requests):
                return run_sync(approvals(requests, self._callbacks()))
            case RenderInstructions(turn=turn):
                if self.instructions is None:
                    raise StepError("no instructions function was given")
                return run_sync(instructions(turn, self._callbacks()))
            case RunHooks(turn=turn):
                return run_sync(turn_hooks(turn, self._callbacks()))
            case CheckGuardrails(stage=stage, text=text):
                return run_sync(guardrails(stage, text, self._callbacks()))
            case NotifyHooks(event=event):
                return run_sync(notify(event, self._callbacks()))
            case StoreOutput(key=key, text=text):
                self.ctx.state[key] = text
                return OutputStored()
            case Handoff() | RunAgents() | AwaitApproval() | PerformAll() | Terminate():
                raise StepError(f"the test interpreter cannot perform {type(effect).__name__}")

    def _callbacks(self) -> Callbacks:
        render = self.instructions
        tools = self.tools

        def tool(call_id: CallId, name: str, args: JsonValue, actions: Actions) -> Call | None:
            fn = tools.get(name)
            return None if fn is None else Call(fn, (args,))

        return Callbacks(
            self.ctx,
            self.hooks,
            self.policy,
            self.approval_handler,
            self.input_guardrails,
            self.output_guardrails,
            None if render is None else (lambda turn: Call(render, (turn,))),
            tool,
        )

    def _call_model(self, emit: list[AgentEvent]) -> EffectResult:
        if not self.scripts:
            return ModelCallFailed(OtherModelFailure("the model script ran out"))
        streamed: list[ModelEvent] = []
        for item in self.scripts.pop(0):
            if isinstance(item, ModelError):
                return ModelCallFailed(item.failure, tuple(streamed))
            event: ModelEvent = item  # type: ignore[assignment]
            streamed.append(event)
            delta = delta_event(event)
            if delta is not None:
                emit.append(delta)
        return ModelResponded(tuple(streamed))


class _Suspended(Exception):
    """The run reached an ``AwaitApproval``: it waits for a human."""


class _Scripted:
    """The performer :func:`drive` calls for a scripted run: each effect
    performed by the :class:`TestInterpreter` (or, in a tree, the one that
    scripts the agent at the effect's path), its clock as the machine's."""

    def __init__(self, interpreter: TestInterpreter, first: OutcomeLike | None) -> None:
        self.interpreter = interpreter
        self.now = interpreter.clock  # None: drive reads no clock
        self.current: OutcomeLike | None = first
        self.steps: list[Step] = []

    def new_run_id(self) -> RunId:
        raise StepError("a scripted run is given its id")  # pragma: no cover - drive never asks

    def observe(self, env: RunEnv, outcome: OutcomeLike) -> None:
        self.current = outcome

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        if type(effect) is AwaitApproval:
            raise _Suspended()
        emit: list[AgentEvent] = []
        state = self.current.state if self.current is not None else None
        if isinstance(state, TreeState):
            result = self.interpreter._perform_tree(state, effect, emit)
        else:
            result = self.interpreter.perform(effect, emit)
        self.steps.append(Step(effect, result))
        for event in emit:
            yield event
        yield result


def iterate_sync(stream: AsyncIterator[T]) -> Iterator[T]:
    """The items of ``stream``, without an event loop: for streams that never
    wait on one (a scripted run's); one that does is a ``StepError``."""
    while True:
        step = cast(Coroutine[Any, Any, T], stream.__anext__())
        try:
            step.send(None)
        except StopIteration as done:
            yield done.value
            continue
        except StopAsyncIteration:
            return
        step.close()
        raise StepError("a scripted run waited on an event loop: use the live interpreter")


def _env_of(spec: AgentSpec | TreeSpec, ctx: RunContext[Any], run_id: RunId) -> RunEnv:
    """A scripted run's environment: the spec and its machine (the run's own
    timeout is the agent's, or the tree root's)."""
    if isinstance(spec, AgentSpec):
        return RunEnv(spec, _NO_MODEL, {}, None, ctx, run_id)
    root = spec.member(spec.root)
    own = AgentSpec(spec.root, config=RunConfig(timeout=root.timeout if root is not None else None))
    if root is not None and isinstance(root.spec, AgentSpec):
        own = root.spec
    return RunEnv(own, _NO_MODEL, {}, None, ctx, run_id, machine=TreeMachine(spec))


class _NoModel:
    """A scripted run's model is its script (see :meth:`TestInterpreter.perform`)."""

    def invoke(self, request: object, cancel: object) -> AsyncIterator[ModelEvent]:
        raise StepError("a scripted run calls no model")  # pragma: no cover


_NO_MODEL = cast(Model, _NoModel())


def _agent_at(node: TreeNode, path: tuple[str, ...]) -> str:
    """The name of the agent whose sub-machine is at ``path`` below ``node``."""
    for key in path:
        node = next(child.node for child in node.children if child.key == key)
    return node.agent


__all__ = ["ScriptedRun", "Step", "TestInterpreter", "ToolFn"]
