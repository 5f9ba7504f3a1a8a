"""The results of an eval run: :class:`CaseResult` and :class:`EvalReport`.

Rules:

- Cases are in dataset order, whatever order they ran in.
- A case's status is derived, never stored apart: diverged (a replay left
  the recording), error (the run failed, or an agent or context factory
  raised), failed (an evaluator failed it), skipped (every evaluator
  skipped), else passed. :meth:`EvalReport.passed` is true iff no case
  failed, errored or diverged.
- Skipped scores count toward neither pass/fail nor any mean.
- The JSON form (:meth:`EvalReport.to_dict`) is versioned; a saved run is a
  directory holding ``report.json``, ``report.html`` and ``traces/`` (one
  helikon trace per case, plus a page a person can read), and loads back
  with :meth:`EvalReport.load` for re-scoring or replay.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from statistics import fmean
from typing import Any, Final

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.errors import HelikonError
from helikon.evals._dataset import EvalCase
from helikon.evals._html import render_report, render_trace_page
from helikon.evals._results import (
    FAILING,
    CaseCounts,
    CaseResult,
    CaseStatus,
    Divergence,
    EvaluatorStats,
)
from helikon.evals._scores import CaseScore, Score, ScoreOutcome
from helikon.evals._table import render_table
from helikon.model import Usage
from helikon.sessions import event_from_json, event_to_json
from helikon.trace import Trace

#: The report format's name and version, in every ``report.json``.
REPORT_FORMAT: Final = "helikon-eval-report"
REPORT_VERSION: Final = 1


class ReportFormatError(HelikonError):
    """A saved report could not be read."""


@attrs.frozen
class EvalReport:
    """An eval run's results, in dataset order.

    Args:
        run_id: the eval run's id (each case's agent run id derives from it).
        evaluators: the evaluators' names, in the order they ran.
        cases: one result per case, in dataset order.
        name: a label for the run.
        mode: ``"run"``, ``"rescore"`` (scored again from saved traces) or
            ``"replay"`` (saved traces replayed against an agent).
        source_run: the saved run a re-score or replay read.
        started_at: when the run started (ms since the Unix epoch).
        duration_ms: how long it took.
    """

    run_id: str
    evaluators: tuple[str, ...]
    cases: tuple[CaseResult, ...]
    name: str = ""
    mode: str = "run"
    source_run: str | None = None
    started_at: int = 0
    duration_ms: float = 0.0

    def passed(self) -> bool:
        """True iff no case failed, errored or diverged."""
        return all(case.status not in FAILING for case in self.cases)

    @property
    def counts(self) -> CaseCounts:
        statuses = [case.status for case in self.cases]
        return CaseCounts(
            statuses.count(CaseStatus.PASSED),
            statuses.count(CaseStatus.FAILED),
            statuses.count(CaseStatus.ERROR),
            statuses.count(CaseStatus.DIVERGED),
            statuses.count(CaseStatus.SKIPPED),
        )

    @property
    def mean(self) -> float | None:
        """The mean of every non-skipped score of every case (None when there is none)."""
        values = [
            s.score.value for c in self.cases for s in c.scores if s.score.outcome is not ScoreOutcome.SKIPPED
        ]
        return fmean(values) if values else None

    @property
    def skipped_scores(self) -> int:
        """How many scores were skips (a dataset missing what an evaluator needs shows here)."""
        return sum(s.score.outcome is ScoreOutcome.SKIPPED for c in self.cases for s in c.scores)

    @property
    def usage(self) -> Usage:
        """What every case's run spent together (its ``cost`` is None when
        a case spent tokens on a model without a price)."""
        total = Usage()
        for case in self.cases:
            total = total + case.usage
        return total

    def stats(self) -> tuple[EvaluatorStats, ...]:
        """Per-evaluator statistics, in evaluator order."""
        return tuple(self.stats_for(name) for name in self.evaluators)

    def stats_for(self, evaluator: str) -> EvaluatorStats:
        scores = [s.score for c in self.cases for s in c.scores if s.evaluator == evaluator]
        values = [s.value for s in scores if s.outcome is not ScoreOutcome.SKIPPED]
        return EvaluatorStats(
            evaluator,
            sum(s.outcome is ScoreOutcome.PASSED for s in scores),
            sum(s.outcome is ScoreOutcome.FAILED for s in scores),
            sum(s.outcome is ScoreOutcome.SKIPPED for s in scores),
            fmean(values) if values else None,
            min(values) if values else None,
            max(values) if values else None,
        )

    def failures(self) -> tuple[CaseResult, ...]:
        """The cases that failed, errored or diverged."""
        return tuple(case for case in self.cases if case.status in FAILING)

    def diverged(self) -> tuple[CaseResult, ...]:
        """The cases a replay found diverging from their recording."""
        return tuple(case for case in self.cases if case.divergence is not None)

    def case(self, case_id: str) -> CaseResult:
        """The result of case ``case_id`` (``KeyError`` when there is none)."""
        for case in self.cases:
            if case.case.id == case_id:
                return case
        raise KeyError(case_id)

    def without_timings(self) -> EvalReport:
        """The report with every clock reading zeroed (to compare two runs' results)."""
        cases = tuple(
            attrs.evolve(
                c, started_at=0, duration_ms=0.0, events=tuple(attrs.evolve(e, at=0) for e in c.events)
            )
            for c in self.cases
        )
        return attrs.evolve(self, cases=cases, started_at=0, duration_ms=0.0)

    def render_table(self, *, width: int = 32) -> str:
        """A plain-text table for a terminal: one row per case, then per-evaluator stats."""
        return render_table(self, width=width)

    def to_html(self) -> str:
        """The report as one self-contained HTML page; its trace links need the pages
        :meth:`write_html` (or :meth:`save`) writes beside it."""
        return render_report(self)

    # -- JSON --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-compatible data (``summary`` and ``stats`` are derived, for readers)."""
        counts = self.counts
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "mode": self.mode,
            "source_run": self.source_run,
            "started_at": self.started_at,
            "duration_ms": self.duration_ms,
            "evaluators": list(self.evaluators),
            "summary": {
                "passed": self.passed(),
                "cases": counts.total,
                "passed_cases": counts.passed,
                "failed_cases": counts.failed,
                "error_cases": counts.errors,
                "diverged_cases": counts.diverged,
                "skipped_cases": counts.skipped,
                "skipped_scores": self.skipped_scores,
                "mean": self.mean,
                "usage": usage_dict(self.usage),
            },
            "stats": [_stats_dict(s) for s in self.stats()],
            "cases": [case_dict(c) for c in self.cases],
        }

    def to_json(self, *, indent: int = 0) -> str:
        """:meth:`to_dict` as JSON text (sorted keys; ``indent`` > 0 pretty-prints)."""
        data = msgspec.json.encode(self.to_dict(), order="sorted")
        return (msgspec.json.format(data, indent=indent) if indent else data).decode()

    @classmethod
    def from_dict(cls, data: Any, *, traces: Iterable[Trace | None] | None = None) -> EvalReport:
        """Rebuild a report from :meth:`to_dict`'s output (``traces``: one per case, or None).

        Raises:
            ReportFormatError: it is not a report of this version.
        """
        if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
            raise ReportFormatError("not a helikon eval report")
        if data.get("version") != REPORT_VERSION:
            raise ReportFormatError(f"eval report version {data.get('version')!r} is not {REPORT_VERSION}")
        try:
            cases = [_case_from(c) for c in data["cases"]]
            if traces is not None:
                cases = [attrs.evolve(c, trace=t) for c, t in zip(cases, traces, strict=True)]
            return cls(
                run_id=data["run_id"],
                evaluators=tuple(data["evaluators"]),
                cases=tuple(cases),
                name=data.get("name", ""),
                mode=data.get("mode", "run"),
                source_run=data.get("source_run"),
                started_at=data.get("started_at", 0),
                duration_ms=data.get("duration_ms", 0.0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportFormatError(f"malformed eval report: {type(exc).__name__}: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> EvalReport:
        try:
            data = msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            raise ReportFormatError(f"not JSON: {exc}") from None
        return cls.from_dict(data)

    # -- saved runs ----------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the run to ``directory``: ``report.json``, ``report.html`` and
        ``traces/<case>.jsonl`` (+ a readable ``.html``) for every recorded case.

        Returns the path of ``report.html``.
        """
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        (root / "report.json").write_text(self.to_json(indent=2) + "\n", encoding="utf-8")
        return self.write_html(root / "report.html")

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the HTML report to ``path`` and every page it links: ``traces/<case>.html``
        and ``traces/<case>.jsonl`` beside it, for every recorded case. Returns ``path``.
        """
        html = Path(path)
        traces = html.parent / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        for case in self.cases:
            if case.trace is not None:
                case.trace.dump(traces / f"{case.trace_name}.jsonl")
                page = render_trace_page(
                    case.trace, title=f"{case.case.id} ({self.run_id})", report=html.name
                )
                (traces / f"{case.trace_name}.html").write_text(page, encoding="utf-8")
        html.write_text(self.to_html(), encoding="utf-8")
        return html

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> EvalReport:
        """Read a run :meth:`save` wrote (the directory, or its ``report.json``), traces included.

        Raises:
            ReportFormatError: the report cannot be read.
            TraceFormatError: a case's trace cannot be read.
        """
        path = Path(directory)
        if path.is_dir():
            path = path / "report.json"
        try:
            data = msgspec.json.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError) as exc:
            raise ReportFormatError(f"{path}: cannot read the report: {exc}") from None
        names = [raw.get("trace") if isinstance(raw, dict) else None for raw in data.get("cases", ())]
        traces = [Trace.load(path.parent / name) if name else None for name in names]
        return cls.from_dict(data, traces=traces)


def _stats_dict(stats: EvaluatorStats) -> dict[str, Any]:
    return {
        "evaluator": stats.evaluator,
        "passed": stats.passed,
        "failed": stats.failed,
        "skipped": stats.skipped,
        "mean": stats.mean,
        "min": stats.minimum,
        "max": stats.maximum,
    }


def score_dict(score: CaseScore) -> dict[str, JsonValue]:
    s = score.score
    return {
        "evaluator": score.evaluator,
        "value": s.value,
        "outcome": s.outcome.value,
        "reason": s.reason,
        "expected": s.expected,
        "actual": s.actual,
    }


def usage_dict(usage: Usage) -> dict[str, Any]:
    """``usage`` as report JSON: counts as numbers, the cost as an exact
    decimal string (or null: unknown)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
        "cost": None if usage.cost is None else str(usage.cost),
    }


def _usage_from(data: Any) -> Usage:
    """The inverse of :func:`usage_dict` (reports written before cost was
    reported have no ``cost`` and fewer counts)."""
    data = dict(data or {})
    cost = data.pop("cost", None)
    return Usage(**data, cost=None if cost is None else Decimal(cost))


def case_dict(case: CaseResult) -> dict[str, Any]:
    divergence = case.divergence
    return {
        "index": case.index,
        "id": case.case.id,
        "input": case.case.input,
        "expected": case.case.expected,
        "expected_tools": None if case.case.expected_tools is None else list(case.case.expected_tools),
        "metadata": dict(case.case.metadata),
        "status": case.status.value,
        "final_output": case.final_output,
        "tool_calls": list(case.tool_calls),
        "error": case.error,
        "divergence": None
        if divergence is None
        else {
            "step": divergence.step,
            "headline": divergence.headline,
            "differences": list(divergence.differences),
            "detail": divergence.detail,
        },
        "usage": usage_dict(case.usage),
        "run_id": case.run_id,
        "started_at": case.started_at,
        "duration_ms": case.duration_ms,
        "scores": [score_dict(s) for s in case.scores],
        "events": [event_to_json(e) for e in case.events],
        "trace": f"traces/{case.trace_name}.jsonl" if case.trace is not None else None,
    }


def _case_from(data: Any) -> CaseResult:
    case = EvalCase(
        data["id"], data["input"], data.get("expected"), data.get("expected_tools"), data.get("metadata")
    )
    divergence = data.get("divergence")
    return CaseResult(
        index=data["index"],
        case=case,
        final_output=data.get("final_output", ""),
        tool_calls=tuple(data.get("tool_calls", ())),
        scores=tuple(
            CaseScore(
                s["evaluator"],
                Score(
                    s["value"],
                    ScoreOutcome(s["outcome"]),
                    s.get("reason", ""),
                    s.get("expected"),
                    s.get("actual"),
                ),
            )
            for s in data.get("scores", ())
        ),
        error=data.get("error"),
        divergence=None
        if divergence is None
        else Divergence(
            divergence["step"],
            divergence["headline"],
            tuple(divergence.get("differences", ())),
            divergence.get("detail", ""),
        ),
        usage=_usage_from(data.get("usage")),
        run_id=data.get("run_id", ""),
        started_at=data.get("started_at", 0),
        duration_ms=data.get("duration_ms", 0.0),
        events=tuple(event_from_json(e) for e in data.get("events", ())),
    )


__all__ = [
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "EvalReport",
    "ReportFormatError",
    "case_dict",
    "score_dict",
    "usage_dict",
]
