"""Structural diffs of JSON-like data, by field path.

Used to explain why a replay diverged: instead of two JSON blobs, the paths
that differ (``request.tools[0].parameters.properties.a.type``) with the
expected and actual values. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from helikon._json import JsonValue

_MAX_VALUE = 120


def _show(value: JsonValue) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def diff(expected: JsonValue, actual: JsonValue, path: str = "") -> list[str]:
    """The differences between two JSON-like values, one line per path.

    >>> diff({"a": 1, "b": [1, 2]}, {"a": 2, "b": [1]})
    ['a: expected 1, got 2', 'b: expected 2 items, got 1', 'b[1]: missing (expected 2)']
    >>> diff({"x": {"y": "s"}}, {"x": {"y": "s"}})
    []
    """
    here = path or "<root>"
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        lines: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            sub = _join(path, key)
            if key not in actual:
                lines.append(f"{sub}: missing (expected {_show(expected[key])})")
            elif key not in expected:
                lines.append(f"{sub}: unexpected {_show(actual[key])}")
            else:
                lines.extend(diff(expected[key], actual[key], sub))
        return lines
    if (
        isinstance(expected, Sequence)
        and isinstance(actual, Sequence)
        and not isinstance(expected, str)
        and not isinstance(actual, str)
    ):
        lines = []
        if len(expected) != len(actual):
            lines.append(f"{here}: expected {len(expected)} items, got {len(actual)}")
        for index in range(max(len(expected), len(actual))):
            sub = _join(path, index)
            if index >= len(actual):
                lines.append(f"{sub}: missing (expected {_show(expected[index])})")
            elif index >= len(expected):
                lines.append(f"{sub}: unexpected {_show(actual[index])}")
            else:
                lines.extend(diff(expected[index], actual[index], sub))
        return lines
    if expected != actual or type(expected) is not type(actual):
        return [f"{here}: expected {_show(expected)}, got {_show(actual)}"]
    return []



def same(expected: JsonValue, actual: JsonValue) -> bool:
    """Whether :func:`diff` finds no difference between ``expected`` and
    ``actual``, without making its lines (the common answer, at a fraction
    of the cost): mappings with the same keys, sequences of the same length,
    and leaves that are equal and of the same type (``1`` is not ``1.0``).

    >>> same({"a": [1, 2]}, {"a": (1, 2)}), same({"a": 1}, {"a": 1.0})
    (True, False)
    """
    kind, other = type(expected), type(actual)
    if kind in _ATOMS or other in _ATOMS:  # a leaf (or a leaf against a container): compared
        return kind is other and expected == actual
    if (kind is dict and other is dict) or (isinstance(expected, Mapping) and isinstance(actual, Mapping)):
        if expected.keys() != actual.keys():  # type: ignore[union-attr]
            return False
        for key, value in expected.items():  # type: ignore[union-attr]  # noqa: SIM110 (a loop: no generator frame)
            if not same(value, actual[key]):  # type: ignore[index]
                return False
        return True
    if (
        isinstance(expected, Sequence)
        and isinstance(actual, Sequence)
        and not isinstance(expected, str)
        and not isinstance(actual, str)
    ):
        if len(expected) != len(actual):
            return False
        for before, after in zip(expected, actual, strict=True):  # noqa: SIM110 (as above)
            if not same(before, after):
                return False
        return True
    return kind is other and expected == actual


#: Leaf types :func:`same` compares at once (no container is one of them).
_ATOMS: Final = frozenset({str, int, float, bool, type(None)})


__all__ = ["diff", "same"]
