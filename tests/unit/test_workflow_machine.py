"""The workflow machine (:mod:`helikon.agents._workflow`), rule by rule.

Each test takes one rule of the module's docstring and walks a concrete
workflow through it with :func:`start_workflow` and :func:`step_workflow`,
answering every ``RunAgents`` by hand: no interpreter, no model, no event
loop. The graph helpers and every build error of :func:`graph_errors` come
last.
"""

from __future__ import annotations

import json
import re

import pytest
from returns.result import Failure, Success

from helikon.agents import (
    Node,
    Running,
    WorkflowKind,
    WorkflowOutcome,
    WorkflowSpec,
    WorkflowState,
    descendants,
    graph_errors,
    predecessors,
    resume_workflow,
    sinks,
    start_workflow,
    step_workflow,
)
from helikon.codec import from_json, to_json
from helikon.effects import (
    AgentRun,
    AgentRunResult,
    AgentsRan,
    ModelResponded,
    RunAgents,
    RunInterrupted,
    Terminate,
)
from helikon.errors import (
    AgentError,
    Cancelled,
    ChildFailure,
    ChildrenFailed,
    MaxAgentDepthExceeded,
    MaxIterationsExceeded,
    OtherError,
    StepError,
    TimedOut,
)
from helikon.events import MessageOutput, RunCompleted, RunFailed, RunStarted
from helikon.ids import RunId
from helikon.items import AssistantMessage, Item, TextPart, user_text
from helikon.loop import Done, Failed
from helikon.model import TextChunk, Usage

SEQUENTIAL, PARALLEL = WorkflowKind.SEQUENTIAL, WorkflowKind.PARALLEL
LOOP, GRAPH = WorkflowKind.LOOP, WorkflowKind.GRAPH
INPUT: tuple[Item, ...] = (user_text("Report on December."),)
BOOM = OtherError("boom")
ONE_EACH = Usage(1, 1)
INPUT_ONLY = Usage(1, 0)


def workflow(
    kind: WorkflowKind,
    *keys: str,
    edges: tuple[tuple[str, str], ...] = (),
    max_iterations: int = 1,
    max_agent_depth: int = 8,
) -> WorkflowSpec:
    """A workflow named ``wf`` whose node ``k`` runs the agent ``K``."""
    nodes = tuple(Node(k, k.upper()) for k in keys)
    return WorkflowSpec("wf", kind, nodes, edges, max_iterations, max_agent_depth)


def ok(key: str, output: str, usage: Usage = ONE_EACH, escalated: bool = False) -> AgentRunResult:
    return AgentRunResult(key, output, usage, None, escalated)


def failed(key: str, error: AgentError = BOOM, usage: Usage = INPUT_ONLY) -> AgentRunResult:
    return AgentRunResult(key, "", usage, error)


def begin(spec: WorkflowSpec, depth: int = 0) -> WorkflowOutcome:
    return start_workflow(spec, INPUT, RunId("run-1"), depth)


def feed(outcome: WorkflowOutcome, spec: WorkflowSpec, *results: AgentRunResult) -> WorkflowOutcome:
    """Answer ``outcome``'s ``RunAgents`` with ``results`` (in the given order)."""
    match step_workflow(outcome.state, AgentsRan(results), spec):
        case Success(nxt):
            assert isinstance(nxt, WorkflowOutcome)
            return nxt
        case Failure(error):
            raise AssertionError(f"unexpected StepError: {error}")
    raise AssertionError("unreachable")


def keys_asked(outcome: WorkflowOutcome) -> tuple[str, ...]:
    """The keys of the children ``outcome`` asks to run."""
    assert isinstance(outcome.effect, RunAgents)
    return tuple(run.key for run in outcome.effect.runs)


def run_for(outcome: WorkflowOutcome, key: str) -> AgentRun:
    assert isinstance(outcome.effect, RunAgents)
    return next(run for run in outcome.effect.runs if run.key == key)


def final_message(text: str) -> MessageOutput:
    return MessageOutput(AssistantMessage((TextPart(text),), "wf"))


# -- starting ----------------------------------------------------------------------


def test_a_run_starts_with_run_started_and_asks_for_children_one_level_deeper() -> None:
    spec = workflow(SEQUENTIAL, "research", "write")

    out = begin(spec, depth=2)

    assert out.events == (RunStarted("wf", RunId("run-1")),)
    assert out.effect == RunAgents((AgentRun("research", "RESEARCH", INPUT),), depth=3)
    assert out.state.phase == Running() and out.state.running == ("research",)


def test_a_run_nested_deeper_than_max_agent_depth_fails_at_once() -> None:
    spec = workflow(PARALLEL, "a", "b", max_agent_depth=2)

    assert isinstance(begin(spec, depth=2).effect, RunAgents)  # at the limit is fine
    out = begin(spec, depth=3)

    assert out.events == (RunStarted("wf", RunId("run-1")), RunFailed(MaxAgentDepthExceeded(2), Usage()))
    assert out.effect == Terminate()
    assert out.state.phase == Failed(MaxAgentDepthExceeded(2))


# -- sequential ----------------------------------------------------------------------


def test_sequential_runs_children_in_order_each_on_the_workflows_input() -> None:
    spec = workflow(SEQUENTIAL, "research", "outline", "write")

    out = begin(spec)
    assert keys_asked(out) == ("research",)
    out = feed(out, spec, ok("research", "notes"))
    assert out.events == ()
    assert out.effect == RunAgents((AgentRun("outline", "OUTLINE", INPUT),), depth=1)
    out = feed(out, spec, ok("outline", "plan"))
    assert keys_asked(out) == ("write",)
    out = feed(out, spec, ok("write", "draft"))

    assert out.state.phase == Done("draft")
    assert out.state.outputs == (("research", "notes"), ("outline", "plan"), ("write", "draft"))
    # The last child's own message is the final one: the workflow adds none.
    assert out.events == (RunCompleted(Usage(3, 3)),)
    assert out.effect == Terminate()


def test_sequential_fails_fast_with_the_failing_childs_own_error() -> None:
    spec = workflow(SEQUENTIAL, "a", "b", "c")

    out = feed(begin(spec), spec, ok("a", "A"))
    out = feed(out, spec, failed("b", MaxIterationsExceeded(4)))

    assert out.events == (RunFailed(MaxIterationsExceeded(4), Usage(2, 1)),)
    assert out.effect == Terminate()
    assert out.state.outputs == (("a", "A"),)
    assert out.state.failed == (ChildFailure("b", MaxIterationsExceeded(4)),)


# -- parallel ------------------------------------------------------------------------


def test_parallel_runs_every_branch_at_once_on_the_input() -> None:
    spec = workflow(PARALLEL, "optimist", "pessimist", "realist")

    out = begin(spec)

    assert out.effect == RunAgents(
        (
            AgentRun("optimist", "OPTIMIST", INPUT),
            AgentRun("pessimist", "PESSIMIST", INPUT),
            AgentRun("realist", "REALIST", INPUT),
        ),
        depth=1,
    )
    assert out.state.running == ("optimist", "pessimist", "realist")


def test_parallel_output_is_a_sorted_key_json_object_emitted_as_a_final_message() -> None:
    spec = workflow(PARALLEL, "zeta", "alpha", "mid")

    out = feed(begin(spec), spec, ok("mid", "M"), ok("zeta", 'say "z"'), ok("alpha", "A"))

    text = '{"alpha":"A","mid":"M","zeta":"say \\"z\\""}'
    assert out.state.phase == Done(text)
    assert json.loads(text) == {"alpha": "A", "mid": "M", "zeta": 'say "z"'}
    assert out.events == (final_message(text), RunCompleted(Usage(3, 3)))
    # Outputs are kept in declaration order, whatever order they came in.
    assert out.state.outputs == (("zeta", 'say "z"'), ("alpha", "A"), ("mid", "M"))


def test_parallel_with_one_branch_still_outputs_a_json_object() -> None:
    spec = workflow(PARALLEL, "only")

    out = feed(begin(spec), spec, ok("only", "hi"))

    assert out.state.phase == Done('{"only":"hi"}')


def test_parallel_results_in_any_order_give_the_same_outcome() -> None:
    spec = workflow(PARALLEL, "a", "b", "c")
    results = [ok("a", "A", Usage(1, 2)), failed("b"), ok("c", "C", Usage(5, 0))]

    first = feed(begin(spec), spec, *results)
    reversed_ = feed(begin(spec), spec, *reversed(results))

    assert first == reversed_


def test_parallel_failure_is_collect_all_with_one_aggregate_error_in_declaration_order() -> None:
    spec = workflow(PARALLEL, "a", "b", "c")

    out = feed(begin(spec), spec, failed("c", TimedOut(2.0)), ok("b", "B"), failed("a"))

    error = ChildrenFailed((ChildFailure("a", BOOM), ChildFailure("c", TimedOut(2.0))), ())
    assert out.events == (RunFailed(error, Usage(3, 1)),)
    assert out.state.phase == Failed(error)
    assert out.state.outputs == (("b", "B"),)  # the sibling that finished is kept


# -- loop ----------------------------------------------------------------------------


def test_loop_repeats_its_children_pass_after_pass() -> None:
    spec = workflow(LOOP, "draft", "critic", max_iterations=3)

    out = begin(spec)
    asked = [keys_asked(out)]
    for key in ("draft", "critic", "draft", "critic"):
        out = feed(out, spec, ok(key, f"{key} v{out.state.iteration}"))
        asked.append(keys_asked(out))

    assert asked == [("draft",), ("critic",), ("draft",), ("critic",), ("draft",)]
    assert out.state.iteration == 3 and out.state.position == 0
    # state[key] holds the latest output of each child
    assert out.state.outputs == (("draft", "draft v2"), ("critic", "critic v2"))


def test_loop_escalation_stops_after_the_escalating_child() -> None:
    spec = workflow(LOOP, "draft", "critic", "polish", max_iterations=5)

    out = feed(begin(spec), spec, ok("draft", "d1"))
    out = feed(out, spec, ok("critic", "not yet"))
    out = feed(out, spec, ok("polish", "p1"))
    out = feed(out, spec, ok("draft", "d2"))
    out = feed(out, spec, ok("critic", "approved", escalated=True))

    # polish does not run in the second pass: the loop ends on the critic
    assert out.state.phase == Done("approved")
    assert out.events == (RunCompleted(Usage(5, 5)),)
    assert out.effect == Terminate()


def test_loop_running_out_of_passes_fails_with_max_iterations_exceeded() -> None:
    spec = workflow(LOOP, "a", "b", max_iterations=2)

    out = begin(spec)
    runs = 0
    while isinstance(out.effect, RunAgents):
        runs += 1
        (key,) = keys_asked(out)
        out = feed(out, spec, ok(key, key))

    assert runs == 4  # two passes of two children, never a third pass
    assert out.events == (RunFailed(MaxIterationsExceeded(2), Usage(4, 4)),)
    assert out.state.phase == Failed(MaxIterationsExceeded(2))


def test_loop_child_failure_fails_the_loop_with_its_error() -> None:
    spec = workflow(LOOP, "a", "b", max_iterations=3)

    out = feed(begin(spec), spec, ok("a", "A"))
    out = feed(out, spec, failed("b", OtherError("critic crashed")))

    assert out.state.phase == Failed(OtherError("critic crashed"))
    assert out.events == (RunFailed(OtherError("critic crashed"), Usage(2, 1)),)


def test_a_failure_wins_over_an_escalation() -> None:
    spec = workflow(LOOP, "a", max_iterations=3)

    result = AgentRunResult("a", "", Usage(), BOOM, escalated=True)
    out = feed(begin(spec), spec, result)

    assert out.state.phase == Failed(BOOM)


# -- graph ---------------------------------------------------------------------------

DIAMOND = workflow(
    GRAPH, "spending", "income", "summary", edges=(("income", "summary"), ("spending", "summary"))
)


def test_graph_starts_every_root_in_one_wave_in_node_order() -> None:
    out = begin(DIAMOND)

    assert keys_asked(out) == ("spending", "income")
    assert run_for(out, "income").input == INPUT


def test_graph_successor_gets_the_input_plus_one_labelled_message_per_predecessor() -> None:
    out = feed(begin(DIAMOND), DIAMOND, ok("income", "Earned $3,000."), ok("spending", "Spent $2,100."))

    # Predecessors in node order (spending was declared first), not edge or completion order.
    assert out.effect == RunAgents(
        (
            AgentRun(
                "summary",
                "SUMMARY",
                (*INPUT, user_text("[spending]\nSpent $2,100."), user_text("[income]\nEarned $3,000.")),
            ),
        ),
        depth=1,
    )


def test_graph_single_sink_output_goes_through_verbatim() -> None:
    out = feed(begin(DIAMOND), DIAMOND, ok("spending", "S"), ok("income", "I"))
    out = feed(out, DIAMOND, ok("summary", "Saved $900."))

    assert out.state.phase == Done("Saved $900.")
    assert out.events == (RunCompleted(Usage(3, 3)),)  # the sink's own message is the final one
    assert out.state.outputs == (("spending", "S"), ("income", "I"), ("summary", "Saved $900."))


def test_graph_multiple_sinks_merge_into_a_sorted_json_object() -> None:
    spec = workflow(GRAPH, "data", "charts", "prose", edges=(("data", "prose"), ("data", "charts")))

    out = feed(begin(spec), spec, ok("data", "rows"))
    assert keys_asked(out) == ("charts", "prose")
    out = feed(out, spec, ok("prose", "P"), ok("charts", "C"))

    assert out.state.phase == Done('{"charts":"C","prose":"P"}')
    assert out.events == (final_message('{"charts":"C","prose":"P"}'), RunCompleted(Usage(3, 3)))


def test_graph_node_waits_for_all_its_predecessors() -> None:
    spec = workflow(GRAPH, "a", "b", "c", "d", edges=(("a", "b"), ("b", "d"), ("c", "d")))

    out = begin(spec)
    assert keys_asked(out) == ("a", "c")
    out = feed(out, spec, ok("a", "A"), ok("c", "C"))
    assert keys_asked(out) == ("b",)  # d still waits for b
    out = feed(out, spec, ok("b", "B"))
    assert keys_asked(out) == ("d",)
    assert run_for(out, "d").input == (*INPUT, user_text("[b]\nB"), user_text("[c]\nC"))


def test_graph_failed_node_skips_its_descendants_while_independent_branches_finish() -> None:
    spec = workflow(GRAPH, "a", "b", "c", "d", "e", edges=(("a", "c"), ("c", "e"), ("b", "d")))

    out = feed(begin(spec), spec, failed("a"), ok("b", "B"))
    assert keys_asked(out) == ("d",)  # c (and so e) will never run
    assert out.state.skipped == ("c", "e")
    out = feed(out, spec, ok("d", "D"))

    error = ChildrenFailed((ChildFailure("a", BOOM),), ("c", "e"))
    assert out.events == (RunFailed(error, Usage(3, 2)),)
    assert out.state.phase == Failed(error)
    assert out.state.outputs == (("b", "B"), ("d", "D"))


def test_graph_node_with_one_failed_predecessor_is_skipped_even_if_the_other_succeeded() -> None:
    out = feed(begin(DIAMOND), DIAMOND, ok("spending", "S"), failed("income"))

    assert out.state.phase == Failed(ChildrenFailed((ChildFailure("income", BOOM),), ("summary",)))


# -- interruptions and misuse --------------------------------------------------------


@pytest.mark.parametrize("reason", [Cancelled(), TimedOut(30.0)])
def test_an_interruption_fails_the_run_with_its_reason_and_the_usage_so_far(
    reason: Cancelled | TimedOut,
) -> None:
    spec = workflow(SEQUENTIAL, "a", "b")
    out = feed(begin(spec), spec, ok("a", "A", Usage(7, 3)))

    nxt = step_workflow(out.state, RunInterrupted(reason), spec).unwrap()

    assert nxt.events == (RunFailed(reason, Usage(7, 3)),)
    assert nxt.effect == Terminate()
    assert nxt.state.phase == Failed(reason) and nxt.state.running == ()


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ((ok("a", "A"),), r"expected results for \['a', 'b'\], got \['a'\]"),
        ((ok("a", "A"), ok("b", "B"), ok("c", "C")), "got"),
        ((ok("a", "A"), ok("a", "A")), "got"),
        ((ok("a", "A"), ok("b", "B"), ok("b", "B")), "got"),
        ((), "got \\[\\]"),
    ],
    ids=["missing", "extra", "wrong key", "duplicate", "none"],
)
def test_results_that_do_not_match_the_running_children_are_a_step_error(
    results: tuple[AgentRunResult, ...], message: str
) -> None:
    spec = workflow(PARALLEL, "a", "b")

    match step_workflow(begin(spec).state, AgentsRan(results), spec):
        case Failure(StepError() as error):
            assert re.search(message, str(error))
        case other:
            raise AssertionError(f"expected a StepError, got {other}")


def test_a_result_of_another_kind_is_a_step_error() -> None:
    spec = workflow(SEQUENTIAL, "a")

    result = step_workflow(begin(spec).state, ModelResponded((TextChunk("hi"),)), spec)

    assert isinstance(result, Failure)
    assert "does not accept ModelResponded" in str(result.failure())


@pytest.mark.parametrize("finished", ["done", "failed"])
def test_a_finished_run_refuses_every_result(finished: str) -> None:
    spec = workflow(SEQUENTIAL, "a")
    out = feed(begin(spec), spec, ok("a", "A") if finished == "done" else failed("a"))
    assert out.effect == Terminate()

    for result in (AgentsRan((ok("a", "A"),)), RunInterrupted(Cancelled())):
        outcome = step_workflow(out.state, result, spec)
        assert isinstance(outcome, Failure)
        assert str(outcome.failure()) == "the workflow run is over"


def test_stepping_is_deterministic() -> None:
    out = begin(DIAMOND)
    results = AgentsRan((ok("spending", "S"), ok("income", "I")))

    assert step_workflow(out.state, results, DIAMOND) == step_workflow(out.state, results, DIAMOND)


# -- resuming ------------------------------------------------------------------------


def test_resume_reasks_for_the_running_children_without_events() -> None:
    out = feed(begin(DIAMOND), DIAMOND, ok("spending", "S"), ok("income", "I"))

    resumed = resume_workflow(out.state, DIAMOND)

    assert resumed.events == ()
    assert resumed.effect == out.effect
    assert resumed.state == out.state


def test_resume_from_a_state_reloaded_from_json_continues_the_same_run() -> None:
    spec = workflow(LOOP, "draft", "critic", max_iterations=2)
    out = feed(feed(begin(spec), spec, ok("draft", "d1")), spec, ok("critic", "no"))

    reloaded = from_json(to_json(out.state, WorkflowState), WorkflowState)
    resumed = resume_workflow(reloaded, spec)
    assert resumed.effect == out.effect  # the second pass's draft
    finished = feed(feed(resumed, spec, ok("draft", "d2")), spec, ok("critic", "yes", escalated=True))

    assert finished.state.phase == Done("yes")


def test_resume_of_a_finished_run_terminates() -> None:
    spec = workflow(SEQUENTIAL, "a")
    out = feed(begin(spec), spec, ok("a", "A"))

    assert resume_workflow(out.state, spec) == WorkflowOutcome(out.state, (), Terminate())


# -- graph helpers -------------------------------------------------------------------

#  a -> b -> d
#  a -> c -> d     e (alone)
HELPERS = workflow(GRAPH, "a", "b", "c", "d", "e", edges=(("c", "d"), ("a", "c"), ("b", "d"), ("a", "b")))


def test_predecessors_are_in_node_order() -> None:
    assert predecessors(HELPERS, "d") == ("b", "c")
    assert predecessors(HELPERS, "a") == ()


def test_descendants_are_every_reachable_node_in_node_order() -> None:
    assert descendants(HELPERS, "a") == ("b", "c", "d")
    assert descendants(HELPERS, "c") == ("d",)
    assert descendants(HELPERS, "e") == ()


def test_sinks_are_the_nodes_without_outgoing_edges() -> None:
    assert sinks(HELPERS) == ("d", "e")


# -- build errors --------------------------------------------------------------------


def test_a_valid_graph_has_no_errors() -> None:
    assert graph_errors(("a", "b", "c"), (("a", "b"), ("a", "c"), ("b", "c"))) == ()
    assert graph_errors(("solo",), ()) == ()


@pytest.mark.parametrize(
    ("nodes", "edges", "errors"),
    [
        ((), (), ("the graph has no nodes",)),
        (("a", "b", "a"), (), ("duplicate nodes: a",)),
        (("a",), (("a", "z"),), ("edge ('a', 'z') names an unknown node 'z'",)),
        (("a",), (("y", "a"),), ("edge ('y', 'a') names an unknown node 'y'",)),
        (("a", "b"), (("a", "b"), ("a", "b")), ("duplicate edges",)),
        (("a", "b"), (("a", "b"), ("b", "a")), ("the graph has a cycle through: a, b",)),
        (("a",), (("a", "a"),), ("the graph has a cycle through: a",)),
        (
            ("a", "a", "b"),
            (("a", "x"),),
            ("duplicate nodes: a", "edge ('a', 'x') names an unknown node 'x'"),
        ),
    ],
    ids=["empty", "duplicate", "unknown dst", "unknown src", "duplicate edge", "cycle", "self-loop", "many"],
)
def test_graph_errors_names_every_problem(
    nodes: tuple[str, ...], edges: tuple[tuple[str, str], ...], errors: tuple[str, ...]
) -> None:
    assert graph_errors(nodes, edges) == errors


def test_a_cycle_deeper_in_the_graph_is_found() -> None:
    (error,) = graph_errors(("root", "x", "y", "z"), (("root", "x"), ("x", "y"), ("y", "z"), ("z", "x")))

    assert error.startswith("the graph has a cycle through: ")
    assert {"x", "y", "z"} <= set(error.split(": ")[1].split(", "))
    assert "root" not in error


@pytest.mark.parametrize("kind", list(WorkflowKind))
def test_a_workflow_without_nodes_fails_at_start(kind: WorkflowKind) -> None:
    out = begin(workflow(kind))

    assert out.events == (
        RunStarted("wf", RunId("run-1")),
        RunFailed(OtherError("workflow 'wf' has no sub-agents")),
    )
    assert out.effect == Terminate()
