"""Properties of the workflow machine: completion order never matters.

The live interpreter runs parallel branches and ready graph nodes at once, so
their results reach the machine in whatever order they finish. These tests
drive :func:`start_workflow` / :func:`step_workflow` directly (no interpreter,
so thousands of runs take a second) and feed each ``AgentsRan`` in a
generated order, then compare with declaration order and with a small
reference model written here:

- a graph's final output, state and skipped set match the reference: a node
  runs on the input plus its predecessors' labelled outputs; the nodes
  reachable from a failed node are skipped; the sinks' outputs are merged;
- a parallel agent's outcome does not depend on the branches' completion
  order and its output is the sorted-key JSON object of the branches;
- a loop agent never asks for more than ``max_iterations`` passes, and stops
  exactly where the reference says.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence

import attrs
from hypothesis import given
from hypothesis import strategies as st

from helikon.agents import (
    Node,
    WorkflowKind,
    WorkflowOutcome,
    WorkflowSpec,
    WorkflowState,
    graph_errors,
    resume_workflow,
    start_workflow,
    step_workflow,
)
from helikon.codec import from_json, to_json
from helikon.effects import AgentRun, AgentRunResult, AgentsRan, RunAgents, Terminate
from helikon.errors import (
    AgentError,
    ChildFailure,
    ChildrenFailed,
    MaxIterationsExceeded,
    OtherError,
)
from helikon.ids import RunId
from helikon.items import Item, user_text
from helikon.loop import Done, Failed
from helikon.model import Usage

INPUT: tuple[Item, ...] = (user_text("Report on December."),)
KEYS = st.text(alphabet="abcxyz_-", min_size=1, max_size=3)

#: Orders a wave's results: the identity, or a permutation Hypothesis chose.
Order = Callable[[list[AgentRunResult]], Sequence[AgentRunResult]]


def declaration_order(results: list[AgentRunResult]) -> list[AgentRunResult]:
    return results


def drawn_order(data: st.DataObject) -> Order:
    return lambda results: data.draw(st.permutations(results), label="completion order")


def error_of(key: str) -> AgentError:
    return OtherError(f"{key} broke")


def usage_of(key: str) -> Usage:
    return Usage(len(key), 1)


def answer(key: str, input: tuple[Item, ...]) -> str:
    """A node's output: a digest of exactly what it was given."""
    digest = hashlib.sha256(repr((key, input)).encode()).hexdigest()[:10]
    return f"{key}:{digest}"


def perform(run: AgentRun, failing: frozenset[str]) -> AgentRunResult:
    if run.key in failing:
        return AgentRunResult(run.key, "", usage_of(run.key), error_of(run.key))
    return AgentRunResult(run.key, answer(run.key, run.input), usage_of(run.key))


def drive(spec: WorkflowSpec, failing: frozenset[str], order: Order) -> list[WorkflowOutcome]:
    """Every outcome of one run, answering each wave in ``order``."""
    outcomes = [start_workflow(spec, INPUT, RunId("run-1"))]
    for _ in range(len(spec.nodes) * spec.max_iterations + 1):
        effect = outcomes[-1].effect
        if not isinstance(effect, RunAgents):
            break
        results = [perform(run, failing) for run in effect.runs]
        outcomes.append(step_workflow(outcomes[-1].state, AgentsRan(tuple(order(results))), spec).unwrap())
    assert outcomes[-1].effect == Terminate()
    return outcomes


def asked(outcomes: list[WorkflowOutcome]) -> list[tuple[str, ...]]:
    """The keys each ``RunAgents`` of a run asked for."""
    return [tuple(r.key for r in o.effect.runs) for o in outcomes if isinstance(o.effect, RunAgents)]


def is_sorted_json_object(text: str, expected: dict[str, str]) -> bool:
    value = json.loads(text)
    return bool(value == expected and list(value) == sorted(value))


# -- graphs --------------------------------------------------------------------------


@attrs.frozen
class Dag:
    """A generated graph: nodes in declaration order, edges, and the nodes
    that fail if they run."""

    keys: tuple[str, ...]
    topological: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    failing: frozenset[str]

    @property
    def spec(self) -> WorkflowSpec:
        nodes = tuple(Node(k, k.upper()) for k in self.keys)
        return WorkflowSpec("report", WorkflowKind.GRAPH, nodes, self.edges)


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 12) -> Dag:
    keys = tuple(draw(st.lists(KEYS, min_size=1, max_size=max_nodes, unique=True), label="nodes"))
    topological = tuple(draw(st.permutations(keys), label="topological order"))
    forward = [
        (topological[i], topological[j])
        for i, j in itertools.combinations(range(len(keys)), 2)
        if draw(st.integers(0, 3), label=f"edge {i}->{j}") == 0
    ]
    edges = tuple(draw(st.permutations(forward), label="edge order"))
    failing = frozenset(draw(st.sets(st.sampled_from(keys), max_size=3), label="failing"))
    return Dag(keys, topological, edges, failing)


@attrs.frozen
class Expected:
    outputs: dict[str, str]
    failed: tuple[str, ...]
    skipped: tuple[str, ...]
    usage: Usage
    final: Done | Failed


def reference(dag: Dag) -> Expected:
    """What the book says a graph run ends with, computed the simple way."""
    reachable: set[str] = set()
    frontier = [k for k in dag.keys if k in dag.failing]
    while frontier:  # everything downstream of a node that would fail
        node = frontier.pop()
        for src, dst in dag.edges:
            if src == node and dst not in reachable:
                reachable.add(dst)
                frontier.append(dst)
    outputs: dict[str, str] = {}
    failed: list[str] = []
    usage = Usage()
    for key in dag.topological:
        if key in reachable:
            continue  # skipped: never runs
        usage = usage + usage_of(key)
        if key in dag.failing:
            failed.append(key)
            continue
        predecessors = [p for p in dag.keys if (p, key) in dag.edges]
        context = tuple(user_text(f"[{p}]\n{outputs[p]}") for p in predecessors)
        outputs[key] = answer(key, (*INPUT, *context))

    def in_order(keys: Iterable[str]) -> tuple[str, ...]:
        wanted = set(keys)
        return tuple(k for k in dag.keys if k in wanted)

    skipped = in_order(reachable)
    final: Done | Failed
    if failed:
        error = ChildrenFailed(tuple(ChildFailure(k, error_of(k)) for k in in_order(failed)), skipped)
        final = Failed(error)
    else:
        sinks = [k for k in dag.keys if not any(src == k for src, _ in dag.edges)]
        merged = {k: outputs[k] for k in sinks}
        text = (
            outputs[sinks[0]]
            if len(sinks) == 1
            else json.dumps(merged, sort_keys=True, separators=(",", ":"))
        )
        final = Done(text)
    return Expected(outputs, in_order(failed), skipped, usage, final)


@given(dags(), st.data())
def test_graph_outcome_is_independent_of_completion_order_and_matches_the_reference(
    dag: Dag, data: st.DataObject
) -> None:
    spec = dag.spec
    assert graph_errors(dag.keys, dag.edges) == ()

    in_declaration_order = drive(spec, dag.failing, declaration_order)
    in_any_order = drive(spec, dag.failing, drawn_order(data))

    # the same run, outcome by outcome (states, events and effects)
    assert in_any_order == in_declaration_order
    final = in_any_order[-1]
    expected = reference(dag)
    assert final.state.phase == expected.final
    assert dict(final.state.outputs) == expected.outputs
    assert tuple(k for k, _ in final.state.outputs) == tuple(k for k in dag.keys if k in expected.outputs)
    assert final.state.skipped == expected.skipped
    assert tuple(f.key for f in final.state.failed) == expected.failed
    assert final.state.usage == expected.usage


@given(dags())
def test_graph_runs_every_node_at_most_once_and_only_after_its_predecessors(dag: Dag) -> None:
    outcomes = drive(dag.spec, dag.failing, declaration_order)
    expected = reference(dag)

    waves = asked(outcomes)
    ran = [key for wave in waves for key in wave]
    assert sorted(ran) == sorted(set(dag.keys) - set(expected.skipped))
    done: set[str] = set()
    for wave in waves:
        for key in wave:
            assert all(src in done for src, dst in dag.edges if dst == key)
        done.update(wave)


@given(dags(), st.data())
def test_a_graph_run_resumes_from_any_reloaded_state(dag: Dag, data: st.DataObject) -> None:
    outcomes = drive(dag.spec, dag.failing, declaration_order)
    outcome = data.draw(st.sampled_from(outcomes), label="suspended at")

    reloaded = from_json(to_json(outcome.state, WorkflowState), WorkflowState)

    assert reloaded == outcome.state
    assert resume_workflow(reloaded, dag.spec).effect == outcome.effect


@given(dags(max_nodes=8), st.data())
def test_a_back_edge_makes_the_graph_unbuildable(dag: Dag, data: st.DataObject) -> None:
    if len(dag.keys) < 2:
        return
    i, j = sorted(data.draw(st.lists(st.integers(0, len(dag.keys) - 1), min_size=2, max_size=2, unique=True)))
    early, late = dag.topological[i], dag.topological[j]
    edges = tuple(dict.fromkeys((*dag.edges, (early, late), (late, early))))

    (error,) = graph_errors(dag.keys, edges)

    assert error.startswith("the graph has a cycle through: ")
    assert {early, late} <= set(error.removeprefix("the graph has a cycle through: ").split(", "))


# -- parallel ------------------------------------------------------------------------


@given(
    st.dictionaries(KEYS, st.text(max_size=8), min_size=1, max_size=8),
    st.data(),
)
def test_parallel_outcome_is_independent_of_branch_completion_order(
    branches: dict[str, str], data: st.DataObject
) -> None:
    keys = tuple(branches)
    failing = frozenset(data.draw(st.sets(st.sampled_from(keys), max_size=2), label="failing"))
    spec = WorkflowSpec("fan", WorkflowKind.PARALLEL, tuple(Node(k, k.upper()) for k in keys))

    def fan_out(order: Order) -> WorkflowOutcome:
        (outcome,) = asked_once(spec, order, lambda run: branches[run.key], failing)
        return outcome

    first = fan_out(declaration_order)
    assert fan_out(drawn_order(data)) == first
    if failing:
        failures = tuple(ChildFailure(k, error_of(k)) for k in keys if k in failing)
        assert first.state.phase == Failed(ChildrenFailed(failures))
    else:
        assert isinstance(first.state.phase, Done)
        assert is_sorted_json_object(first.state.phase.output, branches)


def asked_once(
    spec: WorkflowSpec, order: Order, output: Callable[[AgentRun], str], failing: frozenset[str]
) -> list[WorkflowOutcome]:
    """Run a one-wave workflow: its final outcome, alone in a list."""
    start = start_workflow(spec, INPUT, RunId("run-1"))
    assert isinstance(start.effect, RunAgents)
    assert tuple(r.key for r in start.effect.runs) == tuple(n.key for n in spec.nodes)
    results = [
        AgentRunResult(r.key, "", Usage(), error_of(r.key))
        if r.key in failing
        else AgentRunResult(r.key, output(r), usage_of(r.key))
        for r in start.effect.runs
    ]
    return [step_workflow(start.state, AgentsRan(tuple(order(results))), spec).unwrap()]


# -- loop ------------------------------------------------------------------------------

#: What one child run does: finish, escalate, or fail.
FINISH, ESCALATE, FAIL = "finish", "escalate", "fail"


@given(
    st.integers(1, 4),
    st.integers(1, 6),
    st.lists(st.sampled_from([FINISH, FINISH, FINISH, FINISH, ESCALATE, FAIL]), max_size=30),
)
def test_a_loop_never_asks_for_more_than_max_iterations_passes(
    children: int, max_iterations: int, behaviours: list[str]
) -> None:
    keys = tuple(f"step{i}" for i in range(children))
    spec = WorkflowSpec(
        "loop", WorkflowKind.LOOP, tuple(Node(k, k) for k in keys), max_iterations=max_iterations
    )

    outcome = start_workflow(spec, INPUT, RunId("run-1"))
    runs: list[str] = []
    while isinstance(outcome.effect, RunAgents):
        (run,) = outcome.effect.runs
        assert run.key == keys[len(runs) % children]  # in order, pass after pass
        behaviour = behaviours[len(runs)] if len(runs) < len(behaviours) else FINISH
        runs.append(run.key)
        result = AgentRunResult(
            run.key,
            f"{run.key}#{len(runs)}",
            Usage(1, 1),
            error_of(run.key) if behaviour == FAIL else None,
            escalated=behaviour == ESCALATE,
        )
        outcome = step_workflow(outcome.state, AgentsRan((result,)), spec).unwrap()
        assert len(runs) <= max_iterations * children

    budget = max_iterations * children
    stop = next((i for i, b in enumerate(behaviours[:budget]) if b != FINISH), None)
    if stop is None:
        assert len(runs) == budget
        assert outcome.state.phase == Failed(MaxIterationsExceeded(max_iterations))
    elif behaviours[stop] == FAIL:
        assert len(runs) == stop + 1
        assert outcome.state.phase == Failed(error_of(keys[stop % children]))
    else:
        assert len(runs) == stop + 1
        assert outcome.state.phase == Done(f"{keys[stop % children]}#{stop + 1}")
    assert runs.count(keys[0]) <= max_iterations
    assert outcome.state.usage == Usage(len(runs), len(runs))


# -- sequential ------------------------------------------------------------------------


@given(st.lists(KEYS, min_size=1, max_size=8, unique=True), st.data())
def test_sequential_runs_each_step_once_in_order_until_the_first_failure(
    keys: list[str], data: st.DataObject
) -> None:
    failing = frozenset(data.draw(st.sets(st.sampled_from(keys), max_size=2), label="failing"))
    spec = WorkflowSpec("seq", WorkflowKind.SEQUENTIAL, tuple(Node(k, k) for k in keys))

    outcomes = drive(spec, failing, declaration_order)

    first_failure = next((i for i, k in enumerate(keys) if k in failing), None)
    ran = keys if first_failure is None else keys[: first_failure + 1]
    assert asked(outcomes) == [(k,) for k in ran]
    final = outcomes[-1].state.phase
    if first_failure is None:
        assert final == Done(answer(keys[-1], INPUT))
    else:
        assert final == Failed(error_of(keys[first_failure]))
