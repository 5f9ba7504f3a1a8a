"""Record classes ("models") and type hints, as the schema and the converters see them.

Four kinds of model: attrs classes, :class:`msgspec.Struct`, dataclasses and
``TypedDict``. :func:`model_fields` lists a model's fields in declaration
order (JSON name, constructor keyword, type, whether required, a
JSON-representable default); :func:`field_docs` finds their descriptions:
attribute docstrings (a string literal right after the field in the class
body) win over the class docstring's ``Attributes:`` section.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.errors import ConfigError
from helikon.tools._docstrings import parse_docstring, squash


def is_one_of(types_: frozenset[object], tp: object) -> bool:
    """``tp in types_``, tolerating unhashable type objects."""
    try:
        return tp in types_
    except TypeError:
        return False


def is_any(tp: object) -> bool:
    """Whether a hint accepts any JSON value (``Any``, ``object``, ``JsonValue``)."""
    return tp is Any or tp is object or tp == JsonValue


def unwrap_newtype(tp: object) -> object:
    """The underlying type of a (possibly nested) ``NewType``."""
    while hasattr(tp, "__supertype__"):
        tp = tp.__supertype__
    return tp


def type_name(tp: object) -> str:
    """A short readable name for a type hint.

    >>> type_name(int), type_name(list[int] | None)
    ('int', 'list[int] | None')
    """
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "").replace("collections.abc.", "")


@attrs.frozen
class FieldSpec:
    """One field of a model, as the schema and the converter need it."""

    #: The JSON property name.
    name: str
    #: The keyword the constructor takes.
    init_name: str
    #: The name in the class body (where an attribute docstring sits).
    attr: str
    #: The resolved type hint (``Annotated`` kept).
    type: Any
    #: Whether the property must be present.
    required: bool
    #: Whether ``default`` holds a JSON-representable default.
    has_default: bool = False
    default: JsonValue = None
    #: An explicit description (attrs/dataclass metadata).
    description: str | None = None
    #: A msgspec tag: the property must equal ``default``; not passed to the constructor.
    is_tag: bool = False


ModelKind = Literal["attrs", "struct", "dataclass", "typeddict"]


def model_kind(tp: object) -> ModelKind | None:
    """Which kind of record class ``tp`` is, or ``None`` when it is not one.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Point:
    ...     x: int
    >>> model_kind(Point), model_kind(int)
    ('dataclass', None)
    """
    if not isinstance(tp, type):
        return None
    if attrs.has(tp):
        return "attrs"
    if issubclass(tp, msgspec.Struct):
        return "struct"
    if dataclasses.is_dataclass(tp):
        return "dataclass"
    if typing.is_typeddict(tp):
        return "typeddict"
    return None


@functools.lru_cache(maxsize=512)
def model_fields(cls: type) -> tuple[FieldSpec, ...]:
    """The fields of a model class, in declaration order.

    Raises:
        ConfigError: ``cls`` is not a model, or its hints cannot be resolved.
    """
    kind = model_kind(cls)
    if kind == "struct":
        return _struct_fields(cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise ConfigError(f"cannot resolve the type hints of {cls.__qualname__}: {exc}") from exc
    if kind == "attrs":
        return tuple(
            _field(f.alias, f.alias, f.name, hints.get(f.name, f.type), f.default, f.metadata)
            for f in attrs.fields(cls)
            if f.init
        )
    if kind == "dataclass":
        return tuple(
            _field(f.name, f.name, f.name, hints[f.name], _dataclass_default(f), f.metadata)
            for f in dataclasses.fields(cls)
            if f.init
        )
    if kind == "typeddict":
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        out: list[FieldSpec] = []
        for key, hint in hints.items():
            origin = typing.get_origin(hint)
            required = key in required_keys
            if origin is typing.Required or origin is typing.NotRequired:
                required, hint = origin is typing.Required, typing.get_args(hint)[0]
            out.append(FieldSpec(key, key, key, hint, required))
        return tuple(out)
    raise ConfigError(f"{type_name(cls)} is not an attrs class, msgspec Struct, dataclass or TypedDict")


def _struct_fields(cls: type) -> tuple[FieldSpec, ...]:
    cfg: msgspec.structs.StructConfig = getattr(cls, "__struct_config__")  # noqa: B009
    if cfg.array_like:
        raise ConfigError(f"array_like msgspec Structs are not supported ({cls.__qualname__})")
    try:
        infos = msgspec.structs.fields(typing.cast(type[msgspec.Struct], cls))
    except Exception as exc:
        raise ConfigError(f"cannot resolve the type hints of {cls.__qualname__}: {exc}") from exc
    out: list[FieldSpec] = []
    if cfg.tag is not None and cfg.tag_field is not None:
        out.append(FieldSpec(cfg.tag_field, "", "", str, True, True, cfg.tag, is_tag=True))
    for info in infos:
        default: object = attrs.NOTHING
        if info.default is not msgspec.NODEFAULT:
            default = info.default
        elif info.default_factory is not msgspec.NODEFAULT:
            default = attrs.Factory(info.default_factory)
        out.append(_field(info.encode_name, info.name, info.name, info.type, default, {}))
    return tuple(out)


def _dataclass_default(f: dataclasses.Field[Any]) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return attrs.Factory(f.default_factory)
    return attrs.NOTHING


_FACTORY: Final = typing.cast(type, attrs.Factory)


def _field(
    name: str, init_name: str, attr: str, hint: Any, default: object, metadata: Mapping[Any, Any]
) -> FieldSpec:
    description = metadata.get("description")
    description = description if isinstance(description, str) else None
    if default is attrs.NOTHING:
        return FieldSpec(name, init_name, attr, hint, True, description=description)
    has_default, value = (False, None) if isinstance(default, _FACTORY) else json_default(default)
    return FieldSpec(name, init_name, attr, hint, False, has_default, value, description)


def json_default(value: object) -> tuple[bool, JsonValue]:
    """``(True, json)`` when a default value has a JSON form, else ``(False, None)``.

    >>> json_default((1, 2)), json_default(float("nan")), json_default(object())[0]
    ((True, [1, 2]), (False, None), False)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return False, None
    try:
        out: JsonValue = msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError):
        return False, None
    return True, out


@functools.lru_cache(maxsize=512)
def field_docs(cls: type) -> Mapping[str, str]:
    """Descriptions of ``cls``'s fields from docstrings, keyed by attribute name.

    Attribute docstrings (read from the class source, also for base classes)
    win over the class docstring's ``Attributes:`` section. Classes whose
    source is unavailable contribute only their ``Attributes:`` section.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__ in ("builtins", "typing", "abc", "msgspec"):
            continue
        docs.update(parse_docstring(klass.__dict__.get("__doc__")).attributes)
        docs.update(_attribute_docstrings(klass))
    return docs


def _attribute_docstrings(cls: type) -> dict[str, str]:
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for stmt, nxt in zip(node.body, node.body[1:], strict=False):
        target: ast.expr | None = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        if (
            isinstance(target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[target.id] = squash(nxt.value.value)
    return docs


def class_description(cls: type) -> str | None:
    """The summary of ``cls``'s own docstring (``None`` for generated ones)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or (dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "(")):
        return None
    return parse_docstring(doc).summary or None


__all__ = [
    "FieldSpec",
    "ModelKind",
    "class_description",
    "field_docs",
    "is_any",
    "is_one_of",
    "json_default",
    "model_fields",
    "model_kind",
    "type_name",
    "unwrap_newtype",
]
