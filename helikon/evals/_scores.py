"""What an evaluator sees and what it answers.

- :class:`CaseOutcome` is a case's run as an evaluator sees it: the final
  answer, the tool calls in order, every event, and the run's error if it
  failed. It is built from the run's events alone, so a recorded trace gives
  back the same outcome (that is what re-scoring a saved run relies on).
- :class:`Score` is a value in [0, 1] with an outcome: passed, failed or
  skipped. A skip is not a failure: an evaluator whose case lacks what it
  needs (no ``expected``, no ``expected_tools``) skips, and skips count
  toward neither pass/fail nor the mean, so a misconfigured dataset shows up
  as a visible skip count instead of a silent pass.
- :class:`Evaluator` is the protocol every evaluator implements.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import attrs

from helikon.errors import HelikonError, describe
from helikon.evals._dataset import EvalCase
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, ToolCallItem
from helikon.items import ToolCall, text_of
from helikon.model import Usage


class EvalError(HelikonError):
    """An evaluator could not score a case (the case then fails with the message)."""


class ScoreOutcome(enum.Enum):
    """How a score counts."""

    #: The case meets this evaluator's bar.
    PASSED = "passed"
    #: The case misses it: the case fails.
    FAILED = "failed"
    #: The evaluator had nothing to check (counts toward nothing but the skip count).
    SKIPPED = "skipped"


def _unit(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a score's {attribute.name} must be in [0, 1], got {value}")


@attrs.frozen
class Score:
    """An evaluator's verdict on one case.

    Args:
        value: in [0, 1] (0 for a skip).
        outcome: passed, failed or skipped.
        reason: one line a person reads: why it passed, failed or skipped.
        expected: what was expected, as text (reports diff it with ``actual``).
        actual: what the run produced, as text.

    >>> Score.passed().outcome, Score.failed(0.25, "half wrong").value
    (<ScoreOutcome.PASSED: 'passed'>, 0.25)
    """

    value: float = attrs.field(converter=float, validator=_unit)
    outcome: ScoreOutcome
    reason: str = ""
    expected: str | None = None
    actual: str | None = None

    @classmethod
    def passed(
        cls, value: float = 1.0, reason: str = "", *, expected: str | None = None, actual: str | None = None
    ) -> Score:
        return cls(value, ScoreOutcome.PASSED, reason, expected, actual)

    @classmethod
    def failed(
        cls, value: float = 0.0, reason: str = "", *, expected: str | None = None, actual: str | None = None
    ) -> Score:
        return cls(value, ScoreOutcome.FAILED, reason, expected, actual)

    @classmethod
    def skipped(cls, reason: str) -> Score:
        return cls(0.0, ScoreOutcome.SKIPPED, reason)

    @classmethod
    def threshold(
        cls,
        value: float,
        threshold: float,
        reason: str = "",
        *,
        expected: str | None = None,
        actual: str | None = None,
    ) -> Score:
        """Passed when ``value >= threshold``, else failed.

        >>> Score.threshold(0.5, 0.7).outcome
        <ScoreOutcome.FAILED: 'failed'>
        """
        outcome = ScoreOutcome.PASSED if value >= threshold else ScoreOutcome.FAILED
        return cls(value, outcome, reason, expected, actual)


@attrs.frozen
class CaseScore:
    """``score``, given by the evaluator named ``evaluator``."""

    evaluator: str
    score: Score


@attrs.frozen
class CaseOutcome:
    """A case's run, as evaluators see it.

    Args:
        final_output: the last assistant message's text ("" when none).
        tool_calls: every tool call the model made, in order.
        error: why the run failed, or None when it completed.
        usage: the run's token usage.
        events: every event of the run.
    """

    final_output: str
    tool_calls: tuple[ToolCall, ...] = ()
    error: str | None = None
    usage: Usage = Usage()
    events: tuple[AgentEvent, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The called tools' names, in call order."""
        return tuple(call.name for call in self.tool_calls)

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent], error: str | None = None) -> CaseOutcome:
        """The outcome a run's ``events`` describe.

        ``error`` is a failure seen outside the events (the run raised); a
        run whose last event is ``RunFailed`` failed with that error, and a
        run with no terminal event did not finish.
        """
        events = tuple(events)
        final = ""
        calls: list[ToolCall] = []
        for event in events:
            if type(event) is MessageOutput:
                final = text_of(event.item.content)
            elif type(event) is ToolCallItem:
                calls.append(event.item)
        last = events[-1] if events else None
        usage = Usage()
        if type(last) is RunCompleted:
            usage = last.usage
        elif type(last) is RunFailed:
            usage = last.usage
            error = error or describe(last.error)
        elif error is None:
            error = "the run ended without a terminal event"
        return cls(final, tuple(calls), error, usage, events)


@runtime_checkable
class Evaluator(Protocol):
    """Scores a case's outcome.

    ``name`` labels the evaluator's column in reports (unique in one run).
    ``evaluate`` returns a :class:`Score`; raising (preferably
    :class:`EvalError`) fails the case with the message. Evaluators run only
    on runs that completed: a failed run fails its case before any
    evaluator runs.
    """

    @property
    def name(self) -> str: ...

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score: ...


__all__ = ["CaseOutcome", "CaseScore", "EvalError", "Evaluator", "Score", "ScoreOutcome"]
