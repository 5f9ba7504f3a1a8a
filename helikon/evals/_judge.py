"""LLM-as-judge: :class:`LlmJudge` asks a model to grade an answer against a rubric.

The judge is itself a helikon agent with a structured output
(:class:`JudgeVerdict`: a score in [0, 1] and its reasoning), run by the live
interpreter, so it gets the loop's structured-output repair for free and a
scripted :class:`~helikon.testing.MockModel` can stand in for it in tests.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from helikon.agent import LlmAgent
from helikon.errors import RunError, describe
from helikon.evals._dataset import EvalCase
from helikon.evals._evaluators import pretty_json
from helikon.evals._scores import CaseOutcome, EvalError, Score
from helikon.protocols import Model
from helikon.results import collect_typed

_INSTRUCTIONS = """\
You are a strict, fair grader. Grade the response below against the rubric.
Answer with a JSON object: "score", a number from 0 (does not meet the rubric
at all) to 1 (fully meets it), and "reasoning", one or two sentences on why.

Rubric:
{rubric}"""


@attrs.frozen
class JudgeVerdict:
    """The judge's answer."""

    score: float
    """How well the response meets the rubric, from 0 (not at all) to 1 (fully)."""
    reasoning: str
    """One or two sentences: why this score."""


def _threshold(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value}")


def judge_prompt(case: EvalCase, outcome: CaseOutcome) -> str:
    """What the judge is shown: the input, the expected answer if any, the tools called, the response.

    >>> print(judge_prompt(EvalCase("c", "2+3?"), CaseOutcome("5")))
    User input:
    2+3?
    <BLANKLINE>
    Response to grade:
    5
    """
    parts = [f"User input:\n{case.input}"]
    if case.expected is not None:
        expected = case.expected if isinstance(case.expected, str) else pretty_json(case.expected)
        parts.append(f"Expected answer:\n{expected}")
    if outcome.tool_calls:
        parts.append(
            "Tools called, in order:\n" + "\n".join(f"- {c.name}({c.arguments})" for c in outcome.tool_calls)
        )
    parts.append(f"Response to grade:\n{outcome.final_output}")
    return "\n\n".join(parts)


@attrs.frozen
class LlmJudge:
    """A model grades each answer against ``rubric``; it passes at ``threshold`` or above.

    Args:
        model: the judge model, or a function ``case -> model`` (give each
            case its own model when the model is stateful, as a
            :class:`~helikon.testing.MockModel` is, and cases run concurrently).
        rubric: what a good answer does, in plain words.
        threshold: the lowest passing score, in [0, 1].
        name: the evaluator's name in reports.
        require_expected: skip cases without ``expected`` (for rubrics that
            compare with the expected answer).

    Raises (from ``evaluate``):
        EvalError: the judge's run failed, or it answered a score outside [0, 1].
    """

    model: Model | Callable[[EvalCase], Model]
    rubric: str
    threshold: float = attrs.field(default=0.5, validator=_threshold)
    name: str = "llm_judge"
    require_expected: bool = False

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
        if self.require_expected and case.expected is None:
            return Score.skipped("the case has no expected output to judge against")
        model = self.model if isinstance(self.model, Model) else self.model(case)
        judge: LlmAgent[None] = LlmAgent(
            name=self.name,
            model=model,
            instructions=_INSTRUCTIONS.format(rubric=self.rubric),
            output_type=JudgeVerdict,
        )
        try:
            result = await collect_typed(judge.run(None, judge_prompt(case, outcome)), JudgeVerdict)
        except RunError as exc:
            raise EvalError(f"the judge's run failed: {describe(exc.error)}") from None
        verdict = result.final_output
        if not 0.0 <= verdict.score <= 1.0:
            raise EvalError(f"the judge answered a score of {verdict.score}, outside [0, 1]")
        return Score.threshold(verdict.score, self.threshold, verdict.reasoning)


__all__ = ["JudgeVerdict", "LlmJudge", "judge_prompt"]
