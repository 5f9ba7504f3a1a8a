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
``Attributes:`` section.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import math
import re
import types
import typing
import uuid
from collections import abc
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs
import msgspec

from helikon._json import JsonObject, JsonValue
from helikon.errors import ConfigError
from helikon.schema import json_type, nullable

# -- docstrings --------------------------------------------------------------

#: Google-style section headers, by the part of the docstring they start.
_SECTIONS: Final[Mapping[str, frozenset[str]]] = {
    "args": frozenset({"args", "arguments", "parameters", "params", "keyword args", "other parameters"}),
    "attributes": frozenset({"attributes"}),
    "other": frozenset(
        {"returns", "return", "yields", "raises", "example", "examples", "note", "notes", "see also"}
        | {"todo", "warning", "warnings", "references"}
    ),
}
_SECTION_OF: Final[Mapping[str, str]] = {h: part for part, headers in _SECTIONS.items() for h in headers}
_ENTRY: Final = re.compile(r"\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")


@attrs.frozen
class Docstring:
    """A Google-style docstring, split into the parts helikon reads."""

    #: The text before the first section, paragraphs separated by a blank line.
    summary: str
    #: ``(name, description)`` pairs from the ``Args:`` section.
    args: tuple[tuple[str, str], ...] = ()
    #: ``(name, description)`` pairs from the ``Attributes:`` section.
    attributes: tuple[tuple[str, str], ...] = ()


def parse_docstring(doc: str | None) -> Docstring:
    """Split a Google-style docstring into summary, ``Args`` and ``Attributes``.

    Whitespace inside a paragraph or an entry is collapsed to single spaces.

    >>> d = parse_docstring('''Add two numbers.
    ...
    ...     Args:
    ...         a: The first
    ...             addend.
    ...         b (int): The second addend.
    ...
    ...     Returns:
    ...         The sum.
    ...     ''')
    >>> d.summary
    'Add two numbers.'
    >>> d.args
    (('a', 'The first addend.'), ('b', 'The second addend.'))
    """
    if not doc:
        return Docstring("")
    import inspect

    summary: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = line.strip().rstrip(":").lower()
        if line and not line[0].isspace() and line.rstrip().endswith(":") and header in _SECTION_OF:
            current = sections.setdefault(_SECTION_OF[header], [])
        elif current is None:
            summary.append(line)
        else:
            current.append(line)
    paragraphs = " ".join(line.strip() or "\n" for line in summary).split("\n")
    text = "\n\n".join(_squash(p) for p in paragraphs if p.strip())
    return Docstring(text, _entries(sections.get("args", [])), _entries(sections.get("attributes", [])))


def _entries(lines: list[str]) -> tuple[tuple[str, str], ...]:
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not indents:
        return ()
    base = min(indents)
    entries: list[tuple[str, list[str]]] = []
    for line in lines:
        if not line.strip():
            continue
        match = _ENTRY.fullmatch(line.strip())
        if len(line) - len(line.lstrip()) == base and match:
            entries.append((match["name"], [match["text"]]))
        elif entries:
            entries[-1][1].append(line)
    return tuple((name, _squash(" ".join(text))) for name, text in entries)


def _squash(text: str) -> str:
    return " ".join(text.split())


# -- models: attrs, msgspec, dataclasses, TypedDict --------------------------


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


def _is_list(value: object) -> typing.TypeGuard[list[JsonValue]]:
    return isinstance(value, list)


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
            docs[target.id] = _squash(nxt.value.value)
    return docs


def class_description(cls: type) -> str | None:
    """The summary of ``cls``'s own docstring (``None`` for generated ones)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or (dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "(")):
        return None
    return parse_docstring(doc).summary or None


# -- the generator -----------------------------------------------------------

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


__all__ = [
    "Docstring",
    "FieldSpec",
    "ModelKind",
    "SchemaBuilder",
    "class_description",
    "field_docs",
    "is_any",
    "is_one_of",
    "json_default",
    "json_type",
    "model_fields",
    "model_kind",
    "parse_docstring",
    "type_name",
    "type_schema",
    "unwrap_newtype",
]
