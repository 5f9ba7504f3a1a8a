"""Between JSON values and Python values of a type.

:func:`convert` turns a JSON value (as decoded, after schema validation) into
a value of a type hint: it builds model instances (attrs, msgspec Struct,
dataclass, TypedDict), enum members, tuples, sets and datetimes, and checks
shapes on the way. :func:`to_json` goes the other way for a tool's return
value.

Conversion is compiled: :func:`compile_converter` walks a type hint once and
returns a function, cached per hint, so converting on a hot path does no
type inspection. ``msgspec.Meta`` constraints are not re-checked here; the
JSON Schema validation that precedes conversion enforces them.
"""

from __future__ import annotations

import datetime
import enum
import typing
import uuid
from collections import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar, overload

import msgspec

from helikon._json import JsonValue
from helikon._normal import normal_form
from helikon.errors import ConfigError
from helikon.schema import json_type
from helikon.tools._models import (
    FieldSpec,
    is_any,
    is_one_of,
    model_fields,
    model_kind,
    type_name,
    unwrap_newtype,
)

T = TypeVar("T")

#: A compiled conversion: takes a JSON value, returns a Python value.
Converter = Callable[[Any], Any]


class ConversionError(ValueError):
    """A JSON value does not fit a type; ``str()`` names where and why.

    >>> str(ConversionError("expected integer, got string", [".x", "[0]"]))
    '$[0].x: expected integer, got string'
    """

    def __init__(self, reason: str, segments: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        #: Path segments, innermost first (they are appended while unwinding).
        self.segments: list[str] = segments if segments is not None else []

    def __str__(self) -> str:
        if not self.segments:
            return self.reason
        return "$" + "".join(reversed(self.segments)) + ": " + self.reason


_PLAIN_SCALARS: Final[frozenset[object]] = frozenset({str, int, float, bool, type(None), None})
_SEQUENCES: Final[frozenset[object]] = frozenset({list, abc.Sequence, abc.MutableSequence, abc.Collection})
_SETS: Final[frozenset[object]] = frozenset({set, frozenset, abc.Set, abc.MutableSet})
_MAPS: Final[frozenset[object]] = frozenset({dict, abc.Mapping, abc.MutableMapping})
_CACHE: dict[object, Converter] = {}


def is_plain(tp: object) -> bool:
    """Whether a schema-valid JSON value already *is* a value of ``tp``.

    True for ``str``, ``int``, ``float`` (a JSON integer is a fine float),
    ``bool``, ``None``, ``Any``/``JsonValue``, literals of those, and unions,
    lists, sequences and string-keyed mappings built from them.

    >>> is_plain(int | None), is_plain(list[str]), is_plain(tuple[int, ...])
    (True, True, False)
    """
    tp = unwrap_newtype(tp)
    if is_any(tp) or is_one_of(_PLAIN_SCALARS, tp):
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return is_plain(args[0])
    if origin is typing.Union or origin is _UNION_TYPE:
        return all(is_plain(a) for a in args)
    if origin is Literal:
        return all(a is None or type(a) in (str, int, float, bool) for a in args)
    if is_one_of(_SEQUENCES, origin or tp):
        return not args or is_plain(args[0])
    if is_one_of(_MAPS, origin or tp):
        return not args or (unwrap_newtype(args[0]) is str and is_plain(args[1]))
    return False


def accepts_none(tp: object) -> bool:
    """Whether ``None`` is a value of ``tp``.

    >>> accepts_none(int | None), accepts_none(int)
    (True, False)
    """
    tp = unwrap_newtype(tp)
    if is_any(tp) or tp is None or tp is type(None):
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return accepts_none(args[0])
    if origin is typing.Union or origin is _UNION_TYPE:
        return any(accepts_none(a) for a in args)
    return origin is Literal and None in args


def compile_converter(tp: object) -> Converter:
    """Compile (once per hint) the conversion of JSON values to ``tp``.

    The returned function raises :class:`ConversionError` on a mismatch.

    Raises:
        ConfigError: ``tp`` (or a field inside it) is not supported.
    """
    try:
        return _CACHE[tp]
    except KeyError:
        pass
    except TypeError:  # an unhashable hint: compile without caching
        return _Compiler().compile(tp)
    converter = _Compiler().compile(tp)
    _CACHE[tp] = converter
    return converter


@overload
def convert(value: object, tp: type[T]) -> T: ...
@overload
def convert(value: object, tp: object) -> Any: ...
def convert(value: object, tp: object) -> Any:
    """Convert a JSON value to a value of the type hint ``tp``.

    >>> import enum
    >>> class Mood(enum.Enum):
    ...     HAPPY = "happy"
    >>> convert(["happy", "happy"], tuple[Mood, ...])
    (<Mood.HAPPY: 'happy'>, <Mood.HAPPY: 'happy'>)
    >>> convert({"a": "x"}, dict[str, int])
    Traceback (most recent call last):
    ...
    helikon.tools._convert.ConversionError: $.a: expected integer, got string

    Raises:
        ValueError: the value does not fit (a :class:`ConversionError`).
        ConfigError: ``tp`` is not a supported type.
    """
    return compile_converter(tp)(value)


def to_json(obj: object) -> JsonValue:
    """Convert a Python value to a JSON-compatible value, in the core's normal
    form (:func:`helikon.normal_form`).

    Models become objects, enums their values, tuples lists, sets sorted
    lists, datetimes ISO 8601 strings and UUIDs strings; the result is
    exactly what a JSON round trip would give back. ``str`` stays ``str``.

    >>> import datetime
    >>> to_json({"when": datetime.date(2024, 5, 1), "pair": (1, 2), "tags": {"b", "a"}})
    {'when': '2024-05-01', 'pair': [1, 2], 'tags': ['a', 'b']}

    Binary data (``bytes``, ``bytearray``, ``memoryview``) has no JSON form
    either: rather than let it silently become base64 text, it raises too
    (decode it, or encode it as you want the model to see it). So do dict
    keys that are not strings, NaN and infinity, and strings holding a lone
    surrogate.

    Raises:
        NormalFormError: ``obj`` holds a value with no JSON form (the error
            names its path; it is a ``TypeError`` too).
    """
    return normal_form(obj, _builtins)


def _builtins(obj: object) -> object:
    """A value of a type the normal form does not know, as builtins (the
    dates, UUIDs, enums and models msgspec knows); binary data is refused."""
    if isinstance(obj, _BINARY_TYPES):
        raise TypeError(
            f"a {type(obj).__name__} value is binary data: decode it or encode it (e.g. as base64) yourself"
        )
    try:
        plain = msgspec.to_builtins(obj, builtin_types=_BINARY_TYPES, order="deterministic")
    except (TypeError, OverflowError) as exc:
        raise TypeError(f"a value of type {type(obj).__qualname__} has no JSON form ({exc})") from None
    binary = _binary_inside(plain)
    if binary is not None:
        raise TypeError(f"{binary} is binary data: decode it or encode it (e.g. as base64) yourself")
    return plain


_BINARY_TYPES: Final = (bytes, bytearray, memoryview)


def _binary_inside(value: object, path: str = "$") -> str | None:
    """Where in a builtins-only value binary data sits (``None`` if nowhere)."""
    if isinstance(value, _BINARY_TYPES):
        return f"{path} (a {type(value).__name__} value)"
    if isinstance(value, dict):
        for key, item in value.items():
            if type(item) not in _JSON_SCALAR_TYPES:
                found = _binary_inside(item, f"{path}.{key}")
                if found is not None:
                    return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if type(item) not in _JSON_SCALAR_TYPES:
                found = _binary_inside(item, f"{path}[{index}]")
                if found is not None:
                    return found
    return None


_JSON_SCALAR_TYPES: Final[frozenset[type]] = frozenset({str, int, float, bool, type(None)})
_UNION_TYPE: Final = type(int | None)


# -- the compiler ------------------------------------------------------------


def _fail(expected: str, value: object) -> ConversionError:
    return ConversionError(f"expected {expected}, got {json_type(value)}")


def _identity(value: Any) -> Any:
    return value


def _to_str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise _fail("string", value)


def _to_int(value: Any) -> Any:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise _fail("integer", value)


def _to_float(value: Any) -> Any:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _fail("number", value)


def _to_bool(value: Any) -> Any:
    if type(value) is bool:
        return value
    raise _fail("boolean", value)


def _to_none(value: Any) -> Any:
    if value is None:
        return None
    raise _fail("null", value)


def _parser(kind: type, parse: Callable[[str], Any], what: str) -> Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if isinstance(value, str):
            try:
                return parse(value)
            except ValueError:
                raise ConversionError(f"expected {what}, got {value!r}") from None
        raise _fail(what, value)

    return convert


def _to_date(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        raise _fail("date", value)
    return _date(value)


_date = _parser(datetime.date, datetime.date.fromisoformat, "an ISO 8601 date")
_SIMPLE: Final[Mapping[object, Converter]] = {
    str: _to_str,
    int: _to_int,
    float: _to_float,
    bool: _to_bool,
    None: _to_none,
    type(None): _to_none,
    datetime.datetime: _parser(datetime.datetime, datetime.datetime.fromisoformat, "an ISO 8601 date-time"),
    datetime.date: _to_date,
    datetime.time: _parser(datetime.time, datetime.time.fromisoformat, "an ISO 8601 time"),
    uuid.UUID: _parser(uuid.UUID, uuid.UUID, "a UUID"),
}


class _Compiler:
    """One compilation; remembers models in progress for recursive types."""

    def __init__(self) -> None:
        self._building: dict[type, list[Converter]] = {}

    def compile(self, tp: object) -> Converter:
        tp = unwrap_newtype(tp)
        if is_any(tp):
            return _identity
        try:
            simple = _SIMPLE.get(tp)
        except TypeError:
            simple = None
        if simple is not None:
            return simple
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            return self.compile(args[0])
        if origin is typing.Union or origin is _UNION_TYPE:
            return self._union(args)
        if origin is Literal:
            return _choice(args, tp)
        if is_one_of(_SEQUENCES, origin or tp) or origin is tuple or tp is tuple:
            return self._array(origin or tp, args)
        if is_one_of(_SETS, origin or tp):
            return self._array(frozenset if (origin or tp) is frozenset else set, args)
        if is_one_of(_MAPS, origin or tp):
            return self._mapping(args, tp)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _choice(tuple(tp), tp)
        if origin is None and isinstance(tp, type) and model_kind(tp) is not None:
            return self._model(tp)
        if isinstance(tp, (str, typing.ForwardRef)):
            raise ConfigError(f"unresolved forward reference {tp!r}")
        raise ConfigError(f"unsupported type annotation {type_name(tp)}")

    def _union(self, args: tuple[object, ...]) -> Converter:
        options = [a for a in args if a is not None and a is not type(None)]
        if len(options) == 1 and len(args) == 2:
            inner = self.compile(options[0])

            def optional(value: Any) -> Any:
                return None if value is None else inner(value)

            return optional
        branches = [self.compile(a) for a in args]
        names = " | ".join(type_name(a) for a in args)

        def union(value: Any) -> Any:
            for branch in branches:
                try:
                    return branch(value)
                except ConversionError:
                    continue
            raise ConversionError(f"expected {names}, got {json_type(value)}")

        return union

    def _array(self, origin: object, args: tuple[object, ...]) -> Converter:
        if origin is tuple and args and not (len(args) == 2 and args[1] is ...):
            return self._fixed_tuple(args)
        item = self.compile(args[0]) if args else _identity
        build: Callable[[Any], Any] = origin if origin in (tuple, set, frozenset) else list

        def array(value: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise _fail("array", value)
            if item is _identity:
                return build(value)
            out = []
            for index, element in enumerate(value):
                try:
                    out.append(item(element))
                except ConversionError as exc:
                    exc.segments.append(f"[{index}]")
                    raise
            return build(out)

        return array

    def _fixed_tuple(self, args: tuple[object, ...]) -> Converter:
        items = [self.compile(a) for a in args]

        def fixed(value: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise _fail("array", value)
            if len(value) != len(items):
                raise ConversionError(f"expected an array of {len(items)} items, got {len(value)}")
            out = []
            for index, (item, element) in enumerate(zip(items, value, strict=True)):
                try:
                    out.append(item(element))
                except ConversionError as exc:
                    exc.segments.append(f"[{index}]")
                    raise
            return tuple(out)

        return fixed

    def _mapping(self, args: tuple[object, ...], tp: object) -> Converter:
        if args and unwrap_newtype(args[0]) is not str:
            raise ConfigError(f"unsupported type annotation {type_name(tp)}: JSON object keys are strings")
        item = self.compile(args[1]) if len(args) == 2 else _identity

        def mapping(value: Any) -> Any:
            if not isinstance(value, Mapping):
                raise _fail("object", value)
            out = {}
            for key, element in value.items():
                try:
                    out[key] = item(element)
                except ConversionError as exc:
                    exc.segments.append(f".{key}")
                    raise
            return out

        return mapping

    def _model(self, cls: type) -> Converter:
        pending = self._building.get(cls)
        if pending is not None:  # a recursive reference: resolved once the model is compiled
            return lambda value: pending[0](value)
        cell: list[Converter] = []
        self._building[cls] = cell
        fields = model_fields(cls)
        plan = tuple((spec, self.compile(spec.type), not accepts_none(spec.type)) for spec in fields)
        converter = _model_converter(cls, plan)
        cell.append(converter)
        return converter


def _model_converter(cls: type, plan: tuple[tuple[FieldSpec, Converter, bool], ...]) -> Converter:
    by_name = {spec.name: (spec, convert, drop_null) for spec, convert, drop_null in plan}
    required = tuple(spec.name for spec, _, _ in plan if spec.required)
    is_dict = model_kind(cls) == "typeddict"
    label = cls.__qualname__

    def model(value: Any) -> Any:
        if not is_dict and isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise _fail("object", value)
        kwargs: dict[str, Any] = {}
        for key, element in value.items():
            entry = by_name.get(key)
            if entry is None:
                raise ConversionError(f"unexpected property {key!r}")
            spec, convert, drop_null = entry
            if spec.is_tag:
                if element != spec.default:
                    raise ConversionError(f"expected {spec.default!r}, got {element!r}", [f".{key}"])
                continue
            if element is None and drop_null and not spec.required:
                continue  # strict mode sends null for an omitted optional property
            try:
                kwargs[spec.init_name] = convert(element)
            except ConversionError as exc:
                exc.segments.append(f".{key}")
                raise
        for name in required:
            if name not in value:
                raise ConversionError(f"missing required property {name!r}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ConversionError(f"invalid {label}: {exc}") from None

    return model


def _choice(values: Sequence[object], tp: object) -> Converter:
    table: dict[object, object] = {}
    for value in values:
        raw = value.value if isinstance(value, enum.Enum) else value
        table[(type(raw) is bool, raw)] = value
    allowed = ", ".join(repr(v.value if isinstance(v, enum.Enum) else v) for v in values)
    members = tuple(v for v in values if isinstance(v, enum.Enum))

    def choice(value: Any) -> Any:
        if members and isinstance(value, enum.Enum) and value in members:
            return value
        try:
            return table[(type(value) is bool, value)]
        except (KeyError, TypeError):
            raise ConversionError(f"expected one of {allowed}, got {value!r}") from None

    return choice


__all__ = [
    "ConversionError",
    "Converter",
    "accepts_none",
    "compile_converter",
    "convert",
    "is_plain",
    "to_json",
]
