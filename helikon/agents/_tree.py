"""An agent tree as one pure machine: children are sub-machines, addressed by path.

A run whose agent can hand off, or that is a workflow, is a tree: the root
agent's machine (the agent loop, or the workflow machine) asks to hand the
conversation to another agent (:class:`~helikon.effects.Handoff`) or to run
children (:class:`~helikon.effects.RunAgents`). Here those effects are not
performed by an interpreter: the tree begins each child's own machine as a
:class:`TreeNode` inside its parent's, steps it, and, once the children are
done, answers the parent's effect itself (``HandoffCompleted``,
``AgentsRan``) from the children's final states. Everything a child needs
from the world is an effect addressed to its *path* (one key per level:
the handoff target's name, the workflow child's key, ``tool:call id`` for
an agent used as a tool). Members are told apart by key, never by name
(:class:`Member`).

Rules:

- The tree's pending effect is the leaves' effects: the root's own effect
  when nothing else runs, else one :class:`~helikon.effects.PerformAll`
  with one :class:`~helikon.effects.AtPath` per active sub-machine, in tree
  order, answered by :class:`~helikon.effects.AllPerformed`: all of them in
  that order, or any of them in any order. Waves are not lock-step: a path
  answered moves on at once (its next effect joins the pending ones) while
  the others keep their pending effect, so a branch never waits for its
  siblings' steps. What a run decides does not depend on the order the
  answers came in: children's results join their parent in child order,
  tool results the conversation in call order. The root's own effect takes
  its answer bare or as an ``AllPerformed`` at the path ``()``, whichever
  is pending when it comes (a part performed beside other paths that ended
  meanwhile, or the other way round).
- A child's events reach the run's stream as they are made, except its own
  ``RunStarted`` and terminal event (the tree has one pair), each marked
  with the path that emitted it (``event.path``). An agent used
  as a tool is a private sub-run: none of its events reach its caller's
  stream; its usage is added to its caller's. A workflow
  child is announced with ``AgentUpdated``; the observing hooks are effects:
  ``OnHandoff`` before a handoff target starts, ``OnSubagentStop`` when a
  child ends; a workflow child's output is written to the run-scoped state
  (``StoreOutput``) before its parent goes on.
- The run's own end fires ``OnRunComplete`` as an effect once its last event
  is out (when the run has hooks): a single agent with hooks runs as a tree
  of one for that reason.
- The run's usage limits (:attr:`TreeSpec.limits`) count every member's
  spending together: after each step, when a member is about to call its
  model or run tools and the tree's usage breaks a limit, the tree ends as
  if interrupted, with :class:`~helikon.errors.UsageLimitExceeded` naming
  that member's path (:func:`enforce_limits`). A member below the root may
  have tighter limits of its own (:attr:`Member.limits`, an agent's or a
  workflow's): they count everything that member runs below it and are
  checked the same way, after the run's; the member that breaks them is
  interrupted (its parent goes on from that failure as from any other).
  An agent loop's own machine checks its own usage too. The error a member
  ends with is placed under its key as it reaches its parent.
- A swarm's handoff budget travels down the handoff chain: the handoff that
  exceeds it fails with ``MaxHandoffsExceeded`` and the usage so far.
- A sub-machine waiting for a human waits at a barrier: once every other
  active sub-machine waits too (or is done), the tree asks every question at
  once, as the root's :class:`~helikon.effects.AwaitApproval` (each request
  marked with the path that asks), and routes each decision back by (path,
  call id).
- What the run writes to its run-scoped state (``StoreOutput`` answered)
  is kept in :attr:`TreeState.stored`; a ``RenderInstructions`` effect
  carries what its agent may read, so any process renders the same. The whole state — every child's
  included — is data, so the run can be dumped there and resumed anywhere.
"""

from __future__ import annotations

import attrs
from returns.result import Failure, Result, Success

from helikon.agents._workflow import (
    Running,
    WorkflowOutcome,
    WorkflowSpec,
    WorkflowState,
    start_workflow,
    step_workflow,
)
from helikon.config import UsageLimits
from helikon.effects import (
    AgentRun,
    AgentRunResult,
    AgentsRan,
    AllPerformed,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalsGiven,
    AskApprovals,
    AtPath,
    AwaitApproval,
    CallModel,
    CallStep,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    HandoffCompleted,
    HooksNotified,
    InvokeTool,
    NotifyHooks,
    OutputStored,
    PathResult,
    PerformAll,
    RenderInstructions,
    RunAgents,
    RunInterrupted,
    StepResult,
    StoreOutput,
    Terminate,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import (
    AgentError,
    MaxHandoffsExceeded,
    OtherError,
    StepError,
    ToolCrashed,
    UsageLimitExceeded,
    describe,
)
from helikon.events import (
    AgentEvent,
    AgentUpdated,
    HandoffItem,
    RunCompleted,
    RunFailed,
    RunStarted,
    emitted_at,
)
from helikon.governance import OnHandoff, OnRunComplete, OnSubagentStop
from helikon.ids import RunId
from helikon.items import AgentInput, Item
from helikon.loop import (
    AgentSpec,
    Done,
    Failed,
    Outcome,
    RunState,
    deadline_after,
    exceeded,
    on_time,
    start,
    transition,
)
from helikon.model import Usage


@attrs.frozen
class OpaqueState:
    """A child that is not a helikon machine (any object with ``run``): the
    interpreter runs it whole, as one ``RunAgents`` effect at its path.

    ``phase`` is ``Running`` until its result arrives, then ``Done``/``Failed``.
    """

    run_id: RunId
    agent: str
    key: str
    input: tuple[Item, ...]
    depth: int
    phase: Running | Done | Failed = Running()
    usage: Usage = Usage()
    escalated: bool = False


#: A sub-machine's own state.
NodeState = RunState | WorkflowState | OpaqueState


def _own_key(member: Member) -> str:
    return member.name


@attrs.frozen
class Member:
    """An agent a tree may run, as data.

    A member is told apart by its ``key``, never by its name: two agents of a
    tree may share a name (two ``writer`` steps with different instructions)
    and each runs with its own spec.

    Args:
        name: the agent's name (what its events and hooks say).
        spec: its definition: an agent loop's or a workflow's; None for an
            agent that is not a helikon machine (run whole, see :class:`OpaqueState`).
        handoffs: a swarm's handoff budget, for runs it enters (None: none).
        hooks: whether observing hooks fire for its runs.
        agent_tools: its tools that are agents (``AgentAsTool``): (tool name,
            member key), sorted.
        links: the members its children run: (child key, member key) for a
            workflow's children and an agent's handoff targets (keyed by the
            target's name); without a link, the child's agent name is the key.
        key: the member's key in its tree, unique: its name, or, when an
            earlier member has that name, the path (``/``-joined child keys)
            it was first found at.
        timeout: its own ``RunConfig.timeout`` (seconds, None: none): a run
            of it that is not the tree's root is out of time that long after
            the first clock reading the tree is given once it began (see
            :func:`step_tree`).
        limits: its own ``RunConfig.usage_limits``: a run of it that is not
            the tree's root may spend no more than these, counting
            everything it runs below it (see :func:`enforce_limits`).
    """

    name: str
    spec: AgentSpec | WorkflowSpec | None
    handoffs: int | None = None
    hooks: bool = False
    agent_tools: tuple[tuple[str, str], ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    key: str = attrs.field(default=attrs.Factory(_own_key, takes_self=True), kw_only=True)
    timeout: float | None = attrs.field(default=None, kw_only=True)
    limits: UsageLimits = attrs.field(default=UsageLimits(), kw_only=True)

    def agent_tool(self, tool: str) -> str | None:
        """The key of the member a tool of this agent runs (an agent used as
        a tool), or None."""
        for name, agent in self.agent_tools:
            if name == tool:
                return agent
        return None

    def linked(self, child: str) -> str | None:
        """The key of the member its child ``child`` runs, or None (no link)."""
        for key, member in self.links:
            if key == child:
                return member
        return None


@attrs.frozen
class TreeSpec:
    """Every agent a tree can reach, sorted by key, the root's key, and the
    run's usage limits (every member's spending counts against them)."""

    root: str
    members: tuple[Member, ...]
    limits: UsageLimits = UsageLimits()

    def member(self, key: str) -> Member | None:
        """The member keyed ``key``, or None."""
        for member in self.members:
            if member.key == key:
                return member
        return None

    def name_of(self, key: str) -> str:
        """The agent name of the member keyed ``key`` (``key`` if none)."""
        member = self.member(key)
        return member.name if member is not None else key

    @property
    def timed(self) -> bool:
        """Whether a member other than the root has a timeout of its own
        (then the tree wants a clock reading with every result)."""
        return any(m.timeout is not None and m.key != self.root for m in self.members)


@attrs.frozen
class TreeChild:
    """A child of a node: its key (the path segment) and its node."""

    key: str
    node: TreeNode


@attrs.frozen
class TreeNode:
    """One sub-machine and where it is.

    Args:
        agent: the key of the member it runs (see :class:`Member`).
        state: its own machine's state.
        effect: its own machine's pending effect.
        children: the children answering a ``Handoff``/``RunAgents`` effect.
        chores: effects of its own to perform before it goes on
            (``NotifyHooks``, ``StoreOutput``), first first.
        deliver: the result to feed its machine once the chores are done.
        escalated: one of its tools escalated.
        handoffs_left: the swarm handoff budget left (None: unbounded).
        handoff_limit: the budget the chain started with.
        root: the run's own node (its end fires ``OnRunComplete``).
    """

    agent: str
    state: NodeState
    effect: Effect
    children: tuple[TreeChild, ...] = ()
    chores: tuple[NotifyHooks | StoreOutput, ...] = ()
    deliver: HandoffCompleted | AgentsRan | None = None
    escalated: bool = False
    handoffs_left: int | None = None
    handoff_limit: int | None = None
    root: bool = False

    @property
    def finished(self) -> bool:
        return type(self.effect) is Terminate and not self.chores


@attrs.frozen
class Stored:
    """An output written to the run-scoped state (``ctx.state[key] = text``).

    ``scope`` is the path of the private sub-run (an agent used as a tool)
    whose state it is, ``()`` for the run's own.
    """

    scope: tuple[str, ...]
    key: str
    text: str


@attrs.frozen
class TreeState:
    """A tree run between two steps: the root node, children inside."""

    root: TreeNode
    #: The run's definition fingerprint, as :attr:`helikon.loop.RunState.definition`.
    definition: str = ""
    #: What the run wrote to its run-scoped state so far, in order: part of
    #: the state, so a run resumed anywhere reads the same ``ctx.state``.
    stored: tuple[Stored, ...] = ()
    #: The run's deadline and timeout, as :attr:`helikon.loop.RunState.deadline`.
    deadline: float | None = None
    timeout: float | None = None

    @property
    def run_id(self) -> RunId:
        return self.root.state.run_id

    @property
    def terminal(self) -> bool:
        return self.root.finished


@attrs.frozen
class TreeOutcome:
    """What a step of the tree returns (see :class:`helikon.loop.Outcome`)."""

    state: TreeState
    events: tuple[AgentEvent, ...]
    effect: Effect
    appended: tuple[Item, ...] = ()


Step = Result[TreeOutcome, StepError]

# -- one node's own machine ---------------------------------------------------------------


@attrs.frozen
class OpaqueOutcome:
    """An opaque child's step: its state and the effect it waits on."""

    state: OpaqueState
    events: tuple[AgentEvent, ...]
    effect: Effect
    appended: tuple[Item, ...] = ()


Begun = Outcome | WorkflowOutcome | OpaqueOutcome


def _begin(member: Member, key: str, input: tuple[Item, ...], run_id: RunId, depth: int) -> Begun:
    if isinstance(member.spec, WorkflowSpec):
        return start_workflow(member.spec, input, run_id, depth)
    if isinstance(member.spec, AgentSpec):
        return start(member.spec, AgentInput(input), run_id, depth)
    state = OpaqueState(run_id, member.name, key, input, depth)
    return OpaqueOutcome(state, (), RunAgents((AgentRun(key, member.name, input),), depth))


def _opaque_step(state: OpaqueState, result: EffectResult) -> OpaqueOutcome:
    if type(result) is RunInterrupted:
        return OpaqueOutcome(attrs.evolve(state, phase=Failed(result.reason)), (), Terminate())
    if type(result) is not AgentsRan or len(result.results) != 1:
        raise StepError(f"agent {state.agent!r} waits for AgentsRan, not {type(result).__name__}")
    (ran,) = result.results
    phase: Done | Failed = Done(ran.output) if ran.error is None else Failed(ran.error)
    done = attrs.evolve(state, phase=phase, usage=ran.usage, escalated=ran.escalated)
    return OpaqueOutcome(done, (), Terminate())


Stepped = Result[Begun, StepError]


def _own_step(member: Member, state: NodeState, result: EffectResult) -> Stepped:
    if isinstance(state, OpaqueState):
        try:
            return Success(_opaque_step(state, result))
        except StepError as error:
            return Failure(error)
    spec = member.spec
    if spec is None:
        return Failure(StepError(f"agent {member.name!r} is not a machine"))
    if isinstance(spec, WorkflowSpec):
        if not isinstance(state, WorkflowState):
            return Failure(StepError(f"agent {member.name!r} was given an agent-loop state"))
        return step_workflow(state, result, spec)
    if not isinstance(state, RunState):
        return Failure(StepError(f"agent {member.name!r} was given a workflow state"))
    match transition(state, result, spec):
        case Success(outcome):
            return Success(outcome)
        case Failure(error):
            return Failure(error)
    raise AssertionError("unreachable")


def _output_of(node: TreeNode, key: str = "") -> tuple[str, Usage, AgentError | None]:
    """A finished node's final text, usage and error (a usage limit its own
    machine found broken says where: under ``key``)."""
    phase = node.state.phase
    usage = node.state.usage
    if type(phase) is Done:
        return phase.output, usage, None
    if type(phase) is Failed:
        return "", usage, located(phase.error, key)
    return "", usage, OtherError(f"agent {node.agent!r} ended without a terminal state")


_OWN = (RunStarted, RunCompleted, RunFailed)


def _forwarded(key: str, events: tuple[AgentEvent, ...]) -> list[AgentEvent]:
    """Child ``key``'s events as its parent's stream shows them: without its
    own RunStarted and terminal event, each marked with the path that
    emitted it (``key`` before the path it had below the child)."""
    return [emitted_at((key,), e) for e in events if type(e) not in _OWN]


# -- building nodes -----------------------------------------------------------------------


def _settle(spec: TreeSpec, node: TreeNode, outcome: Begun, events: list[AgentEvent]) -> TreeNode:
    """``node`` after its own machine stepped to ``outcome``: spawn children
    if it asked for some."""
    # A round goes on while its agents used as tools run: they stay its children.
    running = type(node.effect) is ExecuteTools and type(outcome.effect) is ExecuteTools
    kept = node.children if running else ()
    node = attrs.evolve(node, state=outcome.state, effect=outcome.effect, children=kept, deliver=None)
    effect = outcome.effect
    if type(effect) is Terminate and node.root:
        member = spec.member(node.agent)
        if member is not None and member.hooks:
            # The run's last event is out; the observing hooks hear of it.
            return attrs.evolve(node, chores=(*node.chores, NotifyHooks(OnRunComplete())))
        return node
    if type(effect) is Handoff:
        return _hand_off(spec, node, effect, events)
    if type(effect) is RunAgents and not isinstance(outcome.state, OpaqueState):
        return _run_agents(spec, node, effect, events)
    if type(effect) is ExecuteTools:
        return _agent_tools(spec, node, effect, events)
    return node


def _agent_tools(spec: TreeSpec, node: TreeNode, effect: ExecuteTools, events: list[AgentEvent]) -> TreeNode:
    """Agents used as tools run as children, keyed ``tool:call id`` (one
    already running stays as it is); the round's other steps go to the
    interpreter."""
    member = spec.member(node.agent)
    if member is None or not member.agent_tools:
        return node
    running = {c.key: c for c in node.children}
    children: list[TreeChild] = []
    for step in effect.steps:
        if type(step) is not InvokeTool:
            continue
        target = spec.member(member.agent_tool(step.tool) or "")
        if target is None:
            continue
        key = f"{step.tool}:{step.call_id}"
        if key in running:
            children.append(running[key])
            continue
        args = step.args if isinstance(step.args, dict) else {}
        items = AgentInput.from_user_text(str(args.get("input", ""))).items
        run_id = RunId(f"{node.state.run_id}/{key}")
        begun = _begin(target, key, items, run_id, node.state.depth + 1)
        budget = (target.handoffs, target.handoffs)
        children.append(TreeChild(key, _new_node(spec, target, begun, budget, [])))
    if not children:
        return node
    return _after_children(spec, attrs.evolve(node, children=tuple(children)), events)


def _hand_off(spec: TreeSpec, node: TreeNode, effect: Handoff, events: list[AgentEvent]) -> TreeNode:
    owner = spec.member(node.agent)
    target = spec.member((owner.linked(effect.target) if owner else None) or effect.target)
    if target is None:
        failed = HandoffCompleted("", Usage(), OtherError(f"no handoff target named {effect.target!r}"))
        return _feed_own(spec, node, failed, events)
    if node.handoffs_left is not None and node.handoffs_left <= 0:
        # The refused handoff never happens: it is not announced either.
        while events and type(events[-1]) in (AgentUpdated, HandoffItem):
            events.pop()
        exceeded = MaxHandoffsExceeded(node.handoff_limit or 0)
        return _feed_own(spec, node, HandoffCompleted("", Usage(), exceeded), events)
    run_id = RunId(f"{node.state.run_id}/{effect.target}")
    begun = _begin(target, effect.target, effect.transcript, run_id, effect.depth)
    left = node.handoffs_left - 1 if node.handoffs_left is not None else None
    started: list[AgentEvent] = []  # what its own children's start says (a workflow target's)
    child = _new_node(spec, target, begun, (left, node.handoff_limit), started)
    events.extend(_forwarded(effect.target, begun.events))
    events.extend(_forwarded(effect.target, tuple(started)))
    chores: tuple[NotifyHooks | StoreOutput, ...] = ()
    if owner is not None and owner.hooks:
        chores = (NotifyHooks(OnHandoff(owner.name, target.name)),)
    node = attrs.evolve(node, children=(TreeChild(effect.target, child),), chores=chores)
    return _after_children(spec, node, events)


def _run_agents(spec: TreeSpec, node: TreeNode, effect: RunAgents, events: list[AgentEvent]) -> TreeNode:
    children: list[TreeChild] = []
    missing: list[AgentRunResult] = []
    owner = spec.member(node.agent)
    for run in effect.runs:
        member = spec.member((owner.linked(run.key) if owner else None) or run.agent)
        if member is None:
            missing.append(AgentRunResult(run.key, "", Usage(), OtherError(f"no child agent {run.key!r}")))
            continue
        events.append(AgentUpdated(member.name))
        begun = _begin(member, run.key, run.input, RunId(f"{node.state.run_id}/{run.key}"), effect.depth)
        events.extend(_forwarded(run.key, begun.events))
        budget = (member.handoffs, member.handoffs)
        started: list[AgentEvent] = []  # a nested workflow starts its own children at once
        children.append(TreeChild(run.key, _new_node(spec, member, begun, budget, started)))
        events.extend(_forwarded(run.key, tuple(started)))
    node = attrs.evolve(node, children=tuple(children))
    if missing and not children:
        return _feed_own(spec, node, AgentsRan(tuple(missing)), events)
    if missing:
        # Children that cannot start answer at once; the others run.
        node = attrs.evolve(node, deliver=AgentsRan(tuple(missing)))
    return _after_children(spec, node, events)


def _new_node(
    spec: TreeSpec,
    member: Member,
    begun: Begun,
    budget: tuple[int | None, int | None],
    events: list[AgentEvent],
) -> TreeNode:
    """A node for ``member``, begun; ``budget`` is (handoffs left, the limit)."""
    left, limit = budget
    node = TreeNode(member.key, begun.state, begun.effect, handoffs_left=left, handoff_limit=limit)
    return _settle(spec, node, begun, events)


def _feed_own(spec: TreeSpec, node: TreeNode, result: EffectResult, events: list[AgentEvent]) -> TreeNode:
    member = spec.member(node.agent)
    assert member is not None
    match _own_step(member, node.state, result):
        case Success(outcome):
            events.extend(outcome.events)
            return _settle(spec, node, outcome, events)
        case Failure(error):
            raise error
    raise AssertionError("unreachable")


def _after_children(spec: TreeSpec, node: TreeNode, events: list[AgentEvent]) -> TreeNode:
    """Once every child is finished: queue the chores, then answer the parent
    (a round hears of each agent used as a tool as soon as it finished)."""
    effect = node.effect
    if type(effect) is ExecuteTools and node.children:
        return _join_agents(spec, node, effect, events)
    if not node.children or not all(c.node.finished for c in node.children):
        return node
    member = spec.member(node.agent)
    hooks = member is not None and member.hooks
    chores: list[NotifyHooks | StoreOutput] = []
    if type(effect) is Handoff:
        (child,) = node.children
        output, usage, error = _output_of(child.node, child.key)
        if hooks:
            chores.append(NotifyHooks(OnSubagentStop(spec.name_of(child.node.agent))))
        answer: HandoffCompleted | AgentsRan = HandoffCompleted(output, usage, error)
    else:
        earlier = node.deliver.results if type(node.deliver) is AgentsRan else ()
        results: list[AgentRunResult] = list(earlier)
        for child in node.children:
            output, usage, error = _output_of(child.node, child.key)
            if error is None:
                chores.append(StoreOutput(child.key, output))
            if hooks:
                chores.append(NotifyHooks(OnSubagentStop(spec.name_of(child.node.agent))))
            state = child.node.state
            escalated = child.node.escalated or (isinstance(state, OpaqueState) and state.escalated)
            results.append(AgentRunResult(child.key, output, usage, error, escalated))
        answer = AgentsRan(tuple(results))
    node = attrs.evolve(node, children=(), chores=(*node.chores, *chores), deliver=answer)
    return _after_chores(spec, node, events)


def _join_agents(spec: TreeSpec, node: TreeNode, effect: ExecuteTools, events: list[AgentEvent]) -> TreeNode:
    """Feed the round the answers of its agents used as tools that finished,
    each as soon as it did (in the order of the steps); the others run on."""
    finished = {c.key: c.node for c in node.children if c.node.finished}
    if not finished:
        return node
    results: list[StepResult] = []
    spent = Usage()
    for step in effect.steps:
        child = finished.get(f"{step.tool}:{step.call_id}") if type(step) is InvokeTool else None
        if child is None:
            continue
        output, usage, error = _output_of(child)
        spent = spent + usage
        if error is None:
            results.append(ToolReturned(step.call_id, output))
        else:
            failure = ToolCrashed(f"agent {spec.name_of(child.agent)!r} failed: {describe(error)}")
            results.append(ToolRaised(step.call_id, failure))
    # The sub-runs' usage is the caller's: it spent it through them.
    running = tuple(c for c in node.children if c.key not in finished)
    node = attrs.evolve(node, state=_spent(node.state, spent), children=running)
    return _feed_own(spec, node, ToolsExecuted(tuple(results)), events)


def _after_chores(spec: TreeSpec, node: TreeNode, events: list[AgentEvent]) -> TreeNode:
    if node.chores or node.deliver is None or node.children:
        return node
    return _feed_own(spec, attrs.evolve(node, deliver=None), node.deliver, events)


# -- feeding results ------------------------------------------------------------------------


def _feed(
    spec: TreeSpec, node: TreeNode, path: tuple[str, ...], result: EffectResult, events: list[AgentEvent]
) -> TreeNode:
    """Feed ``result`` to the sub-machine at ``path`` below ``node``."""
    if path:
        key, rest = path[0], path[1:]
        index = next((i for i, c in enumerate(node.children) if c.key == key), None)
        if index is None:
            raise StepError(f"no sub-machine at {key!r} under {node.agent!r}")
        child = node.children[index]
        own: list[AgentEvent] = []
        fed = _feed(spec, child.node, rest, result, own)
        if not _private(node):
            events.extend(_forwarded(child.key, tuple(own)))
        children = (*node.children[:index], TreeChild(key, fed), *node.children[index + 1 :])
        return _after_children(spec, attrs.evolve(node, children=children), events)
    if type(result) is RunInterrupted:
        # Whatever this sub-machine waits on (its chores included), an
        # interruption addressed to it ends it, as one at the root does.
        return _interrupt(spec, node, result, events)
    if node.chores:
        wanted = HooksNotified if type(node.chores[0]) is NotifyHooks else OutputStored
        if type(result) is not wanted:
            raise StepError(f"{node.agent!r} waits for {wanted.__name__}, not {type(result).__name__}")
        return _after_chores(spec, attrs.evolve(node, chores=node.chores[1:]), events)
    if node.children:
        if type(node.effect) is ExecuteTools and type(result) is ToolsExecuted:
            # Results of the round's other steps, while its agents run on.
            asked = {s.call_id for s in _round_rest(node)}
            stray = [r.call_id for r in result.results if r.call_id not in asked]
            if stray:
                raise StepError(f"{node.agent!r} asked the interpreter for no step of tool call {stray[0]!r}")
            node = attrs.evolve(node, escalated=node.escalated or result.escalated)
            return _feed_own(spec, node, result, events)
        raise StepError(f"{node.agent!r} waits for its children, not for {type(result).__name__}")
    if type(result) is ToolsExecuted and result.escalated:
        node = attrs.evolve(node, escalated=True)
    return _feed_own(spec, node, result, events)


def _interrupt(spec: TreeSpec, node: TreeNode, result: RunInterrupted, events: list[AgentEvent]) -> TreeNode:
    """An interruption ends every active sub-machine, innermost first."""
    if node.finished:
        return node
    if type(node.effect) is Terminate:
        # Its own run is over; only chores were left (an OnRunComplete, say):
        # an interruption drops them (the book: a cancelled run may abort it).
        return attrs.evolve(node, chores=(), children=(), deliver=None)
    spent = Usage()
    for child in node.children:
        own: list[AgentEvent] = []
        ended = _interrupt(spec, child.node, result, own)
        spent = spent + ended.state.usage
        if not _private(node):
            events.extend(_forwarded(child.key, tuple(own)))
    # What the children spent is the run's too: the interruption reports it.
    node = attrs.evolve(node, state=_spent(node.state, spent), children=(), chores=(), deliver=None)
    return _feed_own(spec, node, result, events)


def _private(node: TreeNode) -> bool:
    """Whether ``node``'s children are private sub-runs: agents used as
    tools, whose turns never reach their caller's stream or session."""
    return type(node.effect) is ExecuteTools


def private_path(node: TreeNode, path: tuple[str, ...]) -> bool:
    """Whether the sub-machine at ``path`` below ``node`` is (inside) a
    private sub-run, an agent used as a tool."""
    for key in path:
        if _private(node):
            return True
        child = next((c.node for c in node.children if c.key == key), None)
        if child is None:
            return False
        node = child
    return False


def _spent(state: NodeState, usage: Usage) -> NodeState:
    """``state`` having also spent ``usage`` (its children's)."""
    if usage == Usage() or isinstance(state, OpaqueState):
        return state
    return attrs.evolve(state, usage=state.usage + usage)


# -- the tree's pending effect -------------------------------------------------------------


def _round_rest(node: TreeNode) -> tuple[CallStep, ...]:
    """The steps of a round whose agent steps run as children (by key)."""
    keys = {c.key for c in node.children}
    assert type(node.effect) is ExecuteTools
    return tuple(
        s for s in node.effect.steps if not (type(s) is InvokeTool and f"{s.tool}:{s.call_id}" in keys)
    )


def leaves(node: TreeNode, path: tuple[str, ...] = ()) -> list[AtPath]:
    """Every active sub-machine's pending effect, in tree order."""
    if node.chores:
        return [AtPath(path, node.chores[0])]
    if node.children:
        found: list[AtPath] = []
        rest = _round_rest(node) if type(node.effect) is ExecuteTools else ()
        if rest:
            found.append(AtPath(path, ExecuteTools(rest)))
        for child in node.children:
            if not child.node.finished:
                found.extend(leaves(child.node, (*path, child.key)))
        return found
    if type(node.effect) is Terminate:
        return []
    return [AtPath(path, _addressed(node.effect, path))]


def _addressed(effect: Effect, path: tuple[str, ...]) -> Effect:
    """``effect`` with its approval requests marked with the path that asks."""
    if not path or type(effect) not in (AskApprovals, AwaitApproval):
        return effect
    assert type(effect) is AskApprovals or type(effect) is AwaitApproval
    requests = tuple(attrs.evolve(r, path=path) for r in effect.requests)
    return type(effect)(requests)


def _scope(node: TreeNode, path: tuple[str, ...]) -> tuple[str, ...]:
    """The path of the innermost private sub-run ``path`` runs in (``()``:
    the run's own): whose run-scoped state it reads and writes."""
    scope: tuple[str, ...] = ()
    for index, key in enumerate(path):
        private = _private(node)
        child = next((c.node for c in node.children if c.key == key), None)
        if private:
            scope = path[: index + 1]
        if child is None:
            break
        node = child
    return scope


def _with_state(state: TreeState, leaf: AtPath) -> AtPath:
    """``leaf`` with what its instructions may read from the run-scoped state."""
    if type(leaf.effect) is not RenderInstructions:
        return leaf
    scope = _scope(state.root, leaf.path)
    written: dict[str, str] = {}
    for stored in state.stored:
        if stored.scope == scope:
            written.pop(stored.key, None)  # the order written, the last value
            written[stored.key] = stored.text
    if not written:
        return leaf
    return AtPath(leaf.path, RenderInstructions(leaf.effect.turn, tuple(written.items())))


def _written(state: TreeState, result: EffectResult) -> tuple[Stored, ...]:
    """The outputs ``result`` says were written (``OutputStored`` answering
    a ``StoreOutput``), in tree order."""
    asked = leaves(state.root)
    answers = [(a.path, a.result) for a in result.results] if type(result) is AllPerformed else [((), result)]
    by_path = {leaf.path: leaf.effect for leaf in asked}
    found: list[Stored] = []
    for path, answer in answers:
        effect = by_path.get(path)
        if type(effect) is StoreOutput and type(answer) is OutputStored:
            found.append(Stored(_scope(state.root, path), effect.key, effect.text))
    return tuple(found)


def pending_effect(state: TreeState) -> Effect:
    """The effect the tree waits on (a function of the state)."""
    found = [_with_state(state, leaf) for leaf in leaves(state.root)]
    if not found:
        return Terminate()
    if len(found) == 1 and not found[0].path:
        return found[0].effect
    running = [leaf for leaf in found if type(leaf.effect) is not AwaitApproval]
    if running:
        return PerformAll(tuple(running))
    requests: list[ApprovalRequest] = []
    for leaf in found:
        assert type(leaf.effect) is AwaitApproval
        requests.extend(leaf.effect.requests)
    return AwaitApproval(tuple(requests))


def _outcome(state: TreeState, events: list[AgentEvent], appended: tuple[Item, ...] = ()) -> TreeOutcome:
    return TreeOutcome(state, tuple(events), pending_effect(state), appended)


# -- the public steps -------------------------------------------------------------------------


def start_tree(
    spec: TreeSpec, input: AgentInput, run_id: RunId, depth: int = 0, now: float | None = None
) -> TreeOutcome:
    """Begin a tree run at its root; ``now`` is the clock reading it began
    with (children that begin at once take their deadlines from it)."""
    root = spec.member(spec.root)
    if root is None:
        raise StepError(f"the tree has no root agent {spec.root!r}")
    begun = _begin(root, root.name, input.items, run_id, depth)
    events = list(begun.events)
    node = TreeNode(root.key, begun.state, begun.effect, handoffs_left=root.handoffs, root=True)
    node = _settle(spec, attrs.evolve(node, handoff_limit=root.handoffs), begun, events)
    if spec.timed:
        node = _stamped(spec, node, now)
    node = enforce_limits(spec, node, events)
    return _outcome(TreeState(node), events, begun.appended)


def step_tree(state: TreeState, result: EffectResult, spec: TreeSpec, now: float | None = None) -> Step:
    """Feed the pending effect's result: the next outcome (never raises).

    ``now`` is the clock reading taken when ``result`` came back (None: time
    is not checked). Time is the machine's, for every member as for the run
    (:mod:`helikon.loop._clock`): a member with a timeout of its own that
    began since the last reading is given its deadline ``timeout`` seconds
    after ``now``; a member whose deadline ``now`` reaches is interrupted
    with ``TimedOut`` (its results of this step are not folded, unless they
    only record the machine's chores) and fails, and its parent goes on
    from that failure as from any other.
    """
    if state.terminal:
        return Failure(StepError("the run is over"))
    events: list[AgentEvent] = []
    try:
        written = _written(state, result)
        root = enforce_limits(spec, _step_root(spec, state, result, events, now), events)
    except StepError as error:
        return Failure(error)
    if spec.timed:
        root = _stamped(spec, root, now)
    stored = (*state.stored, *written) if written else state.stored
    return Success(_outcome(attrs.evolve(state, root=root, stored=stored), events))


def _step_root(
    spec: TreeSpec, state: TreeState, result: EffectResult, events: list[AgentEvent], now: float | None
) -> TreeNode:
    root = state.root
    if type(result) is RunInterrupted:
        return _interrupt(spec, root, result, events)
    expected = pending_effect(state)
    match expected:
        case PerformAll(effects=asked):
            # A bare result answers the root's own effect (path ``()``): a
            # step of the root's tool round performed on its own, say.
            answers = result.results if type(result) is AllPerformed else (PathResult((), result),)
            _check_answers(asked, answers)
            late = _late(root, answers, now)
            for answer in answers:
                root = _feed(spec, root, answer.path, late.get(answer.path, answer.result), events)
            return root
        case AwaitApproval(requests=requests) if leaves(root) != [AtPath((), expected)]:
            if type(result) is not ApprovalsGiven:
                raise StepError(f"the tree waits for ApprovalsGiven, not {type(result).__name__}")
            return _route_approvals(spec, root, requests, result, events)
        case _:
            return _feed(spec, root, (), _unwrapped(result), events)


def _unwrapped(result: EffectResult) -> EffectResult:
    """``result`` for the root's own effect alone: an ``AllPerformed`` that
    answers only the path ``()`` is that path's result (a part performed
    while other paths were pending, which ended meanwhile)."""
    if type(result) is AllPerformed and len(result.results) == 1 and not result.results[0].path:
        return result.results[0].result
    return result


def _late(
    root: TreeNode, answers: tuple[PathResult, ...], now: float | None
) -> dict[tuple[str, ...], EffectResult]:
    """The answers the reading ``now`` finds late: those of sub-machines in a
    member below the root that is out of time, each replaced by the
    interruption (``TimedOut`` of the outermost such member), as the root's
    are by :func:`helikon.loop.on_time` (an answer that only records a chore
    is folded whatever the time). The interrupted sub-machine fails, and its
    parents go on from that failure as from any other."""
    late: dict[tuple[str, ...], EffectResult] = {}
    if now is None:
        return late
    for answer in answers:
        node = root
        for key in answer.path:
            child = next((c.node for c in node.children if c.key == key), None)
            if child is None:
                break
            node = child
            if isinstance(node.state, OpaqueState) or node.state.deadline is None:
                continue
            verdict = on_time(node.state, answer.result, now)
            if verdict is not answer.result:
                late[answer.path] = verdict
                break
    return late


def _stamped(spec: TreeSpec, node: TreeNode, now: float | None, top: bool = True) -> TreeNode:
    """``node`` with a deadline for each member below the root that began
    without one: ``timeout`` seconds after the reading ``now``."""
    if now is None or (not node.children and top):
        return node
    state = node.state
    if not top and not isinstance(state, OpaqueState) and state.deadline is None:
        member = spec.member(node.agent)
        if member is not None and member.timeout is not None:
            state = attrs.evolve(state, deadline=deadline_after(now, member.timeout), timeout=member.timeout)
    children = tuple(TreeChild(c.key, _stamped(spec, c.node, now, False)) for c in node.children)
    if state is node.state and all(a.node is b.node for a, b in zip(children, node.children, strict=True)):
        return node
    return attrs.evolve(node, state=state, children=children)


def _check_answers(asked: tuple[AtPath, ...], answers: tuple[PathResult, ...]) -> None:
    """The results must answer pending paths, each at most once (any of
    them, in any order: a path's result is fed as soon as it came)."""
    if not answers:
        raise StepError("AllPerformed answers none of the pending effects")
    pending = {a.path for a in asked}
    seen: set[tuple[str, ...]] = set()
    for answer in answers:
        where = "/".join(answer.path) or "(root)"
        if answer.path not in pending:
            raise StepError(f"no effect is pending at {where!r}")
        if answer.path in seen:
            raise StepError(f"two results for the effect at {where!r}")
        seen.add(answer.path)


def _route_approvals(
    spec: TreeSpec,
    root: TreeNode,
    requests: tuple[ApprovalRequest, ...],
    result: ApprovalsGiven,
    events: list[AgentEvent],
) -> TreeNode:
    """Give each waiting sub-machine the decisions about its own calls: a
    decision names its call by (path, call id); one without a path names the
    only pending call with that id."""
    exact = {(d.path, d.call_id): d for d in result.decisions}
    asked = {(r.path, r.call_id) for r in requests}
    for d in result.decisions:
        if d.path and (d.path, d.call_id) not in asked:
            raise StepError(f"no approval was asked for tool call {d.call_id} at {'/'.join(d.path)!r}")
    for leaf in leaves(root):
        assert type(leaf.effect) is AwaitApproval
        mine: list[ApprovalDecision] = []
        for request in leaf.effect.requests:
            decision = exact.get((request.path, request.call_id))
            if decision is None and request.path:
                decision = _unaddressed(requests, result, request)
            if decision is None:
                raise StepError(f"no decision for tool call {request.call_id}")
            mine.append(attrs.evolve(decision, path=()))
        root = _feed(spec, root, leaf.path, ApprovalsGiven(tuple(mine)), events)
    return root


def _unaddressed(
    requests: tuple[ApprovalRequest, ...], result: ApprovalsGiven, request: ApprovalRequest
) -> ApprovalDecision | None:
    """The decision without a path about ``request``'s call id, when that id
    names one pending call only."""
    decision = next((d for d in result.decisions if not d.path and d.call_id == request.call_id), None)
    if decision is None:
        return None
    sharing = sorted("/".join(r.path) or "(root)" for r in requests if r.call_id == request.call_id)
    if len(sharing) > 1:
        raise StepError(
            f"tool call id {request.call_id} is pending at {', '.join(sharing)}: "
            "answer each with its path (ApprovalRequest.decide)"
        )
    return decision


def deadline_at(state: object, path: tuple[str, ...]) -> tuple[float, float] | None:
    """The deadline the sub-machine at ``path`` runs under and the timeout
    that set it: the earliest of the run's and those of the members it runs
    in (None: none). Any state is accepted (a single machine's is its own
    deadline): an interpreter may use it to cut work short; the machine
    decides what is late.

    >>> deadline_at(None, ()) is None
    True
    """
    found: tuple[float, float] | None = _limit_of(state)
    if not isinstance(state, TreeState):
        return found
    node = state.root
    for key in path:
        child = next((c.node for c in node.children if c.key == key), None)
        if child is None:
            break
        node = child
        own = _limit_of(node.state)
        if own is not None and (found is None or own[0] < found[0]):
            found = own
    return found


def _limit_of(state: object) -> tuple[float, float] | None:
    deadline = getattr(state, "deadline", None)
    if deadline is None:
        return None
    timeout = getattr(state, "timeout", None)
    return float(deadline), float(timeout) if timeout is not None else 0.0


# -- usage limits -------------------------------------------------------------------------


def located(error: AgentError, key: str) -> AgentError:
    """``error``, when it is a usage limit a member found broken, placed one
    level further down the tree, under ``key``."""
    if type(error) is not UsageLimitExceeded or not key:
        return error
    return attrs.evolve(error, path=(key, *error.path))


def tree_usage(node: TreeNode) -> Usage:
    """What ``node`` and everything below it spent so far: its own state's
    usage, an answer waiting to be fed to it, and its active children's.
    (A child's usage moves into its parent's state as it is removed, so
    nothing is counted twice.)"""
    total = node.state.usage
    match node.deliver:
        case HandoffCompleted(usage=usage):
            total = total + usage
        case AgentsRan(results=results):
            for ran in results:
                total = total + ran.usage
        case None:
            pass
    for child in node.children:
        total = total + tree_usage(child.node)
    return total


def _node_at(node: TreeNode, path: tuple[str, ...]) -> TreeNode:
    for key in path:
        node = next(c.node for c in node.children if c.key == key)
    return node


def enforce_limits(spec: TreeSpec, root: TreeNode, events: list[AgentEvent]) -> TreeNode:
    """The tree's usage-limit rule, checked after every step: when any
    member is about to call its model or run a round of tool calls, the
    whole tree's usage (the model calls of this wave counted) must stay
    within the run's limits; else the tree ends as if interrupted, every
    active member failing with the :class:`~helikon.errors.UsageLimitExceeded`
    that names the first such member in tree order. Then each member below
    the root with limits of its own (:attr:`Member.limits`), outermost
    first in tree order, is held to them the same way over what it and
    everything below it spent: one that breaks them is interrupted with the
    error (its path relative to that member: the error is placed under the
    member's key as it reaches its parent)."""
    if root.finished:
        return root
    if not spec.limits.unlimited:
        broken = _broken(spec, spec.limits, root, ())
        if broken is not None:
            return _interrupt(spec, root, RunInterrupted(broken), events)
    if not any(m.key != spec.root and not m.limits.unlimited for m in spec.members):
        return root
    while True:
        found = _member_over(spec, root, ())
        if found is None:
            return root
        path, broken = found
        root = _feed(spec, root, path, RunInterrupted(broken), events)


def _broken(
    spec: TreeSpec, limits: UsageLimits, node: TreeNode, path: tuple[str, ...]
) -> UsageLimitExceeded | None:
    """The limit ``node`` (at ``path``) and what runs below it break as the
    first of its sub-machines about to spend does so, or None; the path named
    is relative to ``node``."""
    spending = [leaf for leaf in leaves(node, path) if type(leaf.effect) in (CallModel, ExecuteTools)]
    if not spending:
        return None
    calls = sum(1 for leaf in spending if type(leaf.effect) is CallModel)
    at = spending[0].path[len(path) :]
    agent = spec.name_of(_node_at(node, at).agent)
    return exceeded(limits, tree_usage(node), requests=calls, agent=agent, path=at)


def _member_over(
    spec: TreeSpec, node: TreeNode, path: tuple[str, ...]
) -> tuple[tuple[str, ...], UsageLimitExceeded] | None:
    """The first member below ``node`` (outermost first, in tree order) that
    is not finished and breaks limits of its own: its path and the error."""
    for child in node.children:
        if child.node.finished:
            continue
        where = (*path, child.key)
        member = spec.member(child.node.agent)
        if member is not None and not member.limits.unlimited:
            broken = _broken(spec, member.limits, child.node, where)
            if broken is not None:
                return where, broken
        found = _member_over(spec, child.node, where)
        if found is not None:
            return found
    return None


def resume_tree(state: TreeState) -> TreeOutcome:
    """The outcome to continue a stored tree run from: its pending effect."""
    return _outcome(state, [])


__all__ = [
    "Member",
    "NodeState",
    "OpaqueOutcome",
    "OpaqueState",
    "Stored",
    "TreeChild",
    "TreeNode",
    "TreeOutcome",
    "TreeSpec",
    "TreeState",
    "deadline_at",
    "enforce_limits",
    "leaves",
    "located",
    "pending_effect",
    "private_path",
    "resume_tree",
    "start_tree",
    "step_tree",
    "tree_usage",
]
