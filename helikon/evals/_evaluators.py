"""The built-in deterministic evaluators: :class:`ExactMatch`,
:class:`ToolUseTrajectory` and :class:`JsonSchemaEvaluator`.

Each skips (never fails) when the case lacks what it checks, and fills a
failing score's ``expected``/``actual`` with text a report can diff. The
LLM-as-judge evaluator is in :mod:`helikon.evals._judge`.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence

import attrs
import msgspec

from helikon._json import JsonObject, JsonValue
from helikon.evals._dataset import EvalCase
from helikon.evals._scores import CaseOutcome, EvalError, Score
from helikon.loop import parse_json, schema_errors

#: How many schema errors a score's reason lists.
_MAX_REASONS = 3


def pretty_json(value: JsonValue) -> str:
    """``value`` as indented JSON with sorted keys (stable text to diff).

    >>> print(pretty_json({"b": 1, "a": [True]}))
    {
      "a": [
        true
      ],
      "b": 1
    }
    """
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2).decode()


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """JSON equality: ``1 == 1.0``, but ``true`` is not ``1`` (as in Python it would be).

    >>> json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]}), json_equal(True, 1)
    (True, False)
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


@attrs.frozen
class ExactMatch:
    """The final answer equals ``case.expected``.

    A text ``expected`` is compared with the answer's text (surrounding
    whitespace ignored unless ``strip=False``; letter case ignored with
    ``case_sensitive=False``). Any other JSON ``expected`` (an object, a
    list, a number...) is compared with the answer parsed as JSON. Skips a
    case without ``expected``.
    """

    name: str = "exact_match"
    strip: bool = True
    case_sensitive: bool = True

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
        expected = case.expected
        if expected is None:
            return Score.skipped("the case has no expected output")
        answer = outcome.final_output
        if isinstance(expected, str):
            want, got = self._normal(expected), self._normal(answer)
            if want == got:
                return Score.passed(reason="the answer equals the expected text")
            return Score.failed(
                reason="the answer differs from the expected text", expected=expected, actual=answer
            )
        value, error = parse_json(answer)
        if error is not None:
            return Score.failed(
                reason=f"expected a JSON value, the answer is not JSON ({error})",
                expected=pretty_json(expected),
                actual=answer,
            )
        if json_equal(expected, value):
            return Score.passed(reason="the answer's JSON equals the expected value")
        return Score.failed(
            reason="the answer's JSON differs from the expected value",
            expected=pretty_json(expected),
            actual=pretty_json(value),
        )

    def _normal(self, text: str) -> str:
        text = text.strip() if self.strip else text
        return text if self.case_sensitive else text.casefold()


class TrajectoryMatch(enum.Enum):
    """How :class:`ToolUseTrajectory` compares the tool calls with the expected ones."""

    #: The same tools, in the same order, and no others.
    EXACT = "exact"
    #: The expected tools in that order; other calls may come in between.
    IN_ORDER = "in_order"
    #: Every expected tool (as often as expected), in any order; others may come too.
    ANY_ORDER = "any_order"


@attrs.frozen
class ToolUseTrajectory:
    """The tools the model called match ``case.expected_tools``.

    Build it with :meth:`exact` (the default), :meth:`in_order` or
    :meth:`any_order`. The value is the share of the expected calls that
    were matched (for :meth:`exact`: the common prefix over the longer of
    the two lists); the case passes only on a full match. An empty
    ``expected_tools`` expects no tool call (for :meth:`exact`) and is met
    by anything (for the other two). Skips a case without ``expected_tools``.

    >>> ToolUseTrajectory.in_order().name
    'tool_trajectory_in_order'
    """

    match: TrajectoryMatch = TrajectoryMatch.EXACT
    name: str = attrs.field()

    @name.default
    def _default_name(self) -> str:
        return (
            "tool_trajectory"
            if self.match is TrajectoryMatch.EXACT
            else f"tool_trajectory_{self.match.value}"
        )

    @classmethod
    def exact(cls, name: str | None = None) -> ToolUseTrajectory:
        return cls(TrajectoryMatch.EXACT) if name is None else cls(TrajectoryMatch.EXACT, name)

    @classmethod
    def in_order(cls, name: str | None = None) -> ToolUseTrajectory:
        return cls(TrajectoryMatch.IN_ORDER) if name is None else cls(TrajectoryMatch.IN_ORDER, name)

    @classmethod
    def any_order(cls, name: str | None = None) -> ToolUseTrajectory:
        return cls(TrajectoryMatch.ANY_ORDER) if name is None else cls(TrajectoryMatch.ANY_ORDER, name)

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
        expected = case.expected_tools
        if expected is None:
            return Score.skipped("the case has no expected_tools")
        actual = outcome.tool_names
        match self.match:
            case TrajectoryMatch.EXACT:
                value, problem = _exact(expected, actual)
            case TrajectoryMatch.IN_ORDER:
                value, problem = _in_order(expected, actual)
            case TrajectoryMatch.ANY_ORDER:
                value, problem = _any_order(expected, actual)
        if problem is None:
            return Score.passed(value, f"called {_list(actual)}")
        return Score.failed(
            value,
            f"{problem}; called {_list(actual)}",
            expected="\n".join(expected),
            actual="\n".join(actual),
        )


def _list(names: Sequence[str]) -> str:
    return "[" + ", ".join(names) + "]" if names else "no tool"


def _exact(expected: Sequence[str], actual: Sequence[str]) -> tuple[float, str | None]:
    """Common prefix over the longer list.

    >>> _exact(["a", "b"], ["a", "c", "d"])
    (0.3333333333333333, "call 2 is 'c', expected 'b'")
    """
    if list(expected) == list(actual):
        return 1.0, None
    prefix = 0
    for want, got in zip(expected, actual, strict=False):
        if want != got:
            break
        prefix += 1
    value = prefix / max(len(expected), len(actual))
    if prefix == len(expected):
        return value, f"{len(actual) - prefix} unexpected call(s) after the expected ones"
    if prefix == len(actual):
        return value, f"expected {len(expected) - prefix} more call(s), starting with {expected[prefix]!r}"
    return value, f"call {prefix + 1} is {actual[prefix]!r}, expected {expected[prefix]!r}"


def _in_order(expected: Sequence[str], actual: Sequence[str]) -> tuple[float, str | None]:
    """Greedy subsequence match.

    >>> _in_order(["a", "b"], ["x", "a", "y", "b"])
    (1.0, None)
    >>> _in_order(["a", "b"], ["b", "a"])
    (0.5, "'b' was not called after 'a'")
    """
    if not expected:
        return 1.0, None
    position, matched = 0, 0
    for want in expected:
        while position < len(actual) and actual[position] != want:
            position += 1
        if position == len(actual):
            break
        matched += 1
        position += 1
    value = matched / len(expected)
    if matched == len(expected):
        return value, None
    missing = expected[matched]
    if matched == 0:
        return value, f"{missing!r} was not called"
    return value, f"{missing!r} was not called after {expected[matched - 1]!r}"


def _any_order(expected: Sequence[str], actual: Sequence[str]) -> tuple[float, str | None]:
    """Multiset containment.

    >>> _any_order(["a", "a", "b"], ["b", "a"])
    (0.6666666666666666, "missing: 'a' (1 more)")
    """
    if not expected:
        return 1.0, None
    want, got = Counter(expected), Counter(actual)
    matched = sum(min(count, got[name]) for name, count in want.items())
    value = matched / len(expected)
    if matched == len(expected):
        return value, None
    missing = [f"{name!r} ({count - got[name]} more)" for name, count in want.items() if got[name] < count]
    return value, "missing: " + ", ".join(missing)


@attrs.frozen
class JsonSchemaEvaluator:
    """The final answer is JSON valid against a JSON Schema.

    The schema is ``schema`` when given, else the case's
    ``metadata[metadata_key]`` (``"schema"`` by default). Skips a case when
    there is neither.

    Raises (from ``evaluate``):
        EvalError: the schema itself is not a valid JSON Schema.
    """

    schema: JsonObject | None = None
    name: str = "json_schema"
    metadata_key: str = "schema"

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
        schema = self.schema if self.schema is not None else case.metadata.get(self.metadata_key)
        if schema is None:
            return Score.skipped(f"no schema given and the case has no metadata[{self.metadata_key!r}]")
        if not isinstance(schema, dict):
            raise EvalError(f"the schema must be a JSON object, not {type(schema).__name__}")
        _check_schema(schema)
        answer = outcome.final_output
        value, error = parse_json(answer)
        if error is not None:
            return Score.failed(reason=f"the answer is not JSON ({error})", actual=answer)
        problems = schema_errors(value, schema)
        if not problems:
            return Score.passed(reason="the answer matches the schema")
        shown = "; ".join(problems[:_MAX_REASONS])
        more = f" (and {len(problems) - _MAX_REASONS} more)" if len(problems) > _MAX_REASONS else ""
        return Score.failed(
            reason=f"{len(problems)} schema error(s): {shown}{more}",
            actual=pretty_json(value),
        )


def _check_schema(schema: JsonObject) -> None:
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)
    try:
        validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise EvalError(f"not a valid JSON Schema: {exc.message}") from None


__all__ = [
    "ExactMatch",
    "JsonSchemaEvaluator",
    "ToolUseTrajectory",
    "TrajectoryMatch",
    "json_equal",
    "pretty_json",
]
