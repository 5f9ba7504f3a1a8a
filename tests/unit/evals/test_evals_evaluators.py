"""The built-in evaluators: each passes, fails and skips, and the judge runs a scripted model."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest
import trio

from helikon.errors import ModelError
from helikon.evals import (
    CaseOutcome,
    EvalCase,
    EvalError,
    Evaluator,
    ExactMatch,
    JsonSchemaEvaluator,
    LlmJudge,
    Score,
    ScoreOutcome,
    ToolUseTrajectory,
)
from helikon.ids import CallId
from helikon.items import ToolCall, text_of
from helikon.testing import MockModel, say

PASSED, FAILED, SKIPPED = ScoreOutcome.PASSED, ScoreOutcome.FAILED, ScoreOutcome.SKIPPED


def evaluate(evaluator: Evaluator, case: EvalCase, outcome: CaseOutcome) -> Score:
    async def main() -> Score:
        return await evaluator.evaluate(case, outcome)

    return trio.run(main)


def answered(text: str, tools: Sequence[str] = ()) -> CaseOutcome:
    calls = tuple(ToolCall(CallId(f"c{n}"), name, "{}") for n, name in enumerate(tools))
    return CaseOutcome(text, calls)


def case(expected: object = None, tools: Sequence[str] | None = None, **metadata: object) -> EvalCase:
    return EvalCase("c1", "question?", expected, tools, metadata)  # type: ignore[arg-type]


def test_every_builtin_is_an_evaluator() -> None:
    judge = LlmJudge(MockModel(), "be right")
    for evaluator in (ExactMatch(), ToolUseTrajectory.exact(), JsonSchemaEvaluator(), judge):
        assert isinstance(evaluator, Evaluator)


# -- ExactMatch ---------------------------------------------------------------------------


def test_exact_match_on_text() -> None:
    assert evaluate(ExactMatch(), case("Paris"), answered("Paris")) == Score.passed(
        reason="the answer equals the expected text"
    )
    assert evaluate(ExactMatch(), case("Paris"), answered("  Paris\n")).outcome is PASSED
    failed = evaluate(ExactMatch(), case("Paris"), answered("Lyon"))
    assert (failed.outcome, failed.value, failed.expected, failed.actual) == (FAILED, 0.0, "Paris", "Lyon")


def test_exact_match_options() -> None:
    assert evaluate(ExactMatch(strip=False), case("Paris"), answered("Paris ")).outcome is FAILED
    assert evaluate(ExactMatch(), case("Paris"), answered("paris")).outcome is FAILED
    assert evaluate(ExactMatch(case_sensitive=False), case("Paris"), answered("PARIS")).outcome is PASSED


def test_exact_match_on_json_compares_values_not_text() -> None:
    expected = {"order": "A1", "items": [1, 2.0]}
    assert (
        evaluate(ExactMatch(), case(expected), answered('{"items":[1.0,2],"order":"A1"}')).outcome is PASSED
    )
    wrong = evaluate(ExactMatch(), case(expected), answered('{"items":[1,3],"order":"A1"}'))
    assert wrong.outcome is FAILED and '"items"' in (wrong.expected or "") and "3" in (wrong.actual or "")
    not_json = evaluate(ExactMatch(), case(expected), answered("the order is A1"))
    assert not_json.outcome is FAILED and "not JSON" in not_json.reason
    # true is not 1, even though Python says True == 1
    assert evaluate(ExactMatch(), case([True]), answered("[1]")).outcome is FAILED
    assert evaluate(ExactMatch(), case(3), answered("3.0")).outcome is PASSED


def test_exact_match_skips_without_expected() -> None:
    skipped = evaluate(ExactMatch(), case(), answered("anything"))
    assert skipped == Score.skipped("the case has no expected output")


# -- ToolUseTrajectory ---------------------------------------------------------------------

TRAJECTORIES = [
    # (expected, called, exact, in_order, any_order) as (value, outcome)
    (["a", "b"], ["a", "b"], (1.0, PASSED), (1.0, PASSED), (1.0, PASSED)),
    (["a", "b"], ["b", "a"], (0.0, FAILED), (0.5, FAILED), (1.0, PASSED)),
    (["a", "b"], ["a", "x", "b"], (1 / 3, FAILED), (1.0, PASSED), (1.0, PASSED)),
    (["a", "b"], ["a"], (0.5, FAILED), (0.5, FAILED), (0.5, FAILED)),
    (["a", "a"], ["a"], (0.5, FAILED), (0.5, FAILED), (0.5, FAILED)),
    (["a"], ["a", "a"], (0.5, FAILED), (1.0, PASSED), (1.0, PASSED)),
    ([], [], (1.0, PASSED), (1.0, PASSED), (1.0, PASSED)),
    ([], ["a"], (0.0, FAILED), (1.0, PASSED), (1.0, PASSED)),
    (["a"], [], (0.0, FAILED), (0.0, FAILED), (0.0, FAILED)),
]


@pytest.mark.parametrize(("expected", "called", "exact", "in_order", "any_order"), TRAJECTORIES)
def test_tool_trajectories(
    expected: list[str],
    called: list[str],
    exact: tuple[float, ScoreOutcome],
    in_order: tuple[float, ScoreOutcome],
    any_order: tuple[float, ScoreOutcome],
) -> None:
    for evaluator, want in (
        (ToolUseTrajectory.exact(), exact),
        (ToolUseTrajectory.in_order(), in_order),
        (ToolUseTrajectory.any_order(), any_order),
    ):
        score = evaluate(evaluator, case(tools=expected), answered("done", called))
        assert (score.value, score.outcome) == pytest.approx(want), evaluator.name


def test_a_failed_trajectory_says_what_went_wrong_and_diffs_the_lists() -> None:
    score = evaluate(
        ToolUseTrajectory.exact(), case(tools=["lookup", "refund"]), answered("", ["lookup", "cancel"])
    )
    assert score.reason == "call 2 is 'cancel', expected 'refund'; called [lookup, cancel]"
    assert (score.expected, score.actual) == ("lookup\nrefund", "lookup\ncancel")
    in_order = evaluate(
        ToolUseTrajectory.in_order(), case(tools=["lookup", "refund"]), answered("", ["refund"])
    )
    assert in_order.reason.startswith("'lookup' was not called")
    missing = evaluate(ToolUseTrajectory.any_order(), case(tools=["a", "b", "b"]), answered("", ["b"]))
    assert missing.reason.startswith("missing: 'a' (1 more), 'b' (1 more)")


def test_trajectory_names_and_skips() -> None:
    names = [
        t.name
        for t in (ToolUseTrajectory.exact(), ToolUseTrajectory.in_order(), ToolUseTrajectory.any_order())
    ]
    assert names == ["tool_trajectory", "tool_trajectory_in_order", "tool_trajectory_any_order"]
    assert ToolUseTrajectory.exact("tools").name == "tools"
    skipped = evaluate(ToolUseTrajectory.any_order(), case(), answered("", ["a"]))
    assert skipped.outcome is SKIPPED and skipped.reason == "the case has no expected_tools"


# -- JsonSchemaEvaluator -------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "total": {"type": "number", "minimum": 0}},
    "required": ["order", "total"],
}


def test_json_schema_passes_and_fails() -> None:
    evaluator = JsonSchemaEvaluator(SCHEMA)
    assert evaluate(evaluator, case(), answered('{"order": "A1", "total": 3.5}')).outcome is PASSED
    bad = evaluate(evaluator, case(), answered('{"order": 1, "total": -2}'))
    assert bad.outcome is FAILED and bad.reason.startswith("2 schema error(s): ")
    assert "$.order: 1 is not of type 'string'" in bad.reason and "$.total" in bad.reason
    not_json = evaluate(evaluator, case(), answered("order A1"))
    assert not_json.outcome is FAILED and not_json.reason.startswith("the answer is not JSON")


def test_json_schema_from_the_cases_metadata_and_skips_without_one() -> None:
    evaluator = JsonSchemaEvaluator()
    with_schema = case(schema={"type": "array"})
    assert evaluate(evaluator, with_schema, answered("[1, 2]")).outcome is PASSED
    assert evaluate(evaluator, with_schema, answered("{}")).outcome is FAILED
    assert (
        evaluate(
            JsonSchemaEvaluator(metadata_key="shape"), case(shape={"type": "null"}), answered("null")
        ).outcome
        is PASSED
    )
    skipped = evaluate(evaluator, case(), answered("[]"))
    assert skipped.outcome is SKIPPED and "metadata['schema']" in skipped.reason


def test_json_schema_rejects_an_invalid_schema() -> None:
    with pytest.raises(EvalError, match="not a valid JSON Schema"):
        evaluate(JsonSchemaEvaluator({"type": "no-such-type"}), case(), answered("1"))
    with pytest.raises(EvalError, match="must be a JSON object"):
        evaluate(JsonSchemaEvaluator(), case(schema=[1]), answered("1"))


# -- LlmJudge ------------------------------------------------------------------------------


def verdict(score: float, reasoning: str = "ok") -> list[object]:
    return say(msgspec.json.encode({"score": score, "reasoning": reasoning}).decode())  # type: ignore[return-value]


def test_the_judge_passes_at_the_threshold_and_fails_below() -> None:
    model = MockModel([verdict(0.8, "Polite and correct."), verdict(0.6, "Vague.")])  # type: ignore[list-item]
    judge = LlmJudge(model, "The answer states the order's status.", threshold=0.7)
    good = evaluate(judge, case("Order A1 has shipped."), answered("Order A1 has shipped.", ["lookup_order"]))
    assert good == Score.passed(0.8, "Polite and correct.")
    vague = evaluate(judge, case(), answered("Something happened."))
    assert vague == Score.failed(0.6, "Vague.")


def test_the_judge_sees_the_rubric_the_input_the_expected_answer_tools_and_response() -> None:
    model = MockModel([verdict(1.0)])  # type: ignore[list-item]
    evaluate(
        LlmJudge(model, "RUBRIC-TEXT"), case("EXPECTED-TEXT"), answered("RESPONSE-TEXT", ["lookup_order"])
    )
    (request,) = model.requests
    shown = "\n".join(text_of(m.content) for m in request.messages if hasattr(m, "content"))
    shown += "\n" + (request.instructions or "")
    for part in ("RUBRIC-TEXT", "question?", "EXPECTED-TEXT", "lookup_order", "RESPONSE-TEXT"):
        assert part in shown
    assert request.settings.response_format is not None  # asked for a structured verdict


def test_the_judge_repairs_a_malformed_verdict_once() -> None:
    model = MockModel([say("I think it is fine."), verdict(0.9)])  # type: ignore[list-item]
    assert evaluate(LlmJudge(model, "r"), case(), answered("x")).value == 0.9
    assert model.calls == 2


def test_the_judge_skips_without_expected_when_it_needs_one() -> None:
    model = MockModel([])
    skipped = evaluate(
        LlmJudge(model, "matches the expected answer", require_expected=True), case(), answered("x")
    )
    assert skipped.outcome is SKIPPED and model.calls == 0


def test_a_judge_that_fails_or_answers_out_of_range_is_an_eval_error() -> None:
    with pytest.raises(EvalError, match=r"outside \[0, 1\]"):
        evaluate(LlmJudge(MockModel([verdict(1.5)]), "r"), case(), answered("x"))  # type: ignore[list-item]
    broken = MockModel([[ModelError.unavailable("judge is down")]])
    with pytest.raises(EvalError, match=r"the judge's run failed: .*judge is down"):
        evaluate(LlmJudge(broken, "r"), case(), answered("x"))
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\]"):
        LlmJudge(MockModel(), "r", threshold=2)


def test_a_judge_model_per_case() -> None:
    seen: list[str] = []

    def model_for(c: EvalCase) -> MockModel:
        seen.append(c.id)
        return MockModel([verdict(1.0)])  # type: ignore[list-item]

    judge = LlmJudge(model_for, "r")
    assert evaluate(judge, case(), answered("x")).outcome is PASSED
    assert evaluate(judge, case(), answered("y")).outcome is PASSED
    assert seen == ["c1", "c1"]


def test_score_values_are_checked() -> None:
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Score.passed(1.5)
    assert Score.threshold(0.7, 0.7).outcome is PASSED
