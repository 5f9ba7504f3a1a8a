"""Serialization of helikon's carriers: one cattrs converter, JSON via msgspec.

Every frozen carrier (items, events, effects, results, loop states) goes to
plain JSON-compatible data and back without loss. A union of attrs classes
(optionally with ``None``) is tagged with a ``"type"`` field holding the
class name, in the manner of cattrs' ``configure_tagged_union`` but for every
such union at once, ``X | None`` included; enums travel by value; fields
typed :data:`~helikon._json.JsonValue` pass through untouched.
Serialization is kept out of the classes themselves.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import msgspec

if TYPE_CHECKING:
    from cattrs import Converter

T = TypeVar("T")

_JSON_SCALARS = {type(None), bool, int, float, str}
_TAG = "type"


def _union_args(tp: object) -> tuple[object, ...]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(tp)
    return ()


def _is_json_value(tp: object) -> bool:
    return set(_union_args(tp)) >= _JSON_SCALARS


def _is_json_object(tp: object) -> bool:
    return typing.get_origin(tp) is Mapping and typing.get_args(tp)[:1] == (str,)


def _is_tagged_union(tp: object) -> bool:
    members = [a for a in _union_args(tp) if a is not type(None)]
    return len(members) >= 1 and all(isinstance(a, type) and attrs.has(a) for a in members)


def _passthrough(value: Any, _: Any = None) -> Any:
    return value


def _make_union_structure(conv: Converter) -> Callable[[object], Callable[[Any, Any], Any]]:
    def factory(tp: object) -> Callable[[Any, Any], Any]:
        by_tag = {a.__name__: a for a in _union_args(tp) if isinstance(a, type) and attrs.has(a)}

        def structure(value: Any, _: Any) -> Any:
            if value is None:
                return None
            data = dict(value)
            tag = data.pop(_TAG, None)
            cls = by_tag.get(tag) if isinstance(tag, str) else None
            if cls is None:
                raise ValueError(f"unknown {_TAG!r} tag {tag!r}; expected one of {sorted(by_tag)}")
            return conv.structure(data, cls)

        return structure

    return factory


def _make_union_unstructure(conv: Converter) -> Callable[[object], Callable[[Any], Any]]:
    def factory(tp: object) -> Callable[[Any], Any]:
        def unstructure(value: Any) -> Any:
            if value is None:
                return None
            data: dict[str, Any] = {_TAG: type(value).__name__}
            data.update(conv.unstructure(value, unstructure_as=type(value)))
            return data

        return unstructure

    return factory


@cache
def converter() -> Converter:
    """The converter for every helikon carrier (built once, on first use, so
    ``import helikon`` does not pay for cattrs)."""
    from cattrs import Converter

    conv = Converter()
    conv.register_structure_hook_func(_is_json_value, _passthrough)
    conv.register_unstructure_hook_func(_is_json_value, _passthrough)
    conv.register_structure_hook_func(_is_json_object, _passthrough)
    conv.register_unstructure_hook_func(_is_json_object, _passthrough)
    conv.register_structure_hook_factory(_is_tagged_union, _make_union_structure(conv))
    conv.register_unstructure_hook_factory(_is_tagged_union, _make_union_unstructure(conv))
    return conv


def unstructure(value: object, as_type: object = None) -> Any:
    """``value`` as plain JSON-compatible data (tagged where it is a union).

    Pass the union as ``as_type`` to tag the top-level value too.
    """
    return converter().unstructure(value, unstructure_as=as_type)


def structure(data: Any, as_type: Any) -> Any:
    """Rebuild a value of ``as_type`` from :func:`unstructure`'s output."""
    return converter().structure(data, as_type)


def to_json(value: object, as_type: object = None) -> bytes:
    """``value`` as compact JSON bytes with sorted keys (byte-stable)."""
    return msgspec.json.encode(unstructure(value, as_type), order="sorted")


def from_json(data: bytes | str, as_type: Any) -> Any:
    """Rebuild a value of ``as_type`` from :func:`to_json`'s output."""
    return structure(msgspec.json.decode(data), as_type)


def structure_error(exc: Exception, root: str = "$", most: int = 5) -> str:
    """Why :func:`structure` failed, in one line: every bad value with its
    field path from ``root`` (``expected int @ state.usage.input_tokens``),
    at most ``most`` of them; other errors as their message.

    >>> try:
    ...     structure({"input_tokens": "x"}, __import__("helikon.model").model.Usage)
    ... except Exception as exc:
    ...     print(structure_error(exc, "usage"))
    invalid value for type, expected int @ usage.input_tokens
    """
    from cattrs import BaseValidationError, transform_error

    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    if not isinstance(exc, BaseValidationError):
        return str(exc)
    paths = transform_error(exc, path=root)
    return "; ".join(paths[:most]) + (f"; and {len(paths) - most} more" if len(paths) > most else "")


__all__ = ["converter", "from_json", "structure", "structure_error", "to_json", "unstructure"]
