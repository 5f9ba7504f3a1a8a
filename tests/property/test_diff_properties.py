"""``diff.same`` is exactly "``diff`` finds no difference": a replay asks the
cheap question first and makes the diff's lines only when it says no."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from helikon.diff import diff, same

_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.sampled_from([0.0, 1.0, -1.0, 0.5, float("nan")])
    | st.sampled_from(["", "a", "1", "true"])
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _alike(draw: st.DrawFn, value: Any) -> Any:
    """A value equal to ``value`` as ``diff`` sees it, or nearly (a leaf or a shape changed)."""
    if isinstance(value, dict):
        return {k: draw(_alike(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [draw(_alike(v)) for v in value]
        return tuple(items) if draw(st.booleans()) else items
    return draw(st.sampled_from([value, value, value, 1, 1.0, True, "1", None]))


@given(st.data(), _values)
def test_same_is_diff_finding_nothing(data: st.DataObject, expected: Any) -> None:
    actual = data.draw(st.one_of(st.just(expected), _values, _alike(expected)))

    assert same(expected, actual) == (diff(expected, actual) == [])


def test_same_tells_leaves_of_other_types_apart() -> None:
    assert not same(1, 1.0) and not same(True, 1) and not same([0], [False])
    assert not same({"a": "1"}, {"a": 1})
    assert same({"a": [1, {"b": None}]}, {"a": (1, {"b": None})})
