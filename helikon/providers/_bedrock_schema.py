"""Rewrite JSON Schemas into the subset Bedrock's Converse validator accepts.

Bedrock rejects tool input schemas that use ``$ref``/``$defs``, the
``oneOf``/``anyOf``/``allOf`` combinators, or meta-keywords such as
``$schema``, ``format`` and ``examples``. :func:`rewrite_tool_schema` turns
any schema into an equivalent (or slightly looser) one without them:

- ``$ref`` pointers into the same document are inlined recursively. A
  reference to a definition already being expanded (a recursive type), one
  nested deeper than :data:`MAX_REF_DEPTH`, or one that cannot be resolved
  becomes the permissive ``{"type": "object"}``.
- ``oneOf``/``anyOf``/``allOf`` over object variants (a tagged union) become
  one flat object whose properties are the union of the variants'; a key that
  every variant pins to a constant (the tag) becomes an ``enum`` of those
  constants. For ``allOf`` every variant's required keys stay required; for
  ``oneOf``/``anyOf`` only the keys all variants require. Over scalar
  variants, a nullable ``X | None`` becomes ``X`` with ``"null"`` added to its
  type, a union of enums becomes one enum, and anything else a ``type`` list.
- Meta-keywords (:data:`STRIPPED_KEYWORDS`) are dropped wherever a schema
  stands, never where a name stands (a property called ``format`` stays).

Everything here is pure: the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from helikon._json import JsonObject, JsonValue
from helikon.schema import SINGLE_SUBSCHEMA_KEYWORDS, json_type

#: How many ``$ref`` expansions may nest before the rest is cut off.
MAX_REF_DEPTH: Final = 32

#: Keywords removed from every schema.
STRIPPED_KEYWORDS: Final = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$vocabulary",
        "$comment",
        "$defs",
        "definitions",
        "format",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "discriminator",
    }
)

#: Keywords whose value maps names to subschemas.
_SCHEMA_MAPS: Final = frozenset({"properties", "patternProperties", "dependentSchemas"})
#: Keywords whose value is one subschema (``items`` may also be a list).
_SCHEMA_ONE: Final = SINGLE_SUBSCHEMA_KEYWORDS
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")
_PERMISSIVE: Final[dict[str, Any]] = {"type": "object"}


def rewrite_tool_schema(schema: JsonObject) -> dict[str, Any]:
    """Rewrite ``schema`` into a form Bedrock's Converse API accepts.

    References are inlined:

    >>> rewrite_tool_schema({
    ...     "$schema": "https://json-schema.org/draft/2020-12/schema",
    ...     "type": "object",
    ...     "properties": {"when": {"type": "string", "format": "date"}, "at": {"$ref": "#/$defs/Place"}},
    ...     "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    ... })
    {'type': 'object', 'properties': {'when': {'type': 'string'}, 'at': {'type': 'object', \
'properties': {'city': {'type': 'string'}}}}}

    A recursive reference is cut off with a permissive object:

    >>> rewrite_tool_schema({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object",
    ...     "properties": {"next": {"$ref": "#/$defs/Node"}}}}})
    {'type': 'object', 'properties': {'next': {'type': 'object'}}}

    A tagged union collapses into one object with the tag as an enum:

    >>> rewrite_tool_schema({"oneOf": [
    ...     {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
    ...      "required": ["kind", "r"]},
    ...     {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
    ...      "required": ["kind", "side"]},
    ... ]})
    {'type': 'object', 'properties': {'kind': {'type': 'string', 'enum': ['circle', 'square']}, \
'r': {'type': 'number'}, 'side': {'type': 'number'}}, 'required': ['kind']}

    Args:
        schema: any JSON Schema (a mapping).

    Returns:
        A new schema without references, combinators or meta-keywords.
    """
    return _Rewriter(schema).schema(schema, ())


class _Rewriter:
    def __init__(self, root: JsonObject) -> None:
        self.root = root

    # -- dispatch -------------------------------------------------------------

    def schema(self, node: JsonValue, refs: tuple[str, ...]) -> dict[str, Any]:
        """Rewrite one schema position (``refs``: the references being expanded)."""
        if node is True or not isinstance(node, Mapping):
            # ``true`` (anything) or an invalid schema: the permissive object.
            return dict(_PERMISSIVE)
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._inline(node, ref, refs)
        for keyword in _COMBINATORS:
            variants = node.get(keyword)
            if isinstance(variants, Sequence) and not isinstance(variants, str):
                return self._collapse(node, keyword, variants, refs)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in STRIPPED_KEYWORDS or key == "$ref":
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {name: self.schema(sub, refs) for name, sub in value.items()}
            elif key in _SCHEMA_ONE and isinstance(value, Mapping | bool):
                out[key] = value if isinstance(value, bool) else self.schema(value, refs)
            elif (
                key in ("items", "prefixItems") and isinstance(value, Sequence) and not isinstance(value, str)
            ):
                out[key] = [self.schema(sub, refs) for sub in value]
            else:
                out[key] = _copy(value)
        return out

    # -- $ref -------------------------------------------------------------------

    def _inline(self, node: Mapping[str, JsonValue], ref: str, refs: tuple[str, ...]) -> dict[str, Any]:
        target = self._resolve(ref)
        if target is None or ref in refs or len(refs) >= MAX_REF_DEPTH:
            resolved: dict[str, Any] = dict(_PERMISSIVE)
        else:
            resolved = self.schema(target, (*refs, ref))
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return resolved
        # Keywords next to $ref (a description, a default) refine the target.
        return {**resolved, **self.schema(siblings, refs)}

    def _resolve(self, ref: str) -> JsonValue:
        if not ref.startswith("#"):
            return None  # remote references are not fetched
        node: JsonValue = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, Sequence) and not isinstance(node, str) and token.isdigit():
                index = int(token)
                if index >= len(node):
                    return None
                node = node[index]
            else:
                return None
        return node

    # -- combinators --------------------------------------------------------------

    def _collapse(
        self,
        node: Mapping[str, JsonValue],
        keyword: str,
        variants: Sequence[JsonValue],
        refs: tuple[str, ...],
    ) -> dict[str, Any]:
        rewritten = [self.schema(v, refs) for v in variants]
        siblings = self.schema({k: v for k, v in node.items() if k not in _COMBINATORS}, refs)
        objects = [v for v in rewritten if _is_object(v)]
        if objects:
            merged = _merge_objects(objects, keyword == "allOf")
        elif keyword == "allOf":
            merged = {}
            for variant in rewritten:
                merged.update(variant)
        else:
            merged = _merge_scalars(rewritten)
        if _is_object(siblings) and _is_object(merged) and "properties" in siblings:
            merged = _merge_objects([merged, siblings], True)
            siblings = {k: v for k, v in siblings.items() if k not in ("properties", "required")}
        return {**merged, **siblings}


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def _tag_value(schema: Mapping[str, Any]) -> JsonValue:
    """The constant a property is pinned to (``const`` or a one-value ``enum``), or None."""
    if "const" in schema:
        value: JsonValue = schema["const"]
        return value
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        only: JsonValue = enum[0]
        return only
    return None


def _merge_objects(variants: list[dict[str, Any]], all_required: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    tags: dict[str, list[JsonValue]] = {}
    for variant in variants:
        for name, prop in (variant.get("properties") or {}).items():
            value = _tag_value(prop) if isinstance(prop, Mapping) else None
            if value is not None:
                tags.setdefault(name, [])
                if value not in tags[name]:
                    tags[name].append(value)
            properties.setdefault(name, prop)
    # A tag is a key every variant pins to a constant.
    for name, values in tags.items():
        pinned = all(
            isinstance((v.get("properties") or {}).get(name), Mapping)
            and _tag_value(v["properties"][name]) is not None
            for v in variants
        )
        if pinned and (len(values) > 1 or len(variants) > 1):
            kinds = {json_type(value) for value in values}
            tag: dict[str, Any] = {"type": kinds.pop()} if len(kinds) == 1 else {}
            tag["enum"] = values
            description = properties[name].get("description")
            if isinstance(description, str):
                tag["description"] = description
            properties[name] = tag
    required_sets = [[r for r in v.get("required") or [] if isinstance(r, str)] for v in variants]
    if all_required:
        required = [name for names in required_sets for name in names]
    else:
        required = [name for name in required_sets[0] if all(name in names for names in required_sets[1:])]
    merged: dict[str, Any] = {"type": "object", "properties": properties}
    unique_required = list(dict.fromkeys(required))
    if unique_required:
        merged["required"] = unique_required
    if all(v.get("additionalProperties") is False for v in variants):
        merged["additionalProperties"] = False
    return merged


def _merge_scalars(variants: list[dict[str, Any]]) -> dict[str, Any]:
    nullable = any(v.get("type") == "null" for v in variants)
    rest = [v for v in variants if v.get("type") != "null"]
    if not rest:
        return {"type": "null"}
    if len(rest) == 1:
        only = dict(rest[0])
        kind = only.get("type")
        if nullable and isinstance(kind, str):
            only["type"] = [kind, "null"]
        elif nullable and isinstance(kind, list) and "null" not in kind:
            only["type"] = [*kind, "null"]
        return only
    enums = [[v["const"]] if "const" in v else v.get("enum") for v in rest]
    if all(isinstance(e, list) for e in enums):
        values: list[Any] = []
        for enum in enums:
            assert isinstance(enum, list)
            values.extend(x for x in enum if x not in values)
        kinds = {json_type(x) for x in values}
        merged: dict[str, Any] = {"type": kinds.pop()} if len(kinds) == 1 else {}
        merged["enum"] = [*values, None] if nullable and None not in values else values
        if nullable and isinstance(merged.get("type"), str):
            merged["type"] = [merged["type"], "null"]
        description = next((v["description"] for v in rest if isinstance(v.get("description"), str)), None)
        if description is not None:
            merged["description"] = description
        return merged
    types: list[str] = []
    for variant in rest:
        kind = variant.get("type")
        for name in kind if isinstance(kind, list) else [kind]:
            if isinstance(name, str) and name not in types:
                types.append(name)
    if nullable and "null" not in types:
        types.append("null")
    return {"type": types} if types else {}


def _copy(value: JsonValue) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_copy(v) for v in value]
    return value


__all__ = ["MAX_REF_DEPTH", "STRIPPED_KEYWORDS", "rewrite_tool_schema"]
