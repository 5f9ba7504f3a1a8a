"""A synchronous, in-memory interpreter for tests.

:class:`TestInterpreter` drives the pure machine with scripted model turns
and plain Python tool functions, with no event loop at all. It streams the
same raw deltas as the live interpreter (through the same
:func:`~helikon.loop.delta_event`), so a scripted run's events match a live
run's for the same effect results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, final

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.agents import TreeNode, TreeOutcome, TreeSpec, TreeState, private_path, start_tree, step_tree
from helikon.context import Actions, RunContext
from helikon.effects import (
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
from helikon.errors import ModelError, OtherModelFailure, StepError
from helikon.events import AgentEvent, emitted_at
from helikon.ids import CallId, RunId
from helikon.interpreters._drive import timed
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
from helikon.loop import AgentSpec, Outcome, RunState, delta_event, on_time, start, transition
from helikon.model import ModelEvent

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
            by name (the members not named use this one).
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
        agents: Mapping[str, TestInterpreter] | None = None,
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

    def run(
        self, spec: AgentSpec | TreeSpec, input: AgentInput | str, run_id: str = "run-1"
    ) -> ScriptedRun:
        """Run to a terminal state (or a suspension) and return the events and
        steps. ``spec`` is an agent's, or an agent tree's (then ``agents``
        scripts each member of the tree by name)."""
        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        first: Outcome | TreeOutcome
        if isinstance(spec, TreeSpec):
            first = start_tree(spec, input, RunId(run_id))
        else:
            first = start(spec, input, RunId(run_id))
        timeout = _timeout_of(spec)
        if self.clock is not None and timeout is not None:
            first = timed(first, self.clock(), timeout)
        return self.resume(spec, first)

    def resume(self, spec: AgentSpec | TreeSpec, outcome: Outcome | TreeOutcome) -> ScriptedRun:
        """Continue from ``outcome`` (for instance a reloaded state's); stops
        at ``Terminate`` or at an ``AwaitApproval`` (the run is suspended)."""
        events: list[AgentEvent] = list(outcome.events)
        steps: list[Step] = []
        while type(outcome.effect) is not Terminate and type(outcome.effect) is not AwaitApproval:
            if isinstance(outcome, TreeOutcome):
                result = self._perform_tree(outcome.state, outcome.effect, events)
            else:
                result = self.perform(outcome.effect, events)
            steps.append(Step(outcome.effect, result))
            if self.clock is not None and outcome.state.deadline is not None:
                result = on_time(outcome.state, result, self.clock())
            outcome = _step(spec, outcome, result)
            events.extend(outcome.events)
        return ScriptedRun(tuple(events), outcome.state, tuple(steps))

    def _perform_tree(self, state: TreeState, effect: Effect, emit: list[AgentEvent]) -> EffectResult:
        """An agent tree's effect: each sub-machine's with the interpreter
        that scripts its agent (``agents``), one after another, in order."""
        if type(effect) is not PerformAll:
            return self._member(state.root.agent).perform(effect, emit)
        results: list[PathResult] = []
        for at in effect.effects:
            agent = _agent_at(state.root, at.path)
            sink: list[AgentEvent] = []
            results.append(PathResult(at.path, self._member(agent).perform(at.effect, sink)))
            if not private_path(state.root, at.path):  # an agent used as a tool: private
                emit.extend(emitted_at(at.path, e) for e in sink)  # marked with the member's path
        return AllPerformed(tuple(results))

    def _member(self, agent: str) -> TestInterpreter:
        return self.agents.get(agent, self)

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


def _step(
    spec: AgentSpec | TreeSpec, outcome: Outcome | TreeOutcome, result: EffectResult
) -> Outcome | TreeOutcome:
    """The next outcome of an agent's machine or an agent tree's."""
    if isinstance(outcome, TreeOutcome):
        assert isinstance(spec, TreeSpec)
        return step_tree(outcome.state, result, spec).alt(_raise).unwrap()
    assert isinstance(spec, AgentSpec)
    return transition(outcome.state, result, spec).alt(_raise).unwrap()


def _timeout_of(spec: AgentSpec | TreeSpec) -> float | None:
    """The run's own timeout: the agent's, or the tree root's."""
    if isinstance(spec, AgentSpec):
        return spec.config.timeout
    root = spec.member(spec.root)
    return root.spec.config.timeout if root is not None and isinstance(root.spec, AgentSpec) else None


def _raise(error: Exception) -> Exception:
    raise error


def _agent_at(node: TreeNode, path: tuple[str, ...]) -> str:
    """The name of the agent whose sub-machine is at ``path`` below ``node``."""
    for key in path:
        node = next(child.node for child in node.children if child.key == key)
    return node.agent


__all__ = ["ScriptedRun", "Step", "TestInterpreter", "ToolFn"]
