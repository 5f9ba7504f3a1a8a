"""helikon.normal_form: the one normal form of values entering the core."""

from __future__ import annotations

import enum
import math

import pytest

from helikon import NormalFormError, ReplaceInput, normal_form
from helikon.effects import ToolRaised, ToolReturned
from helikon.errors import ToolCrashed
from helikon.governance import Deny, InjectSystemMessage, Replace, ReplaceOutput
from helikon.ids import CallId
from helikon.interpreters._perform import tool_returned

# -- the function ------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_canonical_data_comes_out_as_it_went_in() -> None:
    value = {"a": [1, 2.5, None, True, "x", {"b": "é"}], "c": "text"}
    assert normal_form(value) == value
    assert normal_form("plain") == "plain"


def test_tuples_become_lists_and_sets_sorted_lists() -> None:
    assert normal_form({"a": (1, (2, 3))}) == {"a": [1, [2, 3]]}
    assert normal_form({"gamma", "alpha", "beta"}) == ["alpha", "beta", "gamma"]
    assert normal_form(frozenset({10, 9, 1})) == [1, 9, 10]
    # mixed members: one total order (null < bool < numbers < strings < arrays)
    assert normal_form({"a", 2, None, (1,), False}) == [None, False, 2, "a", [1]]


def test_subclasses_of_json_types_become_plain_values() -> None:
    out = normal_form({"level": Level.HIGH})
    assert out == {"level": 3} and isinstance(out, dict) and type(out["level"]) is int


@pytest.mark.parametrize(
    ("value", "path", "why"),
    [
        ({"a": [1, math.nan]}, "$.a[1]", "not a JSON number"),
        ({"a": math.inf}, "$.a", "not a JSON number"),
        ({"a": {1: "x"}}, "$.a", "a dict key must be a string, not int"),
        (["ok", "x\ud800"], "$[1]", "lone surrogate"),
        ({"k\udc00": 1}, "$ (a key)", "lone surrogate"),
        ({"a": Colour.RED}, "$.a", "Colour has no JSON form"),
        ({"a": object()}, "$.a", "object has no JSON form"),
        ({"a": b"raw"}, "$.a", "bytes has no JSON form"),
    ],
)
def test_what_has_no_json_form_is_refused_naming_its_path(value: object, path: str, why: str) -> None:
    with pytest.raises(NormalFormError) as caught:
        normal_form(value)
    assert caught.value.path.startswith(path.split(" ")[0])
    assert why in str(caught.value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


# -- where it applies -------------------------------------------------------------------


def test_decisions_hold_their_values_in_normal_form() -> None:
    assert ReplaceInput({"xs": (1, 2)}).args == {"xs": [1, 2]}
    assert ReplaceOutput({"b", "a"}).output == ["a", "b"]
    assert Replace((1,)).args == [1]
    with pytest.raises(NormalFormError):
        ReplaceInput({1: 2})
    with pytest.raises(NormalFormError):
        Deny("bad \ud800")
    with pytest.raises(NormalFormError):
        InjectSystemMessage(None)


def test_a_step_result_is_normal_or_a_tool_failure() -> None:
    call = CallId("c1")
    assert tool_returned(call, ("a", {"b"})) == ToolReturned(call, ["a", ["b"]])
    failed = tool_returned(call, [math.nan], "t")
    assert isinstance(failed, ToolRaised) and isinstance(failed.failure, ToolCrashed)
    assert failed.failure.message.startswith("tool 't' returned a value with no JSON form: $[0]: nan")
    with pytest.raises(NormalFormError):
        ToolReturned(call, {1: 2})
