"""The one normal form of values entering the core: canonical JSON data.

Every raw value that crosses into the core (a tool's output, arguments
rewritten by a hook or a policy, a hook's rewritten output, a decoded
snapshot or trace, a request body) goes through :func:`normal_form` once, at
the boundary. What comes out is plain JSON data, the same in memory as after
a trip through a file:

- ``None``, ``bool``, ``int``, finite ``float`` and ``str`` stay as they are
  (a subclass of ``str`` or ``int``, an enum member say, becomes the plain
  value);
- lists and tuples become lists; dicts stay dicts;
- sets and frozensets become lists, sorted by :func:`set_order` (a total
  order on JSON data, so the text a model sees never depends on
  ``PYTHONHASHSEED``).

Anything else is refused with :class:`~helikon.errors.NormalFormError`
naming where the value sits (``$.rows[2]``): a non-string dict key, NaN or
infinity (JSON has neither; msgspec would write ``null``), a string holding
a lone surrogate (it has no UTF-8 form: encoding it fails later, far from
the cause) and any other type. A caller that knows richer types (the tools
layer converts dataclasses, models, enums and dates) passes ``convert``,
called on each value of a type this module does not know; its answer is
normalised in turn.

Already canonical data takes the fast path: a short ASCII string, an int or a
flat dict of those is checked without building anything new.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from helikon._json import JsonValue
from helikon.errors import NormalFormError

#: Called on a value of a type :func:`normal_form` does not know; returns
#: something it does (or raises ``TypeError``/``ValueError``).
Convert = Callable[[object], object]

_SCALARS: Final = (type(None), bool, int)


def normal_form(value: object, convert: Convert | None = None, path: str = "$") -> JsonValue:
    """``value`` as canonical JSON data (see the module's rules).

    >>> normal_form({"b": (1, 2), "a": frozenset({3, 1, 2})})
    {'b': [1, 2], 'a': [1, 2, 3]}
    >>> normal_form({"rows": [{1: "x"}]})
    Traceback (most recent call last):
    ...
    helikon.errors.NormalFormError: $.rows[0]: a dict key must be a string, not int (1)

    Args:
        value: the raw value.
        convert: turns a value of a type not listed above into one that is
            (the tools layer's converter of dataclasses, models and dates).
        path: how the value's place is named in an error.

    Raises:
        NormalFormError: the value (or a part of it, named by its path) has
            no canonical JSON form.
    """
    kind = type(value)
    if kind is str and value.isascii():  # type: ignore[attr-defined]
        return value  # type: ignore[return-value]
    if kind in _SCALARS:
        return value  # type: ignore[return-value]
    if kind is dict and _flat_canonical(value):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    try:
        return _walk(value, convert)
    except _Refused as refused:
        raise NormalFormError(path + "".join(reversed(refused.where)), refused.reason) from None


def normal_text(value: object) -> str:
    """``value`` as text fit for the core: a ``str`` (a subclass becomes a
    plain one) with no lone surrogate. The converter of the text fields of
    what user code answers (a denial's reason, an injected message).

    >>> normal_text("ok")
    'ok'
    >>> normal_text(5)
    Traceback (most recent call last):
    ...
    helikon.errors.NormalFormError: $: expected text, got int (5)

    Raises:
        NormalFormError: ``value`` is not text, or holds a lone surrogate.
    """
    if type(value) is str and value.isascii():
        return value
    if not isinstance(value, str):
        raise NormalFormError("$", f"expected text, got {type(value).__name__} ({value!r:.60})")
    try:
        return _text(str.__str__(value))
    except _Refused as refused:
        raise NormalFormError("$", refused.reason) from None


def require_normal(value: object, path: str = "$") -> None:
    """Refuse ``value`` unless it already is in normal form: what a snapshot
    writer needs (a tuple would be read back as a list: not the same value).

    >>> require_normal({"a": [1]})
    >>> require_normal({"a": (1,)}, "state")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helikon.errors.NormalFormError: state.a: a value of type tuple is not JSON data in normal form ...

    Raises:
        NormalFormError: naming the first place that is not in normal form.
    """
    if is_normal(value):
        return
    try:
        _walk(value, None, strict=True)
    except _Refused as refused:
        raise NormalFormError(path + "".join(reversed(refused.where)), refused.reason) from None


def is_normal(value: object) -> bool:
    """Whether ``value`` is already in normal form (lists, not tuples; no
    sets; string keys; no NaN, infinity or lone surrogate).

    >>> is_normal({"a": [1, "x"]}), is_normal({"a": (1,)})
    (True, False)
    """
    kind = type(value)
    if kind is str:
        return _text_ok(value)  # type: ignore[arg-type]
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is list:
        return all(is_normal(v) for v in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(type(k) is str and _text_ok(k) and is_normal(v) for k, v in value.items())  # type: ignore[attr-defined]
    return False


def set_order(value: JsonValue) -> tuple[Any, ...]:
    """The sort key of a set's members: a total order on normal JSON data
    (null < booleans < numbers < strings < arrays; an int before an equal
    float), so a set is written the same way whatever its hash order.

    >>> sorted([10, "b", None, 9, [1], True, "a"], key=set_order)
    [None, True, 9, 10, 'a', 'b', [1]]
    """
    if value is None:
        return (0,)
    kind = type(value)
    if kind is bool:
        return (1, value)
    if kind is int or kind is float:
        return (2, value, kind is float)
    if kind is str:
        return (3, value)
    if kind is list:
        return (4, tuple(set_order(v) for v in value))  # type: ignore[union-attr]
    # dicts cannot be members of a set; sort what might come anyway last.
    return (5, repr(value))


# -- internals ---------------------------------------------------------------------------


class _Refused(Exception):
    """Raised inside the walk; the path is collected on the way out (only a
    refused value pays for naming its place)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.where: list[str] = []


def _text_ok(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(
            f"the string holds a lone surrogate ({text[exc.start]!r} at index {exc.start})"
        ) from None
    return text


def _flat_canonical(value: dict[Any, Any]) -> bool:
    """The fast path: a dict of scalars and ASCII strings under ASCII keys."""
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return False
        elif kind not in _SCALARS:
            return False
    return True


def _walk(value: object, convert: Convert | None, strict: bool = False) -> JsonValue:
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind is str:
        return _text(value)  # type: ignore[arg-type]
    if kind is int:
        return value  # type: ignore[return-value]
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _Refused(f"{value!r} is not a JSON number (JSON has no NaN or infinity)")
        return value  # type: ignore[return-value]
    if kind is dict:
        out: dict[str, JsonValue] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                if not isinstance(key, str):
                    raise _Refused(f"a dict key must be a string, not {type(key).__name__} ({key!r:.60})")
                key = str.__str__(key)
            try:
                out[_text(key)] = _walk(item, convert, strict)
            except _Refused as refused:
                refused.where.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
                raise
        return out
    if strict and kind is not list:
        raise _Refused(
            f"a value of type {kind.__qualname__} is not JSON data in normal form "
            "(helikon.normal_form gives its normal form)"
        )
    if kind is list or kind is tuple:
        items: list[JsonValue] = []
        for index, item in enumerate(value):  # type: ignore[arg-type]
            try:
                items.append(_walk(item, convert, strict))
            except _Refused as refused:
                refused.where.append(f"[{index}]")
                raise
        return items
    if kind is set or kind is frozenset:
        try:
            members = [_walk(item, convert, strict) for item in value]  # type: ignore[attr-defined]
        except _Refused as refused:
            refused.where.append("{...}")
            raise
        members.sort(key=set_order)
        return members
    # Subclasses of the JSON types (a StrEnum, an IntEnum) become plain values.
    if isinstance(value, str):
        return _text(str.__str__(value))
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return _walk(float(value), convert)
    if isinstance(value, dict):
        return _walk(dict(value), convert)
    if isinstance(value, list | tuple):
        return _walk(list(value), convert)
    if isinstance(value, set | frozenset):
        return _walk(set(value), convert)
    if convert is not None:
        try:
            plain = convert(value)
        except NormalFormError as exc:
            raise _Refused(exc.reason) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise _Refused(str(exc)) from None
        if plain is not value:
            return _walk(plain, convert)
    raise _Refused(f"a value of type {type(value).__qualname__} has no JSON form")


__all__ = ["Convert", "is_normal", "normal_form", "normal_text", "require_normal", "set_order"]
