"""The plain-text report for a terminal: :func:`render_table`.

One row per case (status, then each evaluator's score: ``1.00``, ``0.00 x``
for a failure, ``skip``, ``-`` when it did not run), the failures — each
reason in full, with the expected and actual values a failed score
carries — the per-evaluator statistics, and one summary line. ASCII only, so it reads
the same in any terminal and in CI logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from helikon.evals._results import CaseResult, CaseStatus
from helikon.evals._scores import ScoreOutcome
from helikon.pricing import money

if TYPE_CHECKING:
    from helikon.evals._report import EvalReport


def _cell(case: CaseResult, evaluator: str) -> str:
    score = case.score(evaluator)
    if score is None:
        return "-"
    match score.outcome:
        case ScoreOutcome.SKIPPED:
            return "skip"
        case ScoreOutcome.FAILED:
            return f"{score.value:.2f} x"
        case ScoreOutcome.PASSED:
            return f"{score.value:.2f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _full(text: str) -> str:
    """``text`` on one line, whole (a reason is never cut: it is what explains the failure)."""
    return " ".join(text.split())


def _value_lines(label: str, text: str) -> list[str]:
    """``expected:``/``actual:`` and the value, its lines indented under the label."""
    lines = text.splitlines() or [""]
    return [f"      {label:<10}{lines[0]}", *(f"      {'':<10}{line}" for line in lines[1:])]


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_table(report: EvalReport, *, width: int = 32) -> str:
    """``report`` as plain text (case ids cut to ``width`` characters; reasons, expected and
    actual values in full)."""
    label = f"eval {report.mode} {report.run_id}" + (f" ({report.name})" if report.name else "")
    lines = [f"{label}: {len(report.cases)} case(s), {len(report.evaluators)} evaluator(s)", ""]
    priced = any(case.usage.cost is not None for case in report.cases)
    rows: list[list[str]] = [["case", "status", *report.evaluators, *(["cost"] if priced else [])]]
    for case in report.cases:
        status = (
            case.status.value
            if case.status in (CaseStatus.PASSED, CaseStatus.SKIPPED)
            else case.status.value.upper()
        )
        cells = [_cell(case, e) for e in report.evaluators]
        cost = [money(case.usage.cost)] if priced else []
        rows.append([_short(case.case.id, width), status, *cells, *cost])
    lines.extend(_grid(rows))
    problems: list[str] = []
    for case in report.failures():
        if case.divergence is not None:
            problems.append(
                f"  {_short(case.case.id, width)}: diverged at step {case.divergence.step}: "
                f"{_full(case.divergence.headline)}"
            )
            problems.extend(f"      {_full(d)}" for d in case.divergence.differences[:3])
            if len(case.divergence.differences) > 3:
                problems.append(f"      ... and {len(case.divergence.differences) - 3} more")
        elif case.error is not None:
            problems.append(f"  {_short(case.case.id, width)}: error: {_full(case.error)}")
        for scored in case.scores:
            if scored.score.outcome is ScoreOutcome.FAILED:
                score = scored.score
                problems.append(f"  {_short(case.case.id, width)}: {scored.evaluator}: {_full(score.reason)}")
                if score.expected is not None:
                    problems.extend(_value_lines("expected:", score.expected))
                if score.actual is not None:
                    problems.extend(_value_lines("actual:", score.actual))
    if problems:
        lines.extend(["", "failures:", *problems])
    if report.evaluators:
        stats = [["evaluator", "passed", "failed", "skipped", "mean", "min", "max"]]
        for s in report.stats():
            stats.append(
                [
                    s.evaluator,
                    str(s.passed),
                    str(s.failed),
                    str(s.skipped),
                    _number(s.mean),
                    _number(s.minimum),
                    _number(s.maximum),
                ]
            )
        lines.extend(["", *_grid(stats)])
    counts = report.counts
    summary = (
        f"{counts.passed} passed, {counts.failed} failed, {counts.errors} error(s), "
        f"{counts.diverged} diverged, {counts.skipped} skipped; mean {_number(report.mean)}; "
        f"{report.skipped_scores} skipped score(s): {'PASSED' if report.passed() else 'FAILED'}"
    )
    lines.extend(["", summary])
    if priced:
        lines.append(f"cost: {money(report.usage.cost)} in total")
    return "\n".join(lines)



__all__ = ["render_table"]
