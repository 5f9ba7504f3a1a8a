"""A synchronous, in-memory interpreter for tests.

:class:`TestInterpreter` drives the pure machine with scripted model turns
and plain Python tool functions, with no event loop at all. It streams the
same raw deltas as the live interpreter (through the same
:func:`~helikon.loop.delta_event`), so a scripted run's events match a live
run's for the same effect results.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, final

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.agents import TreeNode, TreeOutcome, TreeSpec, TreeState, private_path, start_tree, step_tree
from helikon.context import RunContext
from helikon.effects import (
    AllPerformed,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalsGiven,
    AskApprovals,
    AskPolicy,
    AwaitApproval,
    CallbackRaised,
    CallModel,
    CallStep,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    FireHook,
    Handoff,
    HooksNotified,
    HooksRan,
    InstructionsRendered,
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
    StepResult,
    StoreOutput,
    Terminate,
    ToolRaised,
    ToolsExecuted,
)
from helikon.errors import ModelError, OtherModelFailure, StepError, ToolCrashed
from helikon.events import AgentEvent
from helikon.governance import Allow
from helikon.ids import RunId
from helikon.interpreters._governed import fold_turn_hooks
from helikon.interpreters._steps import (
    approval_answered,
    hook_answered,
    policy_answered,
    raised,
    tool_raised,
    tool_returned,
)
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, RunState, delta_event, start, transition
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
    ) -> None:
        self.scripts = [list(s) for s in model]
        self.tools = dict(tools or {})
        self.instructions = instructions
        self.hooks = tuple(hooks)
        self.policy = policy
        self.approval_handler = approval_handler
        self.ctx = ctx if ctx is not None else RunContext.ephemeral(None)
        self.agents = dict(agents or {})

    def run(
        self, spec: AgentSpec | TreeSpec, input: AgentInput | str, run_id: str = "run-1"
    ) -> ScriptedRun:
        """Run to a terminal state (or a suspension) and return the events and
        steps. ``spec`` is an agent's, or an agent tree's (then ``agents``
        scripts each member of the tree by name)."""
        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        if isinstance(spec, TreeSpec):
            return self.resume(spec, start_tree(spec, input, RunId(run_id)))
        return self.resume(spec, start(spec, input, RunId(run_id)))

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
            sink = [] if private_path(state.root, at.path) else emit  # an agent used as a tool: private
            results.append(PathResult(at.path, self._member(agent).perform(at.effect, sink)))
        return AllPerformed(tuple(results))

    def _member(self, agent: str) -> TestInterpreter:
        return self.agents.get(agent, self)

    def perform(self, effect: Effect, emit: list[AgentEvent]) -> EffectResult:
        """Perform one effect, appending live events to ``emit``."""
        match effect:
            case CallModel():
                return self._call_model(emit)
            case ExecuteTools(steps=steps):
                return ToolsExecuted(tuple(self._perform_step(s) for s in steps))
            case AskApprovals(requests=requests):
                return ApprovalsGiven(tuple(self._ask_approval(r) for r in requests))
            case RenderInstructions(turn=turn):
                if self.instructions is None:
                    raise StepError("no instructions function was given")
                return InstructionsRendered(self.instructions(turn))
            case RunHooks(turn=turn):
                return self._run_turn_hooks(turn)
            case NotifyHooks(event=event):
                for hook in self.hooks:
                    with contextlib.suppress(Exception):  # observing hooks are best effort (the book)
                        _sync(hook(self.ctx, event))
                return HooksNotified()
            case StoreOutput(key=key, text=text):
                self.ctx.state[key] = text
                return OutputStored()
            case (
                Handoff()
                | RunAgents()
                | CheckGuardrails()
                | AwaitApproval()
                | PerformAll()
                | Terminate()
            ):
                raise StepError(f"the test interpreter cannot perform {type(effect).__name__}")

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

    def _perform_step(self, step: CallStep) -> StepResult:
        match step:
            case FireHook(call_id=cid, hook=index, event=event):
                if index >= len(self.hooks):
                    return CallbackRaised(cid, f"no hook number {index} (the run has {len(self.hooks)})")
                try:
                    return hook_answered(cid, _sync(self.hooks[index](self.ctx, event)))
                except Exception as exc:
                    return CallbackRaised(cid, raised(exc))
            case AskPolicy(call_id=cid, tool=tool, args=args):
                if self.policy is None:
                    return CallbackRaised(cid, "no permission policy is installed")
                try:
                    return policy_answered(cid, _sync(self.policy(self.ctx, tool, args)))
                except Exception as exc:
                    return CallbackRaised(cid, raised(exc))
            case InvokeTool(call_id=cid, tool=name, args=args):
                fn = self.tools.get(name)
                if fn is None:
                    return ToolRaised(cid, ToolCrashed(f"tool {name!r} has no implementation"))
                try:
                    value = fn(args if isinstance(args, dict) else {})
                except Exception as exc:
                    return tool_raised(cid, exc)
                return tool_returned(cid, value, name)

    def _run_turn_hooks(self, turn: int) -> HooksRan:
        fold = fold_turn_hooks(turn, len(self.hooks))
        try:
            index, event = next(fold)
            while True:
                decision = _sync(self.hooks[index](self.ctx, event))
                index, event = fold.send(Allow() if decision is None else decision)  # type: ignore[arg-type]
        except StopIteration as done:
            result: HooksRan = done.value
            return result

    def _ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.approval_handler is None:
            return ApprovalDecision(request.call_id, False, "no approval handler is installed")
        try:
            return approval_answered(request, _sync(self.approval_handler(request)))
        except Exception as exc:
            return ApprovalDecision(request.call_id, False, f"the approval handler raised {raised(exc)}")


def _step(
    spec: AgentSpec | TreeSpec, outcome: Outcome | TreeOutcome, result: EffectResult
) -> Outcome | TreeOutcome:
    """The next outcome of an agent's machine or an agent tree's."""
    if isinstance(outcome, TreeOutcome):
        assert isinstance(spec, TreeSpec)
        return step_tree(outcome.state, result, spec).alt(_raise).unwrap()
    assert isinstance(spec, AgentSpec)
    return transition(outcome.state, result, spec).alt(_raise).unwrap()


def _raise(error: Exception) -> Exception:
    raise error


def _agent_at(node: TreeNode, path: tuple[str, ...]) -> str:
    """The name of the agent whose sub-machine is at ``path`` below ``node``."""
    for key in path:
        node = next(child.node for child in node.children if child.key == key)
    return node.agent


def _sync(value: object) -> object:
    """A synchronous callback's answer (the test interpreter has no event loop)."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        raise StepError("the test interpreter calls only synchronous hooks, policies and handlers")
    return value


__all__ = ["ScriptedRun", "Step", "TestInterpreter", "ToolFn"]
