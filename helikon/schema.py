"""JSON Schema rewriting for providers' strict modes.

OpenAI's strict structured output (and strict function calling) accepts only
a subset of JSON Schema: every object must say ``"additionalProperties":
false``, every property must be listed in ``"required"`` (an optional
property is expressed as one that may be ``null``), and ``"default"`` is not
allowed. :func:`strict` rewrites any schema into that shape; the OpenAI
adapter runs tool and output schemas through it, and you can call it
yourself when you assemble a :class:`~helikon.model.JsonSchema` response
format by hand.

Unlike the normaliser described in the book, :func:`strict` also rewrites the
schemas under ``$defs`` and ``definitions``, so recursive types and shared
definitions come out strict too. ``$ref`` targets are not inlined.

Everything here is pure: no IO, and the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeGuard

from helikon._json import JsonObject, JsonValue

#: Keywords whose value maps names to subschemas.
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
#: Keywords whose value is a list of subschemas.
_SCHEMA_LISTS: Final = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
#: Keywords whose value is one subschema (``items`` may also be a list in draft 4).
SINGLE_SUBSCHEMA_KEYWORDS: Final = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
_SCHEMA_ONE: Final = SINGLE_SUBSCHEMA_KEYWORDS
#: Keywords that annotate a schema without constraining the instance.
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
_NULL: Final[dict[str, JsonValue]] = {"type": "null"}


def strict(schema: JsonObject) -> dict[str, Any]:
    """Return a copy of ``schema`` that satisfies OpenAI's strict mode.

    Every object schema (one with ``"type": "object"`` or ``"properties"``)
    gets ``"additionalProperties": false`` and lists all its properties in
    ``"required"``; a property that was optional becomes nullable instead
    (see :func:`nullable`). ``"default"`` keywords are dropped. The rewrite
    recurses through ``properties``, ``items``, ``prefixItems``,
    ``anyOf``/``oneOf``/``allOf``, ``not``, ``if``/``then``/``else``,
    ``$defs`` and ``definitions``.

    An object whose free-form keys were described by an
    ``additionalProperties`` schema (a ``dict[str, X]``) is closed too: strict
    mode cannot express maps.

    >>> strict({
    ...     "type": "object",
    ...     "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
    ...     "required": ["city"],
    ... })
    {'type': 'object', 'properties': {'city': {'type': 'string'}, 'days': {'type': ['integer', 'null']}}, \
'required': ['city', 'days'], 'additionalProperties': False}

    Nested objects and definitions are rewritten as well:

    >>> out = strict({"$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
    ...               "type": "array", "items": {"$ref": "#/$defs/P"}})
    >>> out["$defs"]["P"]["required"], out["$defs"]["P"]["properties"]["x"]
    (['x'], {'type': ['number', 'null']})
    """
    return _rewrite(schema)


def nullable(schema: JsonObject) -> dict[str, Any]:
    """Return a copy of ``schema`` that also accepts ``null``.

    A schema with a simple ``"type"`` gets ``"null"`` added to it (and
    ``None`` to its ``"enum"``); anything else, object schemas included, is
    wrapped in ``{"anyOf": [schema, {"type": "null"}]}``, keeping ``title``
    and ``description`` on the outside. A schema that already accepts ``null``
    is returned unchanged.

    >>> nullable({"type": "string", "description": "A city."})
    {'type': ['string', 'null'], 'description': 'A city.'}
    >>> nullable({"type": "string", "enum": ["a", "b"]})
    {'type': ['string', 'null'], 'enum': ['a', 'b', None]}
    >>> nullable({"$ref": "#/$defs/Node", "description": "Next node."})
    {'anyOf': [{'$ref': '#/$defs/Node'}, {'type': 'null'}], 'description': 'Next node.'}
    >>> nullable({"type": "object", "properties": {}})
    {'anyOf': [{'type': 'object', 'properties': {}}, {'type': 'null'}]}
    >>> nullable({"type": ["integer", "null"]})
    {'type': ['integer', 'null']}
    """
    out = dict(schema)
    if _accepts_null(schema):
        return out
    kind = schema.get("type")
    simple = "const" not in schema and "properties" not in schema and kind != "object"
    if simple and isinstance(kind, (str, list)):
        kinds = [kind] if isinstance(kind, str) else list(kind)
        out["type"] = kinds if "null" in kinds else [*kinds, "null"]
        enum = schema.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]
        return out
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and set(schema) <= _ANNOTATIONS | {"anyOf"}:
        out["anyOf"] = [*any_of, dict(_NULL)]
        return out
    inner = {key: value for key, value in schema.items() if key not in ("title", "description")}
    wrapped: dict[str, JsonValue] = {"anyOf": [inner, dict(_NULL)]}
    for key in ("title", "description"):
        if key in schema:
            wrapped[key] = schema[key]
    return wrapped


def json_type(value: object) -> str:
    """The JSON Schema type name of a value (``bool`` before ``int``); the
    Python type's name for anything that is not JSON.

    >>> [json_type(v) for v in (None, True, 1, 1.5, "a", [1], {"k": 1})]
    ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object']
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _accepts_null(schema: JsonObject) -> bool:
    """Whether ``schema`` visibly accepts ``null`` (conservative: False when unsure)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    kind = schema.get("type")
    if kind is not None:
        return kind == "null" or (isinstance(kind, list) and "null" in kind)
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and set(schema) <= _ANNOTATIONS | {"anyOf"}:
        return any(isinstance(branch, Mapping) and _accepts_null(branch) for branch in any_of)
    return set(schema) <= _ANNOTATIONS | {"enum", "const"}


def _rewrite(schema: JsonObject) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key, value in schema.items():
        if key == "default":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _rewrite_any(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and _is_list(value):
            out[key] = [_rewrite_any(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = _rewrite_any(value)
        else:
            out[key] = _copy(value)
    if _is_object_schema(out):
        properties = out.get("properties")
        if isinstance(properties, dict):
            old_required = schema.get("required")
            required = set(old_required) if _is_list(old_required) else set()
            for name, sub in properties.items():
                if name not in required and isinstance(sub, Mapping):
                    properties[name] = nullable(sub)
            out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def _rewrite_any(value: JsonValue) -> JsonValue:
    if isinstance(value, Mapping):
        return _rewrite(value)
    if _is_list(value):
        return [_rewrite_any(sub) for sub in value]
    return value


def _is_object_schema(schema: Mapping[str, JsonValue]) -> bool:
    kind = schema.get("type")
    return "properties" in schema or kind == "object" or (_is_list(kind) and "object" in kind)


def _is_list(value: object) -> TypeGuard[Sequence[JsonValue]]:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _copy(value: JsonValue) -> JsonValue:
    if isinstance(value, Mapping):
        return {key: _copy(sub) for key, sub in value.items()}
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return [_copy(sub) for sub in value]
    return value


__all__ = ["SINGLE_SUBSCHEMA_KEYWORDS", "json_type", "nullable", "strict"]
