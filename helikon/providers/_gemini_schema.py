"""The JSON-Schema sanitiser for Gemini's ``Schema`` (an OpenAPI 3.0 subset).

Gemini's ``responseSchema`` and ``functionDeclarations[].parameters`` accept
only a subset of OpenAPI 3.0 and reject unknown keywords with HTTP 400
("Invalid JSON payload received. Unknown name ..."). :func:`sanitize_schema`
rewrites the schemas Python tools produce (pydantic, attrs, the ``@tool``
decorator) into that subset, as the book's Gemini chapter describes. It is a
pure function: same input, same output, no IO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from helikon._json import JsonObject
from helikon.schema import json_type

#: The literal types an enum's ``type`` is inferred from.
_SCALAR_TYPES: Final = frozenset({"boolean", "integer", "number", "string"})

#: The keywords Gemini's ``Schema`` message knows (everything else is dropped).
#: ``default`` and ``example`` are known to the API too, but the book strips
#: them: they only cost tokens and change nothing.
_KEPT: Final = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
    }
)

#: ``format`` values Gemini recognises, per type; other formats are dropped.
_FORMATS: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}

#: How deep ``$ref`` expansion may nest before it is cut off (recursive types).
MAX_REF_DEPTH: Final = 32

#: What a cut-off (recursive or unresolvable) reference becomes.
_CUT_OFF: Final[Mapping[str, Any]] = {"type": "object"}


def sanitize_schema(schema: JsonObject) -> dict[str, Any]:
    """Rewrite a JSON Schema into the subset Gemini's ``Schema`` accepts.

    - local ``$ref`` pointers are inlined (a recursive or unresolvable
      reference, or one nested deeper than :data:`MAX_REF_DEPTH`, becomes
      ``{"type": "object"}``), and ``$defs``/``definitions`` are dropped;
    - ``"type": [T, "null"]`` becomes ``"type": T, "nullable": true`` (several
      non-null types become an ``anyOf``); an ``anyOf`` member
      ``{"type": "null"}`` becomes ``nullable`` too, and an ``anyOf`` left
      with one member is merged into its parent;
    - ``const`` becomes a one-item ``enum`` (with the type inferred when
      missing); ``enum`` values become strings, as Gemini requires;
    - ``oneOf`` becomes ``anyOf``; ``allOf`` members are merged;
    - ``format`` is kept only where Gemini knows it (``enum`` and
      ``date-time`` for strings, ``float``/``double``, ``int32``/``int64``);
    - every other keyword is dropped (``$schema``, ``additionalProperties``,
      ``unevaluatedProperties``, ``patternProperties``, ``examples``,
      ``default``, ``const`` once rewritten, ...), and ``required`` keeps only
      names that are in ``properties``.

    >>> sanitize_schema({
    ...     "$schema": "https://json-schema.org/draft/2020-12/schema",
    ...     "type": "object",
    ...     "additionalProperties": False,
    ...     "properties": {
    ...         "city": {"type": "string", "examples": ["Paris"], "format": "uri"},
    ...         "when": {"type": ["string", "null"], "format": "date-time", "default": None},
    ...         "kind": {"const": "trip"},
    ...     },
    ...     "required": ["city", "kind", "ghost"],
    ... })
    {'type': 'object', 'properties': {'city': {'type': 'string'}, \
'when': {'type': 'string', 'format': 'date-time', 'nullable': True}, \
'kind': {'enum': ['trip'], 'type': 'string'}}, 'required': ['city', 'kind']}

    References are inlined, and ``oneOf`` becomes ``anyOf``:

    >>> sanitize_schema({
    ...     "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
    ...     "type": "object",
    ...     "properties": {
    ...         "at": {"$ref": "#/$defs/Point", "description": "where"},
    ...         "id": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    ...     },
    ... })
    {'type': 'object', 'properties': {'at': {'type': 'object', 'properties': {'x': {'type': 'number'}}, \
'description': 'where'}, 'id': {'anyOf': [{'type': 'string'}, {'type': 'integer'}]}}}

    Pydantic's ``Optional[X]`` (an ``anyOf`` with a null member) collapses:

    >>> sanitize_schema({"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "N"})
    {'title': 'N', 'type': 'integer', 'nullable': True}

    A recursive type is cut off where it refers to itself:

    >>> sanitize_schema({"$defs": {"Node": {"type": "object", "properties": {
    ...     "next": {"$ref": "#/$defs/Node"}}}}, "$ref": "#/$defs/Node"})
    {'type': 'object', 'properties': {'next': {'type': 'object'}}}
    """
    return _clean(schema, schema, ())


def _clean(node: Any, root: JsonObject, refs: tuple[str, ...]) -> dict[str, Any]:
    """Sanitise one schema node; ``refs`` are the references being expanded."""
    if not isinstance(node, Mapping):
        return {}  # boolean schemas (``true``): anything goes
    if isinstance(node.get("$ref"), str):
        ref: str = node["$ref"]
        target = _resolve(root, ref)
        if target is None or ref in refs or len(refs) >= MAX_REF_DEPTH:
            merged: dict[str, Any] = dict(_CUT_OFF)
            if isinstance(node.get("description"), str):
                merged["description"] = node["description"]
            return merged
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _clean({**target, **siblings}, root, (*refs, ref))

    out: dict[str, Any] = {}
    nullable = False
    for key, value in node.items():
        if key == "type":
            nullable = _put_type(out, value) or nullable
        elif key == "const":
            out["enum"] = [value]
        elif key in ("anyOf", "oneOf") and isinstance(value, Sequence):
            members = [_clean(m, root, refs) for m in value]
            out.setdefault("anyOf", []).extend(members)
        elif key == "allOf" and isinstance(value, Sequence):
            for member in value:
                _merge(out, _clean(member, root, refs))
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {name: _clean(sub, root, refs) for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, Sequence) and not isinstance(value, str):
                out["items"] = _clean({"anyOf": list(value)}, root, refs)
            else:
                out["items"] = _clean(value, root, refs)
        elif key == "nullable":
            nullable = nullable or value is True
        elif key in _KEPT:
            out[key] = value
    return _finish(out, nullable)


def _put_type(out: dict[str, Any], value: Any) -> bool:
    """Write ``type`` into ``out``; return whether ``null`` was among the types."""
    if not isinstance(value, list):
        if value == "null":
            return True
        out["type"] = value
        return False
    types = [t for t in value if t != "null"]
    if len(types) == 1:
        out["type"] = types[0]
    elif types:
        out.setdefault("anyOf", []).extend({"type": t} for t in types)
    return len(types) != len(value)


def _merge(out: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Merge an ``allOf`` member into ``out`` (properties and required unite)."""
    for key, value in extra.items():
        if key == "properties" and isinstance(out.get("properties"), dict):
            out["properties"] = {**out["properties"], **value}
        elif key == "required" and isinstance(out.get("required"), list):
            out["required"] = [*out["required"], *(r for r in value if r not in out["required"])]
        else:
            out.setdefault(key, value)


def _finish(out: dict[str, Any], nullable: bool) -> dict[str, Any]:
    """Apply the rules that need the whole node: nulls, enums, formats, required."""
    members = out.get("anyOf")
    if isinstance(members, list):
        kept = [m for m in members if m != {"nullable": True}]
        if len(kept) != len(members):
            nullable = True
        if len(kept) == 1:
            del out["anyOf"]
            for key, value in kept[0].items():
                out.setdefault(key, value)
            nullable = nullable or out.pop("nullable", False) is True
        elif kept:
            out["anyOf"] = kept
        else:
            del out["anyOf"]
    enum = out.get("enum")
    if isinstance(enum, list):
        if None in enum:
            nullable = True
        values = [v for v in enum if v is not None]
        if "type" not in out and values:
            inferred = json_type(values[0])
            if inferred in _SCALAR_TYPES and all(json_type(v) == inferred for v in values):
                out["type"] = inferred
        out["enum"] = [v if isinstance(v, str) else msgspec.json.encode(v).decode() for v in values]
    if nullable:
        out["nullable"] = True
    fmt = out.get("format")
    if fmt is not None and fmt not in _FORMATS.get(str(out.get("type")), frozenset()):
        del out["format"]
    required = out.get("required")
    if isinstance(required, list):
        names = out.get("properties", {})
        kept_names = [r for r in required if r in names]
        if kept_names:
            out["required"] = kept_names
        else:
            del out["required"]
    return out


def _resolve(root: JsonObject, ref: str) -> Mapping[str, Any] | None:
    """The schema a local JSON pointer (``#/$defs/X``) names, or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node if isinstance(node, Mapping) else None


__all__ = ["MAX_REF_DEPTH", "sanitize_schema"]
