"""JSON Schema from Python type hints.

One generator serves tool parameters, tool output schemas and structured
output types. It understands scalars, ``X | None``, ``Literal``, enums,
sequences, mappings, ``datetime``/``date``/``time``/``UUID``, ``Annotated``
with :class:`msgspec.Meta` constraints, and four kinds of record class
("models"): attrs classes, :class:`msgspec.Struct`, dataclasses and
``TypedDict``. Models are inlined; only a model that refers back to itself
goes to ``$defs`` and is reached through ``$ref``.

Field descriptions come, first found wins, from attrs/dataclass
``metadata={"description": ...}`` or a ``msgspec.Meta(description=...)``,
then from an attribute docstring (a string literal right after the field in
the class body), then from the class docstring's Google-style
``Attributes:`` section. How models and docstrings are read lives in
``_models`` and ``_docstrings``; this module owns the generator.
"""

from __future__ import annotations

import datetime
import enum
import types
import typing
import uuid
from collections import abc
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from helikon._json import JsonObject, JsonValue
from helikon.errors import ConfigError
from helikon.schema import json_type, nullable
from helikon.tools._models import (
    FieldSpec,
    class_description,
    field_docs,
    is_any,
    is_one_of,
    model_fields,
    model_kind,
    type_name,
    unwrap_newtype,
)

_SCALARS: Final[Mapping[object, JsonObject]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    datetime.time: {"type": "string", "format": "time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}
_SCALAR_TYPES: Final[frozenset[object]] = frozenset(_SCALARS)
_ARRAYS: Final[frozenset[object]] = frozenset(
    {list, tuple, set, frozenset, abc.Sequence, abc.MutableSequence, abc.Set, abc.MutableSet, abc.Collection}
)
_SETS: Final[frozenset[object]] = frozenset({set, frozenset, abc.Set, abc.MutableSet})
_MAPS: Final[frozenset[object]] = frozenset({dict, abc.Mapping, abc.MutableMapping})
_LENGTH_KEYS: Final[Mapping[str, str]] = {"string": "Length", "array": "Items", "object": "Properties"}
_META_KEYS: Final[tuple[tuple[str, str], ...]] = (
    ("gt", "exclusiveMinimum"),
    ("ge", "minimum"),
    ("lt", "exclusiveMaximum"),
    ("le", "maximum"),
    ("multiple_of", "multipleOf"),
    ("pattern", "pattern"),
    ("title", "title"),
    ("description", "description"),
    ("examples", "examples"),
)


def _is_list(value: object) -> typing.TypeGuard[list[JsonValue]]:
    return isinstance(value, list)


class SchemaBuilder:
    """Builds schemas for several types that share one ``$defs`` table."""

    def __init__(self) -> None:
        self._stack: list[type] = []
        self._recursive: set[type] = set()
        self._names: dict[type, str] = {}
        self._defs: dict[str, dict[str, JsonValue]] = {}

    def schema(self, tp: object) -> dict[str, JsonValue]:
        """The schema of one type hint (``$refs`` resolved by :meth:`finish`)."""
        tp = unwrap_newtype(tp)
        if is_any(tp):
            return {}
        if is_one_of(_SCALAR_TYPES, tp):
            return dict(_SCALARS[tp])
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            return self._annotated(args[0], args[1:])
        if origin is typing.Union or origin is types.UnionType:
            return self._union(args)
        if origin is Literal:
            return _literal(args, tp)
        if is_one_of(_ARRAYS, origin or tp):
            return self._array(origin or tp, args)
        if is_one_of(_MAPS, origin or tp):
            return self._mapping(args, tp)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _literal(tuple(tp), tp)
        if origin is None and model_kind(tp) is not None:
            return self._model(typing.cast(type, tp), root=False, describe=True)
        if isinstance(tp, (str, typing.ForwardRef)):
            raise ConfigError(f"unresolved forward reference {tp!r}")
        raise ConfigError(f"unsupported type annotation {type_name(tp)}")

    def model(self, cls: type, *, describe: bool) -> dict[str, JsonValue]:
        """The object schema of a model class, inline even when it is recursive."""
        return self._model(cls, root=True, describe=describe)

    def object_schema(
        self, fields: Sequence[FieldSpec], docs: Mapping[str, str], owner: str | None
    ) -> dict[str, JsonValue]:
        """A closed object schema for ``fields``; ``docs`` maps ``attr`` to a description.

        ``owner`` names the model in error messages; ``None`` means the
        fields are a function's parameters.
        """
        properties: dict[str, JsonValue] = {}
        required: list[JsonValue] = []
        for spec in fields:
            if spec.is_tag:
                properties[spec.name] = {"enum": [spec.default]}
                required.append(spec.name)
                continue
            try:
                prop = self.schema(spec.type)
            except ConfigError as exc:
                if owner is None:
                    raise ConfigError(f"parameter {spec.attr!r}: {exc}") from None
                raise ConfigError(f"{exc} (field {owner}.{spec.attr})") from None
            description = spec.description or (None if "description" in prop else docs.get(spec.attr))
            if description:
                prop["description"] = description
            if spec.has_default:
                prop["default"] = spec.default
            properties[spec.name] = prop
            if spec.required:
                required.append(spec.name)
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def finish(self, root: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """``root`` with the ``$defs`` table attached when anything was recursive."""
        if self._defs:
            root["$defs"] = dict(self._defs)
        return root

    def _model(self, cls: type, *, root: bool, describe: bool) -> dict[str, JsonValue]:
        if not root and (cls in self._stack or self._ref_name(cls) in self._defs):
            self._recursive.add(cls)
            return {"$ref": f"#/$defs/{self._ref_name(cls)}"}
        self._stack.append(cls)
        try:
            body = self.object_schema(model_fields(cls), field_docs(cls), cls.__qualname__)
        finally:
            self._stack.pop()
        description = class_description(cls) if describe else None
        if description:
            body = {"description": description, **body}
        if cls in self._recursive:
            self._defs[self._ref_name(cls)] = body
            if not root:
                return {"$ref": f"#/$defs/{self._ref_name(cls)}"}
        return body

    def _ref_name(self, cls: type) -> str:
        name = self._names.get(cls)
        if name is None:
            taken = set(self._names.values())
            name, n = cls.__name__, 2
            while name in taken:
                name, n = f"{cls.__name__}{n}", n + 1
            self._names[cls] = name
        return name

    def _annotated(self, inner: object, metadata: tuple[object, ...]) -> dict[str, JsonValue]:
        out = self.schema(inner)
        kind = out.get("type")
        kinds = [kind] if isinstance(kind, str) else kind if _is_list(kind) else []
        suffix = next((_LENGTH_KEYS[k] for k in kinds if isinstance(k, str) and k in _LENGTH_KEYS), None)
        for meta in metadata:
            if not isinstance(meta, msgspec.Meta):
                continue
            for attr, key in _META_KEYS:
                value = getattr(meta, attr)
                if value is not None:
                    out[key] = list(value) if attr == "examples" else value
            for attr, prefix in (("min_length", "min"), ("max_length", "max")):
                value = getattr(meta, attr)
                if value is not None and suffix is not None:
                    out[prefix + suffix] = value
            if meta.extra_json_schema:
                out.update(meta.extra_json_schema)
        return out

    def _union(self, args: tuple[object, ...]) -> dict[str, JsonValue]:
        options = [a for a in args if a is not None and a is not type(None)]
        if len(options) == 1:
            inner = self.schema(options[0])
        else:
            branches: list[JsonValue] = [self.schema(a) for a in options]
            kinds = [b.get("type") for b in branches if isinstance(b, Mapping) and set(b) == {"type"}]
            if len(kinds) == len(branches) and all(isinstance(k, str) for k in kinds):
                inner = {"type": kinds}
            else:
                inner = {"anyOf": branches}
        return nullable(inner) if len(options) < len(args) else inner

    def _array(self, origin: object, args: tuple[object, ...]) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"type": "array"}
        if origin is tuple and args and not (len(args) == 2 and args[1] is ...):
            out["prefixItems"] = [self.schema(a) for a in args]
            out["minItems"] = out["maxItems"] = len(args)
            return out
        items = self.schema(args[0]) if args else {}
        if items:
            out["items"] = items
        if is_one_of(_SETS, origin):
            out["uniqueItems"] = True
        return out

    def _mapping(self, args: tuple[object, ...], tp: object) -> dict[str, JsonValue]:
        if args and unwrap_newtype(args[0]) is not str:
            raise ConfigError(f"unsupported type annotation {type_name(tp)}: JSON object keys are strings")
        out: dict[str, JsonValue] = {"type": "object"}
        values = self.schema(args[1]) if len(args) == 2 else {}
        if values:
            out["additionalProperties"] = values
        return out


def _literal(values: Sequence[object], tp: object) -> dict[str, JsonValue]:
    out: list[JsonValue] = []
    for value in values:
        raw = value.value if isinstance(value, enum.Enum) else value
        if raw is not None and not isinstance(raw, (str, int, float, bool)):
            raise ConfigError(f"unsupported type annotation {type_name(tp)}: {raw!r} is not a JSON scalar")
        out.append(raw)
    kinds: list[JsonValue] = list(dict.fromkeys(json_type(v) for v in out))
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": out}


def type_schema(tp: object) -> dict[str, Any]:
    """The JSON Schema of a type; a model class gets a ``"title"`` (its name).

    Use it for structured output (``output_type``) or anywhere a schema of a
    Python type is needed.

    >>> import attrs
    >>> @attrs.frozen
    ... class Verdict:
    ...     label: str = attrs.field(metadata={"description": "Spending category."})
    ...     score: float = 0.5
    >>> type_schema(Verdict)
    {'title': 'Verdict', 'type': 'object', 'properties': {'label': {'type': 'string', \
'description': 'Spending category.'}, 'score': {'type': 'number', 'default': 0.5}}, \
'required': ['label'], 'additionalProperties': False}
    >>> type_schema(list[int] | None)
    {'type': ['array', 'null'], 'items': {'type': 'integer'}}

    Raises:
        ConfigError: the type (or a field inside it) is not supported.
    """
    builder = SchemaBuilder()
    tp = unwrap_newtype(tp)
    if isinstance(tp, type) and typing.get_origin(tp) is None and model_kind(tp) is not None:
        return builder.finish({"title": tp.__name__, **builder.model(tp, describe=True)})
    return builder.finish(builder.schema(tp))


__all__ = ["SchemaBuilder", "type_schema"]
