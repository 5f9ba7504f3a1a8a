"""``EvalReport``: pass/fail, statistics, the terminal table, JSON, and the HTML a person reads."""

from __future__ import annotations

import re

import msgspec
import pytest
import trio
from evals_support import agent_for, dataset

from helikon.evals import (
    CaseResult,
    CaseScore,
    CaseStatus,
    Divergence,
    EvalCase,
    EvalReport,
    EvalRun,
    EvaluatorStats,
    ExactMatch,
    Score,
    ToolUseTrajectory,
)
from helikon.evals._html import histogram, render_diff, render_trace_page

EVALUATORS = (ExactMatch(), ToolUseTrajectory.exact())


@pytest.fixture(scope="module")
def report() -> EvalReport:
    return trio.run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="rep").run)


def result(index: int, *scores: tuple[str, Score], **fields: object) -> CaseResult:
    return CaseResult(
        index, EvalCase(f"c{index}", "q"), scores=tuple(CaseScore(n, s) for n, s in scores), **fields
    )  # type: ignore[arg-type]


def test_a_case_fails_on_any_failed_score_an_error_or_a_divergence() -> None:
    ok, bad, skip = Score.passed(), Score.failed(0.2), Score.skipped("nothing to check")
    assert result(0, ("a", ok), ("b", skip)).status is CaseStatus.PASSED
    assert result(0, ("a", ok), ("b", bad)).status is CaseStatus.FAILED
    assert result(0, ("a", skip), ("b", skip)).status is CaseStatus.SKIPPED
    assert result(0).status is CaseStatus.PASSED  # no evaluator at all
    assert result(0, error="model is down").status is CaseStatus.ERROR
    assert result(0, divergence=Divergence(2, "x")).status is CaseStatus.DIVERGED
    assert EvalReport("r", ("a", "b"), (result(0, ("a", ok)), result(1, ("b", skip)))).passed()
    for failing in (result(1, ("a", bad)), result(1, error="e"), result(1, divergence=Divergence(0, "d"))):
        assert not EvalReport("r", ("a",), (result(0, ("a", ok)), failing)).passed()


def test_skips_count_toward_neither_pass_fail_nor_the_mean() -> None:
    cases = (
        result(0, ("a", Score.passed(1.0)), ("b", Score.skipped("none"))),
        result(1, ("a", Score.failed(0.5)), ("b", Score.skipped("none"))),
        result(2, ("a", Score.passed(0.75)), ("b", Score.passed(0.25))),
        result(3, error="boom"),
    )
    report = EvalReport("r", ("a", "b"), cases)
    assert report.mean == pytest.approx((1.0 + 0.5 + 0.75 + 0.25) / 4)
    assert report.stats() == (
        EvaluatorStats("a", 2, 1, 0, pytest.approx(0.75), 0.5, 1.0),  # type: ignore[arg-type]
        EvaluatorStats("b", 1, 0, 2, 0.25, 0.25, 0.25),
    )
    assert report.stats_for("a").pass_rate == pytest.approx(2 / 3)
    assert report.skipped_scores == 2
    counts = report.counts
    assert (counts.passed, counts.failed, counts.errors, counts.total) == (2, 1, 1, 4)
    assert [c.index for c in report.failures()] == [1, 3]


def test_an_evaluator_that_only_skipped_has_no_mean() -> None:
    report = EvalReport("r", ("a",), (result(0, ("a", Score.skipped("no"))),))
    assert report.stats_for("a") == EvaluatorStats("a", 0, 0, 1, None, None, None)
    assert report.mean is None and report.stats_for("a").pass_rate is None


def test_the_terminal_table(report: EvalReport) -> None:
    table = report.render_table()
    lines = table.splitlines()
    assert lines[0] == "eval run rep: 5 case(s), 2 evaluator(s)"
    assert re.search(r"^case\s+status\s+exact_match\s+tool_trajectory$", table, re.M)
    assert re.search(r"^shipped\s+passed\s+1\.00\s+1\.00$", table, re.M)
    assert re.search(r"^wrong-answer\s+FAILED\s+0\.00 x\s+1\.00$", table, re.M)
    assert re.search(r"^case-6\s+skipped\s+skip\s+skip$", table, re.M)
    assert "  wrong-answer: exact_match: the answer differs from the expected text" in lines
    assert re.search(r"^exact_match\s+3\s+1\s+1\s+0\.75\s+0\.00\s+1\.00$", table, re.M)
    assert (
        lines[-1]
        == "3 passed, 1 failed, 0 error(s), 0 diverged, 1 skipped; mean 0.83; 4 skipped score(s): FAILED"
    )


def test_the_table_cuts_long_ids_and_shows_errors_and_divergences() -> None:
    cases = (
        CaseResult(0, EvalCase("x" * 50, "q"), error="the model\nis down"),
        CaseResult(
            1,
            EvalCase("d", "q"),
            divergence=Divergence(4, "effect CallModel differs", ("a: expected 1, got 2",)),
        ),
    )
    table = EvalReport("r", ("e",), cases).render_table(width=20)
    assert "xxxxxxxxxxxxxxxxx...  ERROR" in table
    assert "xxxxxxxxxxxxxxxxx...: error: the model is down" in table
    assert (
        "  d: diverged at step 4: effect CallModel differs" in table and "      a: expected 1, got 2" in table
    )


def test_json_round_trips(report: EvalReport) -> None:
    text = report.to_json()
    data = msgspec.json.decode(text)
    assert data["format"] == "helikon-eval-report" and data["version"] == 1
    assert data["summary"]["passed"] is False and data["summary"]["failed_cases"] == 1
    assert data["stats"][0] == {
        "evaluator": "exact_match",
        "passed": 3,
        "failed": 1,
        "skipped": 1,
        "mean": 0.75,
        "min": 0.0,
        "max": 1.0,
    }
    wrong = data["cases"][2]
    assert (wrong["id"], wrong["status"], wrong["trace"]) == (
        "wrong-answer",
        "failed",
        "traces/0003-wrong-answer.jsonl",
    )
    assert wrong["scores"][0]["expected"] == "Order B2 has shipped."
    assert [e["type"] for e in wrong["events"]] == [
        "user_message",
        "tool_called",
        "tool_returned",
        "assistant_message",
    ]
    back = EvalReport.from_json(text)
    assert back == report and back.cases[0].trace is None  # traces live in their own files
    assert EvalReport.from_json(report.to_json(indent=2)) == report


# -- HTML ----------------------------------------------------------------------------------


def test_the_html_report_is_self_contained(report: EvalReport) -> None:
    page = report.to_html()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # no external asset
    assert "@import" not in page and "url(" not in page
    for anchor in (
        'id="chart-distribution"',
        'id="chart-outcomes"',
        'id="chart-means"',
        'id="cases"',
        'id="stats"',
    ):
        assert anchor in page
    assert page.count('<tr class="case"') == 5
    assert page.count('class="bar"') >= 5
    assert 'href="traces/0001-shipped.html"' in page and 'href="traces/0001-shipped.jsonl"' in page
    assert 'id="verdict">FAILED<' in page


def test_a_failure_opens_its_details_with_a_diff(report: EvalReport) -> None:
    page = report.to_html()
    failing = page.split('id="case-3"')[1].split('<tr class="case"')[0]
    assert "<details open>" in failing
    assert "<del>has shipped</del><ins>is still in the warehouse</ins>" in failing
    passing = page.split('id="case-1"')[1].split('<tr class="case"')[0]
    assert "<details open>" not in passing and "<details>" in passing


def test_everything_from_a_case_is_escaped() -> None:
    nasty = '<script>alert("x")</script>'
    case = CaseResult(
        0,
        EvalCase(nasty, nasty, expected=nasty, metadata={"k": nasty}),
        final_output=nasty,
        scores=(CaseScore(nasty, Score.failed(reason=nasty, expected=nasty, actual=nasty + "!")),),
        error=nasty,
    )
    page = EvalReport(nasty, (nasty,), (case,), name=nasty).to_html()
    assert nasty not in page and "&lt;script&gt;" in page
    assert page.count("<script>") == 1  # the page's own filter script


def test_an_empty_report_still_renders_its_charts() -> None:
    page = EvalReport("r", (), ()).to_html()
    assert "no scores" in page and "no evaluators" in page and 'id="verdict">PASSED<' in page


def test_histogram_and_diff_helpers() -> None:
    assert histogram([0.0, 0.1, 0.99, 1.0]) == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert render_diff("a b", "a b") == "<span>a b</span>"
    assert render_diff("", "<new>") == "<ins>&lt;new&gt;</ins>"


def test_the_trace_page(report: EvalReport) -> None:
    trace = report.case("shipped").trace
    assert trace is not None
    page = render_trace_page(trace, title="shipped")
    assert page.count("<tr><td") == 4  # the start (RunStarted), then the three steps
    rows = page.split("<tr><td")[1:]
    # Each event under the step whose result brought it: the model's tool call under CallModel.
    assert "start" in rows[0] and "RunStarted" in rows[0]
    assert "CallModel turn 1" in rows[1] and "ToolCallItem lookup_order" in rows[1]
    assert "ToolCallItem" not in rows[2] and "ToolOutputItem lookup_order" in rows[2]
    assert "CallModel turn 1" in page and "ExecuteTools: InvokeTool:lookup_order" in page
    assert "order A1: shipped" in page and "Where is order A1?" in page
    assert 'href="../report.html"' in page
