"""Workflow agents as one pure machine: sequential, parallel, loop, graph.

A workflow runs child agents and composes their outputs; it never calls a
model itself. Its only effect is :class:`~helikon.effects.RunAgents` (run
these children, possibly at once), answered by
:class:`~helikon.effects.AgentsRan` with the children's results *in any
order*: the machine folds them in node order, so the final output, the state
and the failure report do not depend on completion order.

Rules, after the book:

- **sequential**: children run in order, each on the workflow's input; the
  first failure fails the run; the output is the last child's.
- **parallel**: every branch runs at once on the input; failures are
  collect-all (one aggregate ``ChildrenFailed``); the output is a JSON object
  of the branches' outputs with sorted keys, emitted as a final message.
- **loop**: the children run in order, pass after pass, up to
  ``max_iterations`` passes; a child whose tool escalated ends the run with
  success after that child; running out of passes fails with
  ``MaxIterationsExceeded``.
- **graph**: a DAG scheduled in Kahn wavefronts: a node runs once all its
  predecessors are done, on the input plus one labelled context message per
  predecessor; a failed node skips its transitive descendants while
  independent nodes finish; the output is the single sink's text, or a JSON
  object of the sinks' outputs.
"""

from __future__ import annotations

import enum

import attrs
import msgspec
from returns.result import Failure, Result, Success

from helikon.effects import AgentRun, AgentsRan, Effect, EffectResult, RunAgents, RunInterrupted, Terminate
from helikon.errors import (
    AgentError,
    ChildFailure,
    ChildrenFailed,
    MaxAgentDepthExceeded,
    MaxIterationsExceeded,
    OtherError,
    StepError,
)
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, RunStarted
from helikon.ids import RunId
from helikon.items import AssistantMessage, Item, TextPart, user_text
from helikon.loop import Done, Failed
from helikon.model import Usage


class WorkflowKind(enum.Enum):
    """How a workflow schedules its children."""

    #: One after another, failing fast.
    SEQUENTIAL = "sequential"
    #: All at once, collect-all.
    PARALLEL = "parallel"
    #: In order, pass after pass, until a tool escalates.
    LOOP = "loop"
    #: A DAG in Kahn wavefronts.
    GRAPH = "graph"


@attrs.frozen
class Node:
    """A child: its ``key`` in the workflow (and in the run state) and the
    name of the agent that runs it."""

    key: str
    agent: str


@attrs.frozen
class WorkflowSpec:
    """A workflow's definition as data."""

    name: str
    kind: WorkflowKind
    nodes: tuple[Node, ...]
    edges: tuple[tuple[str, str], ...] = ()
    max_iterations: int = 1
    max_agent_depth: int = 8


@attrs.frozen
class Running:
    """Children are running."""


#: A workflow's phase.
WorkflowPhase = Running | Done | Failed


@attrs.frozen
class WorkflowState:
    """A workflow run between two steps.

    ``outputs`` and ``failed`` are kept in node order; ``running`` are the
    keys of the children whose results are awaited.
    """

    run_id: RunId
    agent: str
    input: tuple[Item, ...]
    depth: int = 0
    phase: WorkflowPhase = Running()
    outputs: tuple[tuple[str, str], ...] = ()
    failed: tuple[ChildFailure, ...] = ()
    skipped: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    position: int = 0
    iteration: int = 1
    usage: Usage = Usage()
    #: The run's deadline and timeout, as :attr:`helikon.loop.RunState.deadline`.
    deadline: float | None = None
    timeout: float | None = None


@attrs.frozen
class WorkflowOutcome:
    """The result of a workflow step (see :class:`helikon.loop.Outcome`)."""

    state: WorkflowState
    events: tuple[AgentEvent, ...]
    effect: Effect
    appended: tuple[Item, ...] = ()


Step = Result[WorkflowOutcome, StepError]


# -- graph helpers -----------------------------------------------------------


def predecessors(spec: WorkflowSpec, key: str) -> tuple[str, ...]:
    """The nodes ``key`` depends on, in node order."""
    sources = {src for src, dst in spec.edges if dst == key}
    return tuple(n.key for n in spec.nodes if n.key in sources)


def descendants(spec: WorkflowSpec, key: str) -> tuple[str, ...]:
    """Every node reachable from ``key``, in node order.

    >>> spec = WorkflowSpec("g", WorkflowKind.GRAPH, (Node("a", "A"), Node("b", "B"), Node("c", "C")),
    ...                     (("a", "b"), ("b", "c")))
    >>> descendants(spec, "a")
    ('b', 'c')
    """
    seen: set[str] = set()
    frontier = [key]
    while frontier:
        current = frontier.pop()
        for src, dst in spec.edges:
            if src == current and dst not in seen:
                seen.add(dst)
                frontier.append(dst)
    return tuple(n.key for n in spec.nodes if n.key in seen)


def sinks(spec: WorkflowSpec) -> tuple[str, ...]:
    """The nodes with no outgoing edge, in node order."""
    sources = {src for src, _ in spec.edges}
    return tuple(n.key for n in spec.nodes if n.key not in sources)


def graph_errors(nodes: tuple[str, ...], edges: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """Why a graph cannot be built (empty, duplicates, unknown nodes, cycles).

    >>> graph_errors(("a", "b"), (("a", "b"), ("b", "a")))
    ('the graph has a cycle through: a, b',)
    >>> graph_errors(("a",), (("a", "z"),))
    ("edge ('a', 'z') names an unknown node 'z'",)
    """
    errors: list[str] = []
    if not nodes:
        errors.append("the graph has no nodes")
    duplicates = sorted({n for n in nodes if nodes.count(n) > 1})
    if duplicates:
        errors.append("duplicate nodes: " + ", ".join(duplicates))
    known = set(nodes)
    for edge in edges:
        for end in edge:
            if end not in known:
                errors.append(f"edge {edge!r} names an unknown node {end!r}")
    if len(set(edges)) != len(edges):
        errors.append("duplicate edges")
    if not errors:
        remaining = list(dict.fromkeys(nodes))
        live_edges = set(edges)
        while remaining:
            ready = [n for n in remaining if not any(dst == n for _, dst in live_edges)]
            if not ready:
                errors.append("the graph has a cycle through: " + ", ".join(remaining))
                break
            remaining = [n for n in remaining if n not in ready]
            live_edges = {(s, d) for s, d in live_edges if s not in ready}
    return tuple(errors)


# -- the machine ---------------------------------------------------------------


def start_workflow(
    spec: WorkflowSpec, input: tuple[Item, ...], run_id: RunId, depth: int = 0
) -> WorkflowOutcome:
    """Begin a workflow run: RunStarted and the first children to run."""
    state = WorkflowState(run_id, spec.name, input, depth)
    events: list[AgentEvent] = [RunStarted(spec.name, run_id)]
    if depth > spec.max_agent_depth:
        return _fail(state, MaxAgentDepthExceeded(spec.max_agent_depth), events)
    if not spec.nodes:  # a nested empty workflow fails its run instead of raising IndexError
        return _fail(state, OtherError(f"workflow {spec.name!r} has no sub-agents"), events)
    match spec.kind:
        case WorkflowKind.SEQUENTIAL | WorkflowKind.LOOP:
            keys: tuple[str, ...] = (spec.nodes[0].key,)
        case WorkflowKind.PARALLEL:
            keys = tuple(n.key for n in spec.nodes)
        case WorkflowKind.GRAPH:
            keys = tuple(n.key for n in spec.nodes if not predecessors(spec, n.key))
    return _launch(spec, state, keys, events)


def step_workflow(state: WorkflowState, result: EffectResult, spec: WorkflowSpec) -> Step:
    """Feed the pending effect's result: the next outcome (never raises)."""
    if type(state.phase) is not Running:
        return Failure(StepError("the workflow run is over"))
    if type(result) is RunInterrupted:
        return Success(_fail(state, result.reason, []))
    if type(result) is not AgentsRan:
        return Failure(StepError(f"a workflow does not accept {type(result).__name__}"))
    keys = [r.key for r in result.results]
    if sorted(keys) != sorted(state.running) or len(set(keys)) != len(keys):
        return Failure(StepError(f"expected results for {sorted(state.running)}, got {sorted(keys)}"))
    by_key = {r.key: r for r in result.results}
    outputs = dict(state.outputs)
    failed = {f.key: f.error for f in state.failed}
    usage = state.usage
    escalated = False
    for node in spec.nodes:  # node order, so completion order never matters
        child = by_key.get(node.key)
        if child is None:
            continue
        usage = usage + child.usage
        escalated = escalated or child.escalated
        if child.error is not None:
            failed[node.key] = child.error
        else:
            outputs[node.key] = child.output
    state = attrs.evolve(
        state,
        outputs=tuple((n.key, outputs[n.key]) for n in spec.nodes if n.key in outputs),
        failed=tuple(ChildFailure(n.key, failed[n.key]) for n in spec.nodes if n.key in failed),
        running=(),
        usage=usage,
    )
    match spec.kind:
        case WorkflowKind.SEQUENTIAL:
            return Success(_after_sequential(spec, state))
        case WorkflowKind.LOOP:
            return Success(_after_loop(spec, state, escalated))
        case WorkflowKind.PARALLEL:
            return Success(_finish_collect_all(spec, state, tuple(n.key for n in spec.nodes)))
        case WorkflowKind.GRAPH:
            return Success(_after_graph(spec, state))


def resume_workflow(state: WorkflowState, spec: WorkflowSpec) -> WorkflowOutcome:
    """The outcome to continue from a stored state: rerun what was running."""
    if type(state.phase) is not Running:
        return WorkflowOutcome(state, (), Terminate())
    runs = tuple(AgentRun(k, _agent_of(spec, k), _input_for(spec, state, k)) for k in state.running)
    return WorkflowOutcome(state, (), RunAgents(runs, state.depth + 1))


# -- rules -------------------------------------------------------------------


def _agent_of(spec: WorkflowSpec, key: str) -> str:
    return next(n.agent for n in spec.nodes if n.key == key)


def _input_for(spec: WorkflowSpec, state: WorkflowState, key: str) -> tuple[Item, ...]:
    if spec.kind is not WorkflowKind.GRAPH:
        return state.input
    outputs = dict(state.outputs)
    context = tuple(user_text(f"[{pred}]\n{outputs[pred]}") for pred in predecessors(spec, key))
    return (*state.input, *context)


def _launch(
    spec: WorkflowSpec, state: WorkflowState, keys: tuple[str, ...], events: list[AgentEvent]
) -> WorkflowOutcome:
    runs = tuple(AgentRun(k, _agent_of(spec, k), _input_for(spec, state, k)) for k in keys)
    state = attrs.evolve(state, running=keys)
    return WorkflowOutcome(state, tuple(events), RunAgents(runs, state.depth + 1))


def _fail(state: WorkflowState, error: AgentError, events: list[AgentEvent]) -> WorkflowOutcome:
    events.append(RunFailed(error, state.usage))
    return WorkflowOutcome(attrs.evolve(state, phase=Failed(error), running=()), tuple(events), Terminate())


def _done(state: WorkflowState, output: str, events: list[AgentEvent]) -> WorkflowOutcome:
    events.append(RunCompleted(state.usage))
    return WorkflowOutcome(attrs.evolve(state, phase=Done(output)), tuple(events), Terminate())


def _json_object(pairs: tuple[tuple[str, str], ...]) -> str:
    return msgspec.json.encode(dict(pairs), order="sorted").decode()


def _after_sequential(spec: WorkflowSpec, state: WorkflowState) -> WorkflowOutcome:
    if state.failed:
        return _fail(state, state.failed[0].error, [])
    position = state.position + 1
    if position == len(spec.nodes):
        return _done(state, dict(state.outputs)[spec.nodes[-1].key], [])
    state = attrs.evolve(state, position=position)
    return _launch(spec, state, (spec.nodes[position].key,), [])


def _after_loop(spec: WorkflowSpec, state: WorkflowState, escalated: bool) -> WorkflowOutcome:
    if state.failed:
        return _fail(state, state.failed[0].error, [])
    current = spec.nodes[state.position].key
    if escalated:
        return _done(state, dict(state.outputs)[current], [])
    position, iteration = state.position + 1, state.iteration
    if position == len(spec.nodes):
        position, iteration = 0, iteration + 1
        if iteration > spec.max_iterations:
            return _fail(state, MaxIterationsExceeded(spec.max_iterations), [])
    state = attrs.evolve(state, position=position, iteration=iteration)
    return _launch(spec, state, (spec.nodes[position].key,), [])


def _final_message(spec: WorkflowSpec, text: str) -> MessageOutput:
    return MessageOutput(AssistantMessage((TextPart(text),), spec.name))


def _finish_collect_all(
    spec: WorkflowSpec, state: WorkflowState, result_keys: tuple[str, ...], merge_one: bool = True
) -> WorkflowOutcome:
    if state.failed:
        return _fail(state, ChildrenFailed(state.failed, state.skipped), [])
    outputs = dict(state.outputs)
    if len(result_keys) == 1 and not merge_one:
        return _done(state, outputs[result_keys[0]], [])
    text = _json_object(tuple((k, outputs[k]) for k in result_keys))
    return _done(state, text, [_final_message(spec, text)])


def _after_graph(spec: WorkflowSpec, state: WorkflowState) -> WorkflowOutcome:
    failed = {f.key for f in state.failed}
    skipped = {d for key in failed for d in descendants(spec, key)} - failed
    state = attrs.evolve(state, skipped=tuple(n.key for n in spec.nodes if n.key in skipped))
    finished = set(dict(state.outputs)) | failed | skipped
    ready = tuple(
        n.key
        for n in spec.nodes
        if n.key not in finished and all(p in dict(state.outputs) for p in predecessors(spec, n.key))
    )
    if ready:
        return _launch(spec, state, ready, [])
    return _finish_collect_all(spec, state, sinks(spec), merge_one=False)


__all__ = [
    "Node",
    "Running",
    "WorkflowKind",
    "WorkflowOutcome",
    "WorkflowPhase",
    "WorkflowSpec",
    "WorkflowState",
    "descendants",
    "graph_errors",
    "predecessors",
    "resume_workflow",
    "sinks",
    "start_workflow",
    "step_workflow",
]
