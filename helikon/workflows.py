"""Multi-agent composition: handoffs, agents as tools, and workflow agents.

- :class:`Handoff` — hand the conversation to another agent, which finishes
  the run (control does not come back).
- :class:`AgentAsTool` — call an agent like a tool and get its answer back.
- :class:`SequentialAgent`, :class:`ParallelAgent`, :class:`LoopAgent`,
  :class:`GraphAgent` — fixed topologies of sub-agents, each one pure
  machine (:mod:`helikon.agents`) whose only effect is "run these children".
- :class:`SwarmAgent` — a pool of LLM agents with handoffs among all of them.

Every agent here has the same ``run(ctx, input)`` as :class:`~helikon.LlmAgent`
and nests inside the others. Each child's final text is written to the run's
shared state under its key (``ctx.state[key]``), where dynamic instructions
of later agents can read it. Builder methods return new values; nothing is
mutated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, Self, runtime_checkable

import attrs

from helikon._deprecated import deprecated_names
from helikon.agent import LlmAgent, resume_agent, run_agent
from helikon.agents import Node, WorkflowKind, WorkflowSpec, graph_errors
from helikon.cancel import CancellationToken
from helikon.config import RunConfig
from helikon.context import Actions, HookRegistry, RunContext, SessionState, ToolContext
from helikon.effects import EffectResult
from helikon.errors import ConfigError, MaxHandoffsExceeded, RunError, ToolError, describe
from helikon.events import AgentEvent, HandoffItem, RunFailed
from helikon.ids import RunId
from helikon.interpreters._env import Limits, RunEnv, build_env
from helikon.interpreters._machine import WorkflowMachine
from helikon.items import AgentInput
from helikon.loop import AgentSpec
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest, ToolEffect, Usage
from helikon.results import collect


@runtime_checkable
class Agent(Protocol):
    """Anything that runs like an agent: a name, a description, and ``run``.

    Your own agents (arbitrary async code) fit too; composites run them as
    an effect and forward their events.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]: ...


# -- argument checks ---------------------------------------------------------------


def _refuse(owner: str, field: str, expected: str, value: object) -> ConfigError:
    """The error for a constructor argument of the wrong type, naming the field."""
    return ConfigError(f"{owner}: {field} must be {expected}, not {type(value).__name__} ({value!r:.60})")


def _check_text(owner: str, field: str, value: object, *, empty: bool = True) -> None:
    if not isinstance(value, str) or (not empty and not value):
        raise _refuse(owner, field, "a string" if empty else "a non-empty string", value)


def _check_agent(owner: str, field: str, value: object) -> None:
    if not callable(getattr(value, "run", None)) or not isinstance(getattr(value, "name", None), str):
        raise _refuse(owner, field, "an agent (with a name and a run method)", value)


def _check_count(owner: str, field: str, value: object, *, least: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(owner, field, "an integer" + (" or None" if optional else ""), value)
    if value < least:
        raise ConfigError(f"{owner}: {field} must be >= {least}, got {value}")


def _pairs(owner: str, field: str, value: object) -> tuple[tuple[Any, Any], ...]:
    """``value`` as a tuple of pairs (a list or tuple of 2-sequences is fine)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise _refuse(owner, field, "a tuple of pairs", value)
    pairs = []
    for item in value:
        if isinstance(item, (str, bytes)) or not isinstance(item, (list, tuple)) or len(item) != 2:
            raise _refuse(owner, field, "a tuple of pairs", value)
        pairs.append((item[0], item[1]))
    return tuple(pairs)


# -- handoffs --------------------------------------------------------------------


@attrs.frozen(eq=False)
class Handoff:
    """A candidate agent the conversation may be transferred to.

    ``Handoff.to(agent)`` names it; the agent loop shows the model one
    ``transfer_to_<slug>`` tool per handoff, described by the target's
    description.
    """

    target_name: str
    description: str
    _agent: Any = None
    _registry: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        owner = f"Handoff to {self.target_name!r}"
        _check_text("Handoff", "target_name", self.target_name, empty=False)
        _check_text(owner, "description", self.description)
        if self._agent is not None:
            _check_agent(owner, "agent", self._agent)
        if self._registry is not None and not isinstance(self._registry, Mapping):
            raise _refuse(owner, "registry", "a mapping of names to agents", self._registry)
        if (self._agent is None) == (self._registry is None):
            raise ConfigError(f"{owner}: give exactly one of agent (Handoff.to) or registry (Handoff.lazy)")

    @classmethod
    def to(cls, agent: Any) -> Handoff:
        """A handoff to ``agent``."""
        _check_agent("Handoff.to", "agent", agent)
        return cls(agent.name, getattr(agent, "description", "") or "", agent)

    @classmethod
    def lazy(cls, name: str, description: str, registry: Mapping[str, Any]) -> Handoff:
        """A handoff to whatever ``registry[name]`` is when it fires (swarms)."""
        return cls(name, description, None, registry)

    def resolve(self) -> Any:
        """The target agent."""
        if self._agent is not None:
            return self._agent
        assert self._registry is not None
        return self._registry[self.target_name]


# -- agent as tool ---------------------------------------------------------------


@attrs.frozen(eq=False)
class AgentAsTool:
    """Any agent as a tool with one string argument, ``input``.

    The sub-run is isolated: a fresh (no) session, empty hooks, its own run
    config. It inherits the user context, tracer, cancel token, the nesting
    depth (still capped by ``max_agent_depth``) and the parent's whole
    permission configuration: mode, deny/allow/guard rules, policy, approval
    handler, redaction (the book: sub-agents are governed like their parent).
    In a run, the sub-agent is a sub-machine of its caller's agent tree (its
    effects recorded at the path ``tool:call id``), so a question for a human
    inside it suspends the whole run like any other. The tool's output is the
    sub-agent's final text; a failed sub-run is a tool error the model sees.
    """

    agent: Any
    name: str = attrs.field(default=None)
    description: str = attrs.field(default=None)
    effect: ToolEffect = ToolEffect.SIDE_EFFECT

    def __attrs_post_init__(self) -> None:
        _check_agent("AgentAsTool", "agent", self.agent)
        if self.name is None:
            object.__setattr__(self, "name", self.agent.name)
        if self.description is None:
            object.__setattr__(self, "description", getattr(self.agent, "description", "") or self.agent.name)
        owner = f"AgentAsTool {self.name!r}"
        _check_text("AgentAsTool", "name", self.name, empty=False)
        _check_text(owner, "description", self.description)
        if not isinstance(self.effect, ToolEffect):
            raise _refuse(owner, "effect", "a ToolEffect", self.effect)

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
            "required": ["input"],
            "additionalProperties": False,
        }

    @property
    def output_schema(self) -> None:
        return None

    def with_name(self, name: str) -> AgentAsTool:
        return attrs.evolve(self, name=name)

    def with_description(self, description: str) -> AgentAsTool:
        return attrs.evolve(self, description=description)

    def sub_context(self, parent: RunContext[Any]) -> RunContext[Any]:
        """The context the sub-run gets from its parent run's: isolated (no
        session, no run hooks, a fresh state store), one level deeper, and
        governed and priced like the parent. In an agent tree the sub-agent is a
        sub-machine of its caller's run (so it may suspend for approval with
        the whole run); :meth:`invoke` runs it whole otherwise."""
        isolated = self._isolated(parent.user_ctx, parent.tracer, parent.cancel, parent.agent_depth)
        return isolated.with_governed(parent.governed()).with_prices(parent.prices)

    @staticmethod
    def _isolated(user_ctx: Any, tracer: Any, cancel: Any, depth: int) -> RunContext[Any]:
        return RunContext(
            user_ctx, None, HookRegistry(), tracer, cancel, SessionState(), agent_depth=depth + 1
        )

    async def invoke(self, ctx: ToolContext[Any], args: Mapping[str, Any]) -> str:
        isolated = self._isolated(ctx.user_ctx, ctx.tracer, ctx.cancel, ctx.agent_depth)
        # Run whole, the sub-run cannot suspend: a question goes to the handler or is denied.
        sub_ctx = isolated.with_governed(attrs.evolve(ctx.governed, suspend_on_approval=False))
        sub_ctx = sub_ctx.with_prices(ctx.prices)  # priced like its caller, as in a tree
        try:
            result = await collect(self.agent.run(sub_ctx, AgentInput.from_user_text(str(args["input"]))))
        except RunError as exc:
            raise ToolError(f"agent {self.agent.name!r} failed: {describe(exc.error)}") from exc
        return result.final_output


# -- workflow agents -------------------------------------------------------------


class _Resumes:
    """``resume``, the same for the workflow agents and the swarm."""

    __slots__ = ()

    def resume(
        self,
        ctx: RunContext[Any] | None,
        state: Any,
        answer: EffectResult | None = None,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
        allow_changed_definition: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """Continue a run from a saved ``state`` (see ``LlmAgent.resume``)."""
        return resume_agent(
            self,
            ctx,
            state,
            answer,
            config=config,
            interpreter=interpreter,
            allow_changed_definition=allow_changed_definition,
        )


@attrs.frozen(eq=False)
class _Workflow(_Resumes):
    """What the workflow agents share: children by key, a spec, ``run``."""

    name: str
    description: str = ""
    # keyword-only, so each workflow's own fields follow ``(name, description)``
    # positionally: ``LoopAgent(name, description, max_iterations)`` as in the book.
    children: tuple[tuple[str, Any], ...] = attrs.field(default=(), kw_only=True)
    config: RunConfig = attrs.field(default=RunConfig(), kw_only=True)

    kind = WorkflowKind.SEQUENTIAL

    def __attrs_post_init__(self) -> None:
        kind = type(self).__name__
        _check_text(kind, "name", self.name, empty=False)
        owner = f"{kind} {self.name!r}"
        _check_text(owner, "description", self.description)
        children = _pairs(owner, "children", self.children)
        for key, child in children:
            _check_text(owner, "a child key", key, empty=False)
            _check_agent(owner, f"child {key!r}", child)
        object.__setattr__(self, "children", children)
        if not isinstance(self.config, RunConfig):
            raise _refuse(owner, "config", "a RunConfig", self.config)

    def _spec(self, config: RunConfig) -> WorkflowSpec:
        return WorkflowSpec(
            self.name,
            self.kind,
            tuple(Node(key, child.name) for key, child in self.children),
            self._edges(),
            self._max_iterations(),
            config.max_agent_depth,
        )

    def _edges(self) -> tuple[tuple[str, str], ...]:
        return ()

    def _max_iterations(self) -> int:
        return 1

    @property
    def spec(self) -> WorkflowSpec:
        """The workflow as data."""
        return self._spec(self.config)

    def _with_child(self, key: str, agent: Any) -> Self:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{self.name!r}: a child key must be a non-empty string")
        if not callable(getattr(agent, "run", None)):
            raise ConfigError(f"{self.name!r}: {agent!r} is not an agent (it has no run method)")
        if any(existing == key for existing, _ in self.children):
            raise ConfigError(f"{self.name!r} already has a child keyed {key!r}; use a distinct key")
        return attrs.evolve(self, children=(*self.children, (key, agent)))

    def run(
        self,
        ctx: RunContext[Any] | None,
        input: AgentInput | str,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
        run_id: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run the workflow: an async iterator of its events (see ``LlmAgent.run``)."""
        if not self.children:
            raise ConfigError(f"workflow {self.name!r} has no sub-agents")
        return run_agent(self, ctx, input, config=config, interpreter=interpreter, run_id=run_id)

    def make_env(
        self,
        ctx: RunContext[Any],
        interpreter: Any,
        *,
        run_id: str | None = None,
        path: tuple[str | int, ...] = (),
        actions: Actions | None = None,
        config: RunConfig | None = None,
        parent: Limits | None = None,
    ) -> RunEnv:
        """The world an interpreter needs to run this workflow."""
        env = build_env(
            AgentSpec(self.name, config=config or self.config),
            ctx,
            run_id=RunId(run_id) if run_id is not None else interpreter.new_run_id(),
            model=_NoModel(),
            parent=parent,
            actions=actions,
            children=dict(self.children),
            path=path,
        )
        return attrs.evolve(env, machine=WorkflowMachine(self._spec(env.spec.config)))


class _NoModel:
    """A workflow has no model of its own."""

    capabilities = ModelCapabilities()
    provider = "none"
    model_id = ""

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        raise ConfigError("a workflow agent does not call a model")


@attrs.frozen(eq=False)
class SequentialAgent(_Workflow):
    """Sub-agents in order, each on the workflow's input; fails fast.

    ``SequentialAgent("pipeline", "Research, then write.").then(researcher).then(writer)``
    """

    kind = WorkflowKind.SEQUENTIAL

    def then(self, agent: Any) -> SequentialAgent:
        """Append a step keyed by the agent's name."""
        return self._with_child(agent.name, agent)

    def then_keyed(self, key: str, agent: Any) -> SequentialAgent:
        """Append a step under an explicit state key."""
        return self._with_child(key, agent)


@attrs.frozen(eq=False)
class ParallelAgent(_Workflow):
    """Branches at once on the input; collect-all failure; the output is a
    JSON object of the branches' outputs with sorted keys."""

    kind = WorkflowKind.PARALLEL

    def add(self, agent: Any) -> ParallelAgent:
        """Add a branch keyed by the agent's name."""
        return self._with_child(agent.name, agent)

    def branch(self, key: str, agent: Any) -> ParallelAgent:
        """Add a branch under an explicit key (keys must be unique)."""
        return self._with_child(key, agent)


@attrs.frozen(eq=False)
class LoopAgent(_Workflow):
    """Sub-agents in order, pass after pass, up to ``max_iterations`` passes;
    a tool that escalates (``ctx.actions.escalate()``) ends the loop."""

    max_iterations: int = 1
    kind = WorkflowKind.LOOP

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        _check_count(f"LoopAgent {self.name!r}", "max_iterations", self.max_iterations, least=1)

    def _max_iterations(self) -> int:
        return self.max_iterations

    def then(self, agent: Any) -> LoopAgent:
        return self._with_child(agent.name, agent)

    def then_keyed(self, key: str, agent: Any) -> LoopAgent:
        return self._with_child(key, agent)


class GraphBuildError(ConfigError):
    """A graph that cannot run: empty, duplicate or unknown nodes, a cycle."""


@attrs.frozen(eq=False)
class GraphAgent(_Workflow):
    """A DAG of agents: a node runs when its predecessors are done, with
    their outputs as labelled context. Build it with :meth:`builder`."""

    edges: tuple[tuple[str, str], ...] = ()
    kind = WorkflowKind.GRAPH

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        owner = f"GraphAgent {self.name!r}"
        edges = _pairs(owner, "edges", self.edges)
        for src, dst in edges:
            _check_text(owner, "an edge's source", src, empty=False)
            _check_text(owner, "an edge's target", dst, empty=False)
        object.__setattr__(self, "edges", edges)

    def _edges(self) -> tuple[tuple[str, str], ...]:
        return self.edges

    @staticmethod
    def builder() -> GraphBuilder:
        return GraphBuilder()


@attrs.frozen
class GraphBuilder:
    """Builds a :class:`GraphAgent`; ``build()`` checks the graph."""

    _name: str = ""
    _description: str = ""
    _nodes: tuple[tuple[str, Any], ...] = ()
    _edges: tuple[tuple[str, str], ...] = ()

    def name(self, name: str) -> GraphBuilder:
        return attrs.evolve(self, name=name)

    def description(self, description: str) -> GraphBuilder:
        return attrs.evolve(self, description=description)

    def node(self, key: str, agent: Any) -> GraphBuilder:
        return attrs.evolve(self, nodes=(*self._nodes, (key, agent)))

    def edge(self, src: str, dst: str) -> GraphBuilder:
        return attrs.evolve(self, edges=(*self._edges, (src, dst)))

    def build(self) -> GraphAgent:
        if not self._name:
            raise GraphBuildError("a graph needs a name")
        errors = graph_errors(tuple(k for k, _ in self._nodes), self._edges)
        if errors:
            raise GraphBuildError(f"graph {self._name!r}: " + "; ".join(errors))
        return GraphAgent(self._name, self._description, self._edges, children=self._nodes)


# -- swarm -------------------------------------------------------------------------


class SwarmBuildError(ConfigError):
    """A swarm that cannot run: no members, duplicate names, unknown entry."""


@attrs.frozen(eq=False)
class SwarmAgent(_Resumes):
    """A pool of LLM agents with a handoff from every member to every other.

    The run is the ordinary handoff-driven loop of the entry member; it ends
    as soon as the active member answers instead of handing off. With
    ``max_handoffs``, the run fails with ``MaxHandoffsExceeded`` once more
    handoffs than that have happened. Build it with :meth:`builder`.
    """

    name: str
    description: str
    members: Mapping[str, LlmAgent[Any]]
    entry: str
    max_handoffs: int | None = None

    def __attrs_post_init__(self) -> None:
        _check_text("SwarmAgent", "name", self.name, empty=False)
        owner = f"SwarmAgent {self.name!r}"
        _check_text(owner, "description", self.description)
        if not isinstance(self.members, Mapping) or not self.members:
            raise _refuse(owner, "members", "a non-empty mapping of names to LlmAgents", self.members)
        for key, member in self.members.items():
            if not isinstance(member, LlmAgent):
                raise _refuse(owner, f"member {key!r}", "an LlmAgent", member)
        _check_text(owner, "entry", self.entry, empty=False)
        if self.entry not in self.members:
            members = ", ".join(sorted(self.members))
            raise ConfigError(f"{owner}: entry {self.entry!r} is not a member ({members})")
        _check_count(owner, "max_handoffs", self.max_handoffs, least=0, optional=True)

    @staticmethod
    def builder() -> SwarmBuilder:
        return SwarmBuilder()

    def run(
        self,
        ctx: RunContext[Any] | None,
        input: AgentInput | str,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
        run_id: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        return run_agent(self, ctx, input, config=config, interpreter=interpreter, run_id=run_id)

    def make_env(self, ctx: RunContext[Any], interpreter: Any, **kw: Any) -> RunEnv:
        """Runs as its entry member; the agent tree counts the handoffs
        (``max_handoffs``) along the chain, in the machine."""
        return self.members[self.entry].make_env(ctx, interpreter, **kw)


@attrs.frozen
class SwarmBuilder:
    """Builds a :class:`SwarmAgent`; ``build()`` checks it."""

    _name: str = ""
    _description: str = ""
    _members: tuple[LlmAgent[Any], ...] = ()
    _entry: str | None = None
    _max_handoffs: int | None = None

    def name(self, name: str) -> SwarmBuilder:
        return attrs.evolve(self, name=name)

    def description(self, description: str) -> SwarmBuilder:
        return attrs.evolve(self, description=description)

    def member(self, agent: LlmAgent[Any]) -> SwarmBuilder:
        return attrs.evolve(self, members=(*self._members, agent))

    def entry(self, name: str) -> SwarmBuilder:
        return attrs.evolve(self, entry=name)

    def max_handoffs(self, limit: int) -> SwarmBuilder:
        if limit < 0:
            raise SwarmBuildError("max_handoffs must be >= 0")
        return attrs.evolve(self, max_handoffs=limit)

    def build(self) -> SwarmAgent:
        if not self._members:
            raise SwarmBuildError("a swarm needs at least one member")
        names = [m.name for m in self._members]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SwarmBuildError("duplicate member names: " + ", ".join(duplicates))
        for member in self._members:
            if not isinstance(member, LlmAgent):
                raise SwarmBuildError(f"swarm members must be LlmAgents, not {type(member).__name__}")
        entry = self._entry or names[0]
        if entry not in names:
            raise SwarmBuildError(f"unknown entry {entry!r}; members are: {', '.join(names)}")
        registry: dict[str, LlmAgent[Any]] = {}
        for member in self._members:
            others = [
                Handoff.lazy(o.name, o.description, registry) for o in self._members if o.name != member.name
            ]
            registry[member.name] = member.with_handoffs(*member.handoffs, *others)
        return SwarmAgent(self._name or entry, self._description, registry, entry, self._max_handoffs)


__all__ = [
    "Agent",
    "AgentAsTool",
    "GraphAgent",
    "GraphBuildError",
    "GraphBuilder",
    "Handoff",
    "LoopAgent",
    "ParallelAgent",
    "SequentialAgent",
    "SwarmAgent",
    "SwarmBuildError",
    "SwarmBuilder",
]


async def _bounded_handoffs(stream: AsyncIterator[AgentEvent], limit: int) -> AsyncIterator[AgentEvent]:
    """``stream``, failing with ``MaxHandoffsExceeded`` after ``limit`` handoffs
    (the old stream wrapper; the agent tree now counts handoffs itself)."""
    handoffs = 0
    usage = Usage()
    try:
        async for event in stream:
            if type(event) is HandoffItem:
                handoffs += 1
                if handoffs > limit:
                    yield RunFailed(MaxHandoffsExceeded(limit), usage)
                    return
            yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


__getattr__ = deprecated_names(
    __name__,
    {
        "bounded_handoffs": (
            lambda: _bounded_handoffs,
            "SwarmAgent(max_handoffs=...) counts handoffs in the machine (with the run's real usage)",
        )
    },
)
