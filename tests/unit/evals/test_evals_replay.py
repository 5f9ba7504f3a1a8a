"""A saved run, later: re-scored offline, and replayed against a changed agent."""

from __future__ import annotations

import warnings
from pathlib import Path

import attrs
import pytest
import trio
from evals_support import DATASET, agent_for, dataset

from helikon import DenyRule, LlmAgent, RunContext
from helikon.evals import (
    CaseStatus,
    EvalCase,
    EvalDataset,
    EvalReport,
    EvalRun,
    ExactMatch,
    ReportFormatError,
    ToolUseTrajectory,
)

EVALUATORS = (ExactMatch(), ToolUseTrajectory.exact())


@pytest.fixture
def saved(tmp_path: Path) -> tuple[EvalReport, Path]:
    report = trio.run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="nightly").run)
    report.save(tmp_path / "run")
    return report, tmp_path / "run"


def no_agent(case: EvalCase) -> LlmAgent[None]:
    raise AssertionError("re-scoring must not build an agent")


def test_a_saved_run_is_a_directory_that_loads_back(saved: tuple[EvalReport, Path]) -> None:
    report, path = saved
    names = sorted(p.name for p in (path / "traces").iterdir())
    assert names[:2] == ["0001-shipped.html", "0001-shipped.jsonl"] and len(names) == 10
    assert (path / "report.html").read_text().startswith("<!DOCTYPE html>")
    loaded = EvalReport.load(path)
    assert loaded == report
    assert EvalReport.load(path / "report.json") == report
    for a, b in zip(loaded.cases, report.cases, strict=True):
        assert a.trace is not None and b.trace is not None and a.trace.to_bytes() == b.trace.to_bytes()


def test_rescoring_uses_the_saved_traces_and_no_agent(saved: tuple[EvalReport, Path]) -> None:
    original, path = saved
    # The expectation of one case was wrong; fix the dataset and score the saved run again.
    fixed = EvalDataset.from_jsonl_str(
        DATASET.replace("Order B2 has shipped.", "Order B2 is still in the warehouse.")
    )
    evals = EvalRun(fixed, [*EVALUATORS, ToolUseTrajectory.in_order()], agent_factory=no_agent)
    report = trio.run(evals.rescore, path)
    assert report.mode == "rescore" and report.source_run == "nightly"
    assert report.case("wrong-answer").status is CaseStatus.PASSED
    assert report.evaluators == ("exact_match", "tool_trajectory", "tool_trajectory_in_order")
    assert [c.final_output for c in report.cases] == [c.final_output for c in original.cases]
    assert report.passed()


def test_rescoring_a_report_in_memory_gives_the_same_scores(saved: tuple[EvalReport, Path]) -> None:
    original, _ = saved
    report = EvalRun(dataset(), EVALUATORS).rescore_sync(original)
    assert [c.scores for c in report.cases] == [c.scores for c in original.cases]
    assert [c.trace for c in report.cases] == [c.trace for c in original.cases]


def test_rescoring_without_traces_uses_the_saved_answers(saved: tuple[EvalReport, Path]) -> None:
    original, _ = saved
    bare = attrs.evolve(original, cases=tuple(attrs.evolve(c, trace=None) for c in original.cases))
    report = EvalRun(dataset(), EVALUATORS).rescore_sync(bare)
    assert [c.scores for c in report.cases] == [c.scores for c in original.cases]


def test_a_case_the_saved_run_lacks_is_an_error(saved: tuple[EvalReport, Path]) -> None:
    _, path = saved
    more = EvalDataset.from_cases([*dataset(), EvalCase("new-case", "hi", expected="hello")])
    report = EvalRun(more, EVALUATORS).rescore_sync(path)
    new = report.case("new-case")
    assert new.status is CaseStatus.ERROR and new.error == "the saved run nightly has no case 'new-case'"


def test_replaying_the_same_agent_reproduces_the_run(saved: tuple[EvalReport, Path]) -> None:
    original, path = saved
    report = EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="check").replay_sync(path)
    assert report.mode == "replay" and report.diverged() == ()
    assert [(c.case, c.scores, c.final_output, c.run_id) for c in report.cases] == [
        (c.case, c.scores, c.final_output, c.run_id) for c in original.cases
    ]


def test_a_changed_definition_diverges_at_once_in_a_strict_replay(saved: tuple[EvalReport, Path]) -> None:
    _, path = saved
    changed = EvalRun(
        dataset(), EVALUATORS, agent_factory=lambda c: agent_for(c, instructions="Answer in French.")
    )
    report = changed.replay_sync(path)
    assert len(report.diverged()) == len(report.cases) and not report.passed()
    divergence = report.case("greeting").divergence
    assert divergence is not None and divergence.step == 0
    assert divergence.headline == "the agent's definition differs from the recording"
    assert any(d.startswith("definition.instructions: expected") for d in divergence.differences)
    assert "replay diverged at step 0" in divergence.detail


def test_a_loose_replay_finds_the_cases_a_new_deny_rule_changes(saved: tuple[EvalReport, Path]) -> None:
    _, path = saved
    denied = EvalRun(
        dataset(),
        EVALUATORS,
        agent_factory=agent_for,
        ctx_factory=lambda c: RunContext.ephemeral(None).with_deny_rules([DenyRule.tool("lookup_order")]),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = denied.replay_sync(path, strict=False)
    assert any("different agent definition" in str(w.message) for w in caught)
    assert [c.case.id for c in report.diverged()] == ["shipped", "wrong-answer"]
    for case in report.diverged():
        assert (
            case.divergence is not None and case.divergence.step == 1
        )  # the tool step, after the first turn
        assert case.status is CaseStatus.DIVERGED and case.scores == ()
        assert case.tool_calls == ("lookup_order",)  # what the run did before it left the recording
        assert [type(e).__name__ for e in case.events][:2] == ["UserMessageEvent", "ToolCallRecorded"]
    # the cases that call no tool replay as recorded and are scored
    assert report.case("greeting").status is CaseStatus.PASSED


def test_replay_needs_a_trace_for_each_case(saved: tuple[EvalReport, Path]) -> None:
    original, _ = saved
    bare = attrs.evolve(original, cases=tuple(attrs.evolve(c, trace=None) for c in original.cases))
    report = EvalRun(dataset(), EVALUATORS, agent_factory=agent_for).replay_sync(bare)
    assert {c.status for c in report.cases} == {CaseStatus.ERROR}
    assert report.cases[0].error == "the saved run nightly has no trace for 'shipped'"


def test_loading_something_that_is_not_a_saved_run(tmp_path: Path) -> None:
    with pytest.raises(ReportFormatError, match="cannot read the report"):
        EvalReport.load(tmp_path)
    (tmp_path / "report.json").write_text('{"format": "other"}')
    with pytest.raises(ReportFormatError, match="not a helikon eval report"):
        EvalReport.load(tmp_path)
    (tmp_path / "report.json").write_text('{"format": "helikon-eval-report", "version": 99}')
    with pytest.raises(ReportFormatError, match="version 99"):
        EvalReport.load(tmp_path)


def test_an_eval_runs_a_parallel_agents_waves_part_by_part_and_replays_them() -> None:
    """Eval runs are not lock-step: each branch's answer is a step of its own
    in the case's trace, and the replay of that trace reproduces the run."""
    from helikon import ParallelAgent
    from helikon.effects import AllPerformed, PerformAll
    from helikon.evals import EvalCase, EvalDataset
    from helikon.testing import MockModel, say

    def desk(case: EvalCase) -> ParallelAgent:
        left = LlmAgent(name="left", model=MockModel([say("left done")]))
        right = LlmAgent(name="right", model=MockModel([say("right done")]))
        return ParallelAgent("desk", "both").add(left).add(right)

    data = EvalDataset([EvalCase("c1", "go")])
    report = EvalRun(data, agent_factory=desk, run_id="waves").run_sync()
    (case,) = report.cases
    assert case.trace is not None and "left done" in case.final_output and "right done" in case.final_output
    partial = [
        s
        for s in case.trace.steps
        if type(s.effect) is PerformAll and type(s.result) is AllPerformed and len(s.result.results) == 1
        if len(s.effect.effects) > 1
    ]
    assert partial, "each branch's answer is a step of its own"
    replayed = EvalRun(data, agent_factory=desk, run_id="waves").replay_sync(report)
    assert replayed.diverged() == ()
    assert [c.final_output for c in replayed.cases] == [case.final_output]
