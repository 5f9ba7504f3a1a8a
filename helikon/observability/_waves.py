"""One performed effect as spans, and an agent tree's sub-runs.

A multi-agent run is one machine, the agent tree (:mod:`helikon.agents`).
When more than its root's own machine is active, it asks for the effects of
every active sub-machine at once: one :class:`~helikon.effects.PerformAll`
per *wave*, with one :class:`~helikon.effects.AtPath` per sub-machine
(addressed by its path: a handoff target's name, a workflow child's key, an
agent used as a tool's ``"{tool}:{call id}"``), answered by one
:class:`~helikon.effects.AllPerformed`. The observer performs the whole wave
with its inner interpreter — a replay answers it from one recorded step — and
reads the spans off the addressed effects, the live events and the results.
A plain effect is a wave of one, at the root's path ``()``.

The rules, which follow from the tree's own (``helikon/agents/_tree.py``):

- **Opening.** A sub-run's ``invoke_agent`` span starts when its path, or a
  path under it, first appears in a wave, under the run
  :func:`~helikon.observability._runs.parent_of` names: in the turn that
  handed off, straight under a workflow's run, or — an agent used as a
  tool — under an ``execute_tool`` span of that call, started with it.
- **Turns.** A run's ``agent.turn`` begins when an effect of a new model
  turn (``RunHooks``, ``RenderInstructions``, ``CallModel``: each carries its
  turn number) is performed — exactly where the machine emits
  ``TurnStarted``; the tree's events do not say whose turn starts.
- **Timing.** A wave's effects start together. With one effect, its
  result arrives as it finishes; with several, the interpreter answers them
  together, so their ``chat`` spans end together at the wave's end (a tool
  notes its own end, wherever it runs).
- **Closing.** A tree node asks for an effect of its own again only once its
  children are done (the hook run before a handoff target starts is the
  one exception, and the target has not appeared yet then). So a sub-run is
  over once a later wave asks for an effect of one of its ancestors and none
  at or under it, or when the root run ends. It ends when the last wave that
  touched it ended.
- **Fate.** A sub-run's own terminal event stays inside the tree, so its
  outcome is read from what the tree shows: a failing last result (a failed
  model call, a tripped guardrail, an interruption) fails the run as the
  agent loop does; a handoff target's failure is its caller's, a workflow
  child's is its workflow's (passed on by sequential and loop workflows,
  collected by parallel and graph ones); the root's ``RunFailed`` names the
  failures of the sub-runs still open: by key in a ``ChildrenFailed``, else
  its own error, for those still running in the last wave. An agent
  used as a tool fails its tool call (``tool_crashed``, as the tree reports
  it to the caller); when nothing else says why, its own span gets the
  conventions' fallback ``error.type`` ``_OTHER``. Usage is counted as the
  tree counts it: a run's own model calls, its handoff target's and its
  workflow children's (not an agent's used as a tool).
"""

from __future__ import annotations

from typing import Any, Final, cast, final

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode

from helikon.agents import WorkflowKind
from helikon.effects import (
    AgentsRan,
    AllPerformed,
    AskApprovals,
    AskPolicy,
    AtPath,
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    FireHook,
    GuardrailsChecked,
    InvokeTool,
    ModelCallFailed,
    PerformAll,
    RenderInstructions,
    RunAgents,
    RunHooks,
    RunInterrupted,
)
from helikon.errors import AgentError, ChildFailure, ChildrenFailed, ModelFailed
from helikon.events import AgentEvent, ApprovalRequested, GuardrailTriggered, PermissionDenied
from helikon.interpreters import RunEnv
from helikon.interpreters._tree_env import child_of, env_at
from helikon.loop import Response, aggregate
from helikon.observability import _semconv as sc
from helikon.observability._operations import (
    TracedTools,
    context_of,
    end_chat,
    end_tools,
    open_chat,
    open_tool,
    open_tools,
    unfinished,
)
from helikon.observability._runs import (
    AgentToolCall,
    Attributes,
    RunSpans,
    UnknownFailure,
    begin_turn,
    close_run,
    model_of,
    note,
    open_run,
    parent_of,
    stamps_of,
)
from helikon.observability._telemetry import Signals

#: Effects that carry the model turn they belong to.
_TURNED: Final = frozenset({CallModel, RenderInstructions, RunHooks})
#: The ``error.type`` of a tool call whose agent failed (the tree reports it
#: to the caller as a ``ToolCrashed``).
_AGENT_TOOL_FAILED: Final = "tool_crashed"


@attrs.define(eq=False)
class Tree:
    """A root run's bookkeeping for its sub-runs.

    ``registry`` is the observer's open runs by run id (what
    :func:`parent_of` reads); ``open`` the root's open sub-runs by path;
    ``calls`` those that are agents used as tools, by call id; ``arguments``
    the arguments of calls to agents used as tools, kept for their spans
    when content is captured; ``wave`` the last wave's operations (whose
    events the next outcome holds) and ``ended`` when it ended.
    """

    root: RunSpans
    registry: dict[str, RunSpans]
    open: dict[tuple[str, ...], RunSpans] = attrs.field(factory=dict)
    calls: dict[str, RunSpans] = attrs.field(factory=dict)
    arguments: dict[str, str] = attrs.field(factory=dict)
    wave: tuple[Op, ...] = ()
    ended: int | None = None


@attrs.define(eq=False)
class Op:
    """One effect of a wave: where it is, the run it belongs to, its world
    and its spans."""

    path: tuple[str, ...]
    effect: Effect
    run: RunSpans | None
    env: RunEnv
    chat: Span | None = None
    metric: Attributes | None = None
    tools: dict[str, Span] | None = None
    ended: dict[str, int] = attrs.field(factory=dict)
    response: Response | None = None


@final
class Wave:
    """The spans of one performed effect (a plain one, or a ``PerformAll``).

    Args:
        signals: where spans and metrics go.
        root: the run the effect belongs to (None: an effect performed
            outside a run, through the step API).
        effect: the effect.
        env: the run's environment (carrying the observer's telemetry).
        interpreter: the inner interpreter (sub-run environments are built
            for it, once per run, as it builds them).
        at: when the wave starts.
        pending: the whole effect the run waits on, when ``effect`` is one
            part of it (waves are performed part by part): the sub-runs it
            still asks for are not over.
    """

    def __init__(
        self,
        signals: Signals,
        root: RunSpans | None,
        effect: Effect,
        env: RunEnv,
        interpreter: Any,
        at: int,
        *,
        pending: Effect | None = None,
    ) -> None:
        self.signals = signals
        self.root = root
        self.effect = effect
        self.start = at
        self.first_chunk: int | None = None
        self.tree: Tree | None = root.tree if root is not None else None
        self._env = env
        self._interpreter = interpreter
        effects = effect.effects if type(effect) is PerformAll else (AtPath((), effect),)
        tree = self.tree
        # A suspension is a barrier, not a sign that sub-runs are over.
        if tree is not None and tree.open and type(effect) is not AwaitApproval:
            alive = pending if pending is not None else effect
            asked = alive.effects if type(alive) is PerformAll else (AtPath((), alive),)
            finish_over(tree, [a.path for a in asked])
        self.ops = [self._begin(a, at) for a in effects]
        self.env = self._world()

    # -- beginning -------------------------------------------------------------------

    def _env_at(self, path: tuple[str, ...]) -> RunEnv:
        if not path:
            return self._env
        try:
            return env_at(self._env, path, self._interpreter)
        except Exception:  # not a helikon agent: the interpreter will say so
            return self._env_at(path[:-1])

    def _begin(self, at_path: AtPath, at: int) -> Op:
        path, effect = at_path.path, at_path.effect
        run = self.root if not path else self._subrun(path, effect, at)
        opaque = type(effect) is RunAgents
        env = self._env_at(path[:-1] if opaque and path else path)
        op = Op(path, effect, run, env)
        kind = type(effect)
        if run is not None and kind in _TURNED:
            begin_turn(run, effect.turn, at)  # type: ignore[union-attr]
        if kind is CallModel:
            op.chat, op.metric = open_chat(self.signals, effect, env, run, at)  # type: ignore[arg-type]
        elif kind is ExecuteTools and any(type(s) is InvokeTool for s in effect.steps):  # type: ignore[union-attr]
            op.tools = open_tools(self.signals, effect, env, run, at)  # type: ignore[arg-type]
        return op

    def _subrun(self, path: tuple[str, ...], effect: Effect, at: int) -> RunSpans | None:
        """The open sub-run at ``path``, opened (with its ancestors) if new."""
        tree = self.tree
        if tree is None:
            return self.root
        run: RunSpans | None = None
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            run = tree.open.get(prefix)
            if run is None or run.closed:
                leaf = effect if depth == len(path) else None
                run = self._open(tree, prefix, leaf, at)
        return run

    def _open(self, tree: Tree, path: tuple[str, ...], effect: Effect | None, at: int) -> RunSpans:
        key = f"{tree.root.key}/{'/'.join(path)}"
        parent = parent_of(key, tree.registry) or tree.root
        caller = self._env_at(path[:-1])
        segment = path[-1]
        call: AgentToolCall | None = None
        context: Context | None = None
        tool = _agent_tool(caller, segment)
        if tool is not None:
            name, call_id = tool
            span = open_tool(self.signals, name, call_id, caller, parent.context(), at)
            arguments = tree.arguments.pop(call_id, None)
            if arguments is not None:
                span.set_attribute(sc.TOOL_CALL_ARGUMENTS, sc.scrub(arguments, caller.secrets))
            call = AgentToolCall(span, name, call_id, at)
            context = trace.set_span_in_context(span)
        if type(effect) is RunAgents and effect.runs:  # an agent that is not a helikon machine
            agent, _ = child_of(caller, segment)
            provider, model = model_of(agent)
            env = caller
            title = effect.runs[0].agent
            collects = False
            description = None
        else:
            env = self._env_at(path)
            provider, model = model_of(env)
            model = model or env.spec.model_id or None
            title = env.spec.name
            description = env.spec.description
            kind = getattr(getattr(env.machine, "spec", None), "kind", None)
            collects = kind is WorkflowKind.PARALLEL or kind is WorkflowKind.GRAPH
        run = open_run(
            self.signals,
            key=key,
            name=title,
            parent=parent,
            stamps=stamps_of(env.ctx.tracer),
            provider=provider,
            model=model,
            at=at,
            secrets=env.secrets,
            path=path,
            context=context,
            description=description,
        )
        run.collects = collects
        run.call = call
        if call is not None:
            tree.calls[call.call_id] = run
        tree.open[path] = run
        tree.registry[key] = run
        return run

    def _world(self) -> RunEnv:
        """The environment the inner interpreter performs the wave in: each
        tool runs under its call's span (a sub-machine's tools through its
        cached environment, for this wave only)."""
        env = self._env
        overrides: dict[tuple[str, ...], RunEnv] = {}
        for op in self.ops:
            if op.tools is None:
                continue
            traced = TracedTools(op.env.tools, op.tools, op.ended)
            if op.path:
                overrides[op.path] = attrs.evolve(op.env, tools=traced)
            else:
                env = attrs.evolve(env, tools=traced)
        if overrides:
            env = attrs.evolve(env, subenvs={**self._env.subenvs, **overrides})
        return env

    def context(self) -> Context | None:
        """The OpenTelemetry context current while the inner interpreter
        works: the one effect's span, or, for several at once, the root's."""
        if len(self.ops) == 1:
            op = self.ops[0]
            if op.chat is not None:
                return trace.set_span_in_context(op.chat)
            return context_of(op.run)
        return context_of(self.root)

    # -- while it runs and when it ends -----------------------------------------------

    def live(self, event: AgentEvent, at: int) -> None:
        """A governance event streamed while the wave runs (an agent that is
        not a helikon machine forwards its events live)."""
        run = next((op.run for op in self.ops if type(op.effect) is RunAgents), None)
        run = run or (self.ops[0].run if len(self.ops) == 1 else self.root)
        if run is not None and not run.closed:
            note(run, event, at)

    def chunk(self, at: int) -> None:
        """A piece of a streamed answer arrived at ``at``: the first one is
        the model call's time to first chunk."""
        if self.first_chunk is not None or len(self.ops) != 1:
            return
        self.first_chunk = at
        chat = self.ops[0].chat
        if chat is not None:
            chat.set_attribute(sc.TIME_TO_FIRST_CHUNK, (at - self.start) / 1e9)

    def finish(self, result: EffectResult, at: int) -> None:
        """The wave's result arrived at ``at``."""
        if type(self.effect) is PerformAll:
            if type(result) is AllPerformed:
                answers = {r.path: r.result for r in result.results}
                pairs = [(op, answers[op.path]) for op in self.ops if op.path in answers]
            else:  # an interruption answers the whole wave
                pairs = [(op, result) for op in self.ops]
        else:
            pairs = [(self.ops[0], result)]
        for op, answer in pairs:
            self._finish(op, answer, at)
        tree = self.tree
        if tree is not None:
            for op in self.ops:
                for depth in range(1, len(op.path) + 1):
                    run = tree.open.get(op.path[:depth])
                    if run is not None:
                        run.last = at
            tree.wave = tuple(self.ops)
            tree.ended = at

    def _finish(self, op: Op, result: EffectResult, at: int) -> None:
        signals = self.signals
        sub = op.run if op.path else None
        kind = type(op.effect)
        if kind is CallModel and op.chat is not None and op.metric is not None:
            effect = cast(CallModel, op.effect)
            op.response = end_chat(op.chat, op.metric, result, op.env, effect, signals, self.start, at)
            op.chat = None
            if op.response is not None:
                self._agent_calls(op, op.response)
            if sub is not None:
                if op.response is not None:
                    sub.usage = sub.usage + op.response.usage
                elif type(result) is ModelCallFailed:
                    sub.usage = sub.usage + aggregate(result.events, op.env.run_id, 0).usage
        elif kind is ExecuteTools and op.tools is not None:
            provider = op.run.provider if op.run is not None else None
            effect_ = cast(ExecuteTools, op.effect)
            end_tools(op.tools, op.ended, effect_, result, op.env, provider, signals, self.start, at)
        if sub is None or sub.closed:
            return
        if kind is RunAgents and self.tree is not None:
            if type(result) is AgentsRan and result.results:
                (ran, *_) = result.results
                sub.usage = ran.usage
                close_subrun(self.tree, sub, at, error=ran.error)
            elif type(result) is RunInterrupted:
                close_subrun(self.tree, sub, at, error=result.reason)
            return
        failure = failure_of(result)
        if failure is not None:
            sub.failure = failure

    def _agent_calls(self, op: Op, response: Response) -> None:
        """Keep the arguments of calls to agents used as tools (their
        ``execute_tool`` span starts with the agent's run)."""
        tree = self.tree
        if tree is None or not self.signals.capture_content:
            return
        for call in response.calls:
            if _is_agent_tool(op.env.tools.get(call.name)):
                tree.arguments[call.call_id] = call.arguments

    def abort(self) -> None:
        """End the spans of operations that never got a result."""
        for op in self.ops:
            if op.chat is not None:
                unfinished((op.chat,), "model call")
                op.chat = None
            if op.tools:
                unfinished(op.tools.values(), "tool call")
                op.tools.clear()


def failure_of(result: EffectResult) -> AgentError | None:
    """The failure a result ends an agent run with, as the agent loop ends it."""
    kind = type(result)
    if kind is ModelCallFailed:
        return ModelFailed(result.failure)  # type: ignore[union-attr]
    if kind is RunInterrupted:
        return result.reason  # type: ignore[union-attr]
    if kind is GuardrailsChecked:
        return result.tripwire  # type: ignore[union-attr]
    return None


def _is_agent_tool(tool: object) -> bool:
    return callable(getattr(tool, "sub_context", None))


def _agent_tool(caller: RunEnv, segment: str) -> tuple[str, str] | None:
    """(tool name, call id) when path segment ``segment`` of ``caller`` is
    an agent used as a tool (its key is ``"{tool}:{call id}"``)."""
    name, colon, call_id = segment.partition(":")
    if not colon or not _is_agent_tool(caller.tools.get(name)):
        return None
    return name, call_id


# -- closing sub-runs ----------------------------------------------------------------------


def finish_over(tree: Tree, paths: list[tuple[str, ...]]) -> None:
    """Close the sub-runs a wave asking for ``paths`` shows are over: one of
    their ancestors asks for an effect, and nothing at or under them does."""
    over: list[RunSpans] = []
    for path, run in tree.open.items():
        if run.closed or run.last is None:
            continue
        size = len(path)
        if any(p[:size] == path for p in paths):
            continue
        if any(len(p) < size and path[: len(p)] == p for p in paths):
            over.append(run)
    for run in sorted(over, key=lambda r: -len(r.path)):
        close_subrun(tree, run, run.last or 0)


def close_subrun(
    tree: Tree, run: RunSpans, at: int, *, error: object = None, suspended: bool = False
) -> None:
    """End sub-run ``run`` at ``at`` (its error: ``error``, else its own
    failure), and tell its caller: its usage, its failure, its tool call."""
    if run.closed:
        return
    if error is None and not suspended:
        error = run.failure
    call = run.call
    if call is not None and error is None and call.failed:
        error = UnknownFailure(call.output or "the agent failed")
    close_run(run, at=at, usage=run.usage, error=error, suspended=suspended)
    if tree.open.get(run.path) is run:
        del tree.open[run.path]
    if tree.registry.get(run.key) is run:
        del tree.registry[run.key]
    parent = run.parent
    if parent is not None and run in parent.children:
        parent.children.remove(run)  # a long run keeps only its open sub-runs
    if call is not None:
        tree.calls.pop(call.call_id, None)
        _end_call(call, run, at, failed=call.failed or (call.output is None and error is not None))
    elif parent is not None:
        parent.usage = parent.usage + run.usage
        if error is not None and not suspended:
            _pass_up(parent, run, error)


def _pass_up(parent: RunSpans, child: RunSpans, error: object) -> None:
    """A handoff target's failure is its caller's; a workflow child's fails
    its workflow (collected by parallel and graph workflows)."""
    if parent.collects:
        if isinstance(error, UnknownFailure | BaseException):
            return
        parent.failed.append((child.path[-1], error))
        failures = tuple(ChildFailure(key, cast(AgentError, e)) for key, e in parent.failed)
        parent.failure = ChildrenFailed(failures)
    elif parent.failure is None:
        parent.failure = error


def _end_call(call: AgentToolCall, run: RunSpans, at: int, *, failed: bool) -> None:
    """End the ``execute_tool`` span of an agent used as a tool."""
    signals = run.signals
    span = call.span
    caller = run.parent
    metric: Attributes = {sc.OPERATION_NAME: sc.EXECUTE_TOOL}
    if caller is not None and caller.provider is not None:
        metric[sc.PROVIDER_NAME] = caller.provider
    if failed:
        span.set_attribute(sc.ERROR_TYPE, _AGENT_TOOL_FAILED)
        text = call.output or f"agent {run.name!r} failed"
        span.set_status(Status(StatusCode.ERROR, sc.scrub(text, run.secrets)))
        metric[sc.ERROR_TYPE] = _AGENT_TOOL_FAILED
    elif call.output is not None and signals.capture_content:
        span.set_attribute(sc.TOOL_CALL_RESULT, sc.scrub(call.output, run.secrets))
    span.end(end_time=at)
    signals.duration.record((at - call.start) / 1e9, metric)
    signals.tool_calls.add(1, {**metric, sc.TOOL_NAME: call.tool})


def settle(tree: Tree, at: int, error: object, *, suspended: bool = False, abrupt: bool = False) -> None:
    """The root run ends (``error``: its failure): close every open
    sub-run, each with the failure the root's names for it, else its own."""
    inherited: dict[int, object] = {}

    def down(run: RunSpans, failure: object) -> None:
        for child in run.children:
            if child.closed:
                continue
            mine = None if child.call is not None else _named(failure, child, tree.ended)
            inherited[id(child)] = mine
            down(child, mine if mine is not None else child.failure)

    down(tree.root, None if abrupt else error)
    for run in sorted(tree.open.values(), key=lambda r: -len(r.path)):
        end = at if suspended or abrupt or run.last is None else run.last
        close_subrun(tree, run, end, error=inherited.get(id(run)), suspended=suspended)


def _named(failure: object, child: RunSpans, ended: int | None) -> object:
    """The failure of ``child`` that its caller's ``failure`` names: by key
    in a ``ChildrenFailed``; else the caller's own, when ``child`` was still
    running in the last wave (``ended``: when that wave ended)."""
    if failure is None or isinstance(failure, BaseException):
        return None
    if type(failure) is ChildrenFailed:
        return next((f.error for f in failure.failed if f.key == child.path[-1]), None)
    return failure if child.last is None or child.last == ended else None


# -- whose event is it ---------------------------------------------------------------------


def owner(root: RunSpans, event: AgentEvent) -> RunSpans:
    """The run a governance event of ``root``'s stream is about: the
    sub-run whose last wave mentioned its call, its tool or its guardrail
    check (the tree's events carry no path)."""
    tree = root.tree
    ops = tree.wave if tree is not None else ()
    if not ops or (len(ops) == 1 and not ops[0].path):
        return root
    chosen = next((op for op in ops if _mentions(op, event)), None)
    if chosen is None and len(ops) == 1:
        chosen = ops[0]
    run = chosen.run if chosen is not None else None
    while run is not None and run.closed:
        run = run.parent
    return run or root


def _mentions(op: Op, event: AgentEvent) -> bool:
    match event:
        case ApprovalRequested(call_id=call_id):
            return call_id in _calls(op, 0)
        case PermissionDenied(tool=tool):
            return tool in _calls(op, 1)
        case GuardrailTriggered():
            return type(op.effect) is CheckGuardrails
        case _:
            return False


def _calls(op: Op, field: int) -> set[str]:
    """The call ids (``field`` 0) or tool names (1) ``op`` mentions."""
    pairs: list[tuple[str, str]] = []
    if op.response is not None:
        pairs.extend((c.call_id, c.name) for c in op.response.calls)
    effect = op.effect
    if type(effect) is ExecuteTools:
        for step in effect.steps:
            if type(step) is FireHook:
                pairs.append((step.call_id, str(getattr(step.event, "tool", ""))))
            elif type(step) is AskPolicy or type(step) is InvokeTool:
                pairs.append((step.call_id, step.tool))
    elif type(effect) is AskApprovals:
        pairs.extend((r.call_id, r.tool) for r in effect.requests)
    return {pair[field] for pair in pairs}


__all__ = ["Op", "Tree", "Wave", "close_subrun", "failure_of", "finish_over", "owner", "settle"]
