"""The carriers of an eval run's results: a case's result, its status, a
replay's divergence, and the per-evaluator numbers.

A case's status is derived, never stored apart: diverged (a replay left the
recording), error (the run failed, or an agent or context factory raised),
failed (an evaluator failed it), skipped (every evaluator skipped), else
passed.
"""

from __future__ import annotations

import enum
import re
from typing import Final

import attrs

from helikon.evals._dataset import EvalCase
from helikon.evals._scores import CaseScore, Score, ScoreOutcome
from helikon.model import Usage
from helikon.sessions import SessionEvent
from helikon.trace import Trace


class CaseStatus(enum.Enum):
    """How a case ended."""

    #: Every evaluator that checked something passed it.
    PASSED = "passed"
    #: At least one evaluator failed it.
    FAILED = "failed"
    #: The run failed (or the case could not be set up): no evaluator ran.
    ERROR = "error"
    #: A replay left the recording: the changed agent asked for something else.
    DIVERGED = "diverged"
    #: Every evaluator skipped it.
    SKIPPED = "skipped"


#: The statuses that fail a report.
FAILING: Final = frozenset({CaseStatus.FAILED, CaseStatus.ERROR, CaseStatus.DIVERGED})


@attrs.frozen
class Divergence:
    """Where a replayed case left its recording.

    Args:
        step: the index of the first differing trace step.
        headline: what differs, in one line.
        differences: the differing fields, ``path: expected X, got Y``.
        detail: the replay's full message (with the steps before it).
    """

    step: int
    headline: str
    differences: tuple[str, ...] = ()
    detail: str = ""


@attrs.frozen
class CaseResult:
    """One case's run and scores.

    ``events`` is the run's conversation in the session-event form (what a
    session backend would have stored); ``trace`` the recorded run (kept
    out of equality: compare traces by their bytes).
    """

    index: int
    case: EvalCase
    final_output: str = ""
    tool_calls: tuple[str, ...] = ()
    scores: tuple[CaseScore, ...] = ()
    error: str | None = None
    divergence: Divergence | None = None
    usage: Usage = Usage()
    run_id: str = ""
    started_at: int = 0
    duration_ms: float = 0.0
    events: tuple[SessionEvent, ...] = ()
    trace: Trace | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def status(self) -> CaseStatus:
        if self.divergence is not None:
            return CaseStatus.DIVERGED
        if self.error is not None:
            return CaseStatus.ERROR
        outcomes = [s.score.outcome for s in self.scores]
        if ScoreOutcome.FAILED in outcomes:
            return CaseStatus.FAILED
        if outcomes and all(o is ScoreOutcome.SKIPPED for o in outcomes):
            return CaseStatus.SKIPPED
        return CaseStatus.PASSED

    def score(self, evaluator: str) -> Score | None:
        """The score ``evaluator`` gave, if it ran."""
        return next((s.score for s in self.scores if s.evaluator == evaluator), None)

    @property
    def trace_name(self) -> str:
        """The base name of this case's files under ``traces/``: ``0001-<case id>``."""
        return f"{self.index + 1:04d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', self.case.id)[:60]}"


@attrs.frozen
class EvaluatorStats:
    """One evaluator's numbers over a run (``mean`` etc. are None when it scored nothing)."""

    evaluator: str
    passed: int
    failed: int
    skipped: int
    mean: float | None
    minimum: float | None
    maximum: float | None

    @property
    def pass_rate(self) -> float | None:
        scored = self.passed + self.failed
        return self.passed / scored if scored else None


@attrs.frozen
class CaseCounts:
    """How many cases ended each way."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    diverged: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.diverged + self.skipped


__all__ = ["FAILING", "CaseCounts", "CaseResult", "CaseStatus", "Divergence", "EvaluatorStats"]
