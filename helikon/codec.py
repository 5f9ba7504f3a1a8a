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
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import msgspec

from helikon._normal import normal_form
from helikon.errors import NormalFormError

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


def _is_any_dict(tp: object) -> bool:
    return typing.get_origin(tp) is dict and typing.get_args(tp) == (str, Any)


def _is_tagged_union(tp: object) -> bool:
    members = [a for a in _union_args(tp) if a is not type(None)]
    return len(members) >= 1 and all(isinstance(a, type) and attrs.has(a) for a in members)


def _passthrough(value: Any, _: Any = None) -> Any:
    return value


def _json_value(value: Any, _: Any = None) -> Any:
    """Raw JSON read back: in normal form (no NaN, no lone surrogate, ...)."""
    return normal_form(value)


def _json_object(value: Any, _: Any = None) -> Any:
    if type(value) is not dict:
        raise TypeError(f"expected a JSON object, got {_kind(value)}")
    return normal_form(value)


def _kind(value: object) -> str:
    """How a wrong value is named in an error: its JSON type and the value."""
    if value is None:
        return "null"
    names: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    name = names.get(type(value))
    if name is None:
        containers: dict[type, str] = {list: "an array", dict: "an object", tuple: "an array"}
        return containers.get(type(value), type(value).__name__)
    return f"{name} ({value!r:.40})"


def _strict_str(value: Any, _: Any = None) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {_kind(value)}")
    return value


def _strict_int(value: Any, _: Any = None) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {_kind(value)}")
    return value


def _strict_float(value: Any, _: Any = None) -> float:
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    raise TypeError(f"expected a number, got {_kind(value)}")


def _strict_bool(value: Any, _: Any = None) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected a boolean, got {_kind(value)}")
    return bool(value)


def _strict_decimal(value: Any, _: Any = None) -> Decimal:
    """Money travels as its canonical decimal string (``"0.0125"``), which
    reads back as the same Decimal and writes back as the same bytes."""
    if type(value) is not str:
        raise TypeError(f"expected a decimal string, got {_kind(value)}")
    try:
        number = Decimal(value)
    except ArithmeticError:
        raise ValueError(f"expected a decimal string, got {value!r:.40}") from None
    if not number.is_finite() or str(number) != value:
        raise ValueError(f"expected a canonical finite decimal string, got {value!r:.40}")
    return number


def _is_money_union(tp: object) -> bool:
    args = set(_union_args(tp))
    return Decimal in args and args <= {Decimal, int, type(None)}


def _money_union(tp: object) -> Callable[[Any, Any], Any]:
    args = _union_args(tp)

    def structure(value: Any, _: Any) -> Any:
        kind = type(value)
        if value is None and type(None) in args:
            return None
        if kind is int and int in args:
            return value
        if kind is str:
            return _strict_decimal(value)
        also = " or an integer" if int in args else ""
        raise TypeError(f"expected a decimal string{also}, got {_kind(value)}")

    return structure


_STRICT: Final[dict[type, Callable[[Any, Any], Any]]] = {
    str: _strict_str,
    int: _strict_int,
    float: _strict_float,
    bool: _strict_bool,
    Decimal: _strict_decimal,
}


def _is_scalar_union(tp: object) -> bool:
    args = _union_args(tp)
    return bool(args) and not _is_json_value(tp) and all(a in _JSON_SCALARS for a in args)


def _scalar_union(tp: object) -> Callable[[Any, Any], Any]:
    allowed = tuple(a for a in _union_args(tp) if isinstance(a, type))
    names = " or ".join("null" if a is type(None) else a.__name__ for a in allowed)

    def structure(value: Any, _: Any) -> Any:
        kind = type(value)
        if kind in allowed:
            return value
        if kind is int and float in allowed:
            return float(value)
        raise TypeError(f"expected {names}, got {_kind(value)}")

    return structure


def _is_tuple(tp: object) -> bool:
    return typing.get_origin(tp) is tuple


def _make_tuple_structure(conv: Converter) -> Callable[[object], Callable[[Any, Any], Any]]:
    """Tuples are JSON arrays, nothing else (cattrs would take any iterable:
    a string as a tuple of its characters, an object as its keys)."""

    def factory(tp: object) -> Callable[[Any, Any], Any]:
        from cattrs.cols import homogenous_tuple_structure_factory

        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            detailed = homogenous_tuple_structure_factory(tp, conv)  # type: ignore[arg-type]
            element = args[0]
            found: list[Callable[[Any, Any], Any]] = []  # the element's hook, looked up on first use
            size = None

            def inner(value: Any, _: Any) -> Any:
                # The quick way first (a trace structures thousands of tuples);
                # on a bad element, cattrs' detailed validation names its index.
                try:
                    if not found:
                        found.append(conv.get_structure_hook(element))
                    hook = found[0]
                    return tuple([hook(v, element) for v in value])
                except Exception:
                    return detailed(value, tp)
        else:
            hooks = [conv.get_structure_hook(a) for a in args]
            size = len(args)

            def inner(value: Any, _: Any) -> Any:
                return tuple(h(v, a) for h, v, a in zip(hooks, value, args, strict=True))

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not list and type(value) is not tuple:
                raise TypeError(f"expected an array, got {_kind(value)}")
            if size is not None and len(value) != size:
                raise ValueError(f"expected an array of {size} items, got {len(value)}")
            return inner(value, tp)

        return structure

    return factory


def _make_union_structure(conv: Converter) -> Callable[[object], Callable[[Any, Any], Any]]:
    def factory(tp: object) -> Callable[[Any, Any], Any]:
        by_tag = {a.__name__: a for a in _union_args(tp) if isinstance(a, type) and attrs.has(a)}

        optional = type(None) in _union_args(tp)
        # Each member's hook, looked up once (a trace structures thousands).
        hooks: dict[str, tuple[Callable[[Any, Any], Any], type]] = {}

        def structure(value: Any, _: Any) -> Any:
            if value is None and optional:
                return None
            if type(value) is not dict:
                raise TypeError(f"expected an object with a {_TAG!r} tag, got {_kind(value)}")
            data = dict(value)
            tag = data.pop(_TAG, None)
            found = hooks.get(tag) if type(tag) is str else None
            if found is None:
                cls = by_tag.get(tag) if isinstance(tag, str) else None
                if cls is None:
                    raise ValueError(f"unknown {_TAG!r} tag {tag!r}; expected one of {sorted(by_tag)}")
                found = hooks[tag] = (conv.get_structure_hook(cls), cls)
            hook, cls = found
            return hook(data, cls)

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


def _is_fixed_tuple(tp: object) -> bool:
    args = typing.get_args(tp)
    return _is_tuple(tp) and bool(args) and args[-1] is not Ellipsis


def _make_fixed_tuple_unstructure(conv: Converter) -> Callable[[object], Callable[[Any], Any]]:
    """A fixed-length tuple field (``tuple[str, str]``) as a JSON array: a list,
    each item by its declared type (cattrs would keep the tuple)."""

    def factory(tp: object) -> Callable[[Any], Any]:
        hooks = [conv.get_unstructure_hook(arg) for arg in typing.get_args(tp)]

        def unstructure(value: Any) -> Any:
            return [hook(item) for hook, item in zip(hooks, value, strict=False)]

        return unstructure

    return factory


def _has_emitter_path(tp: object) -> bool:
    """An event class: its keyword-only ``path`` (who emitted it) defaults to ``()``."""
    if not (isinstance(tp, type) and attrs.has(tp)):
        return False
    found = attrs.fields_dict(tp).get("path")
    return found is not None and found.kw_only and found.default == ()


def _make_event_unstructure(conv: Converter) -> Callable[[type], Callable[[Any], Any]]:
    """An event's fields, its ``path`` only when not empty: the root's events
    (and every event of a single agent) are written as before paths existed;
    likewise a turn's ``cost`` only when known."""
    from cattrs.gen import make_dict_unstructure_fn, override

    def factory(tp: type) -> Callable[[Any], Any]:
        omit = override(omit_if_default=True)
        if "cost" in attrs.fields_dict(tp):
            return make_dict_unstructure_fn(tp, conv, path=omit, cost=omit)
        return make_dict_unstructure_fn(tp, conv, path=omit)

    return factory


@cache
def converter() -> Converter:
    """The converter for every helikon carrier (built once, on first use, so
    ``import helikon`` does not pay for cattrs)."""
    from cattrs import Converter

    conv = Converter()
    for scalar, hook in _STRICT.items():
        conv.register_structure_hook(scalar, hook)
    conv.register_structure_hook_factory(_is_scalar_union, _scalar_union)
    conv.register_structure_hook_factory(_is_money_union, _money_union)
    conv.register_unstructure_hook(Decimal, str)
    conv.register_structure_hook_factory(_is_tuple, _make_tuple_structure(conv))
    conv.register_structure_hook_func(_is_json_value, _json_value)
    conv.register_unstructure_hook_func(_is_json_value, _passthrough)
    conv.register_structure_hook_func(_is_json_object, _json_object)
    conv.register_unstructure_hook_func(_is_json_object, _passthrough)
    conv.register_structure_hook_func(_is_any_dict, _json_object)
    conv.register_structure_hook_factory(_is_tagged_union, _make_union_structure(conv))
    conv.register_unstructure_hook_factory(_is_tagged_union, _make_union_unstructure(conv))
    conv.register_unstructure_hook_factory(_is_fixed_tuple, _make_fixed_tuple_unstructure(conv))
    conv.register_unstructure_hook_factory(_has_emitter_path, _make_event_unstructure(conv))
    _register_conversation(conv)
    return conv


def _register_conversation(conv: Converter) -> None:
    """A :class:`~helikon.loop.Conversation` travels as the tuple of its
    items does: the same JSON array, read back into a conversation."""
    from helikon._conversation import Conversation
    from helikon.items import Item

    items: Any = tuple[Item, ...]
    as_tuple = conv.get_structure_hook(items)
    conv.register_structure_hook(Conversation, lambda value, _: Conversation(as_tuple(value, items)))
    conv.register_unstructure_hook(Conversation, lambda value: conv.unstructure(tuple(value), items))


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
    expected an integer, got a string ('x') @ usage.input_tokens
    """
    from cattrs import BaseValidationError, transform_error
    from cattrs.v import format_exception

    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    if not isinstance(exc, BaseValidationError):
        return str(exc)

    def described(error: BaseException, tp: type | None) -> str:
        # The strict hooks' own words ("expected a boolean, got a string
        # ('no')") say more than cattrs' generic ones.
        if isinstance(error, NormalFormError):
            return f"not JSON data in normal form: {error}"
        if isinstance(error, TypeError | ValueError) and str(error).startswith(("expected ", "unknown ")):
            return str(error)
        return format_exception(error, tp)

    paths = transform_error(exc, path=root, format_exception=described)
    return "; ".join(paths[:most]) + (f"; and {len(paths) - most} more" if len(paths) > most else "")


__all__ = ["converter", "from_json", "structure", "structure_error", "to_json", "unstructure"]
