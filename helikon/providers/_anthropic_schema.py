"""The JSON Schema subset Anthropic's structured outputs accept.

The Messages API's ``output_config.format`` takes a subset of JSON Schema:
types, ``properties``/``required``, ``enum``/``const``, ``anyOf``/``allOf``,
``$ref``/``$defs``, ``description``/``title``/``default``, string
``format``\\s and ``minItems`` of 0 or 1; every object must be closed
(``additionalProperties: false``). Numeric and string constraints
(``minimum``, ``maxLength``, ``pattern``, ...), larger ``minItems``,
``maxItems`` and open maps are refused. :func:`output_schema` rewrites a
schema into that subset the way the official SDK does: each constraint it
drops is said in the property's ``description`` (so the model still sees
it), and every object is closed. The loop validates the answer against the
*original* schema, so a dropped constraint is still enforced, with the one
repair turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

#: Keywords kept as they are.
_KEPT: Final = frozenset({
    "type", "properties", "required", "items", "enum", "const", "anyOf", "allOf", "$ref", "$defs",
    "definitions", "description", "title", "default", "format", "additionalProperties", "minItems",
})
#: String formats the API supports (others move to the description).
_FORMATS: Final = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid",
})
_SCHEMA_LISTS: Final = ("anyOf", "allOf")
_SCHEMA_MAPS: Final = ("properties", "$defs", "definitions")


def output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` in the subset the API accepts (constraints moved into descriptions).

    >>> output_schema({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}},
    ...                "required": ["age"]})
    {'type': 'object', 'properties': {'age': {'type': 'integer', 'description': '{minimum: 0}'}}, \
'required': ['age'], 'additionalProperties': False}
    """
    rewritten: dict[str, Any] = _rewrite(schema)
    return rewritten


def _rewrite(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _rewrite(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, Sequence) and not isinstance(value, str):
            out[key] = [_rewrite(sub) for sub in value]
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _rewrite(value)
        elif key == "additionalProperties":
            if value is not False:
                dropped.append(f"additionalProperties: {_show(value)}")
        elif key == "minItems":
            if value in (0, 1):
                out[key] = value
            else:
                dropped.append(f"minItems: {_show(value)}")
        elif key == "format":
            if value in _FORMATS:
                out[key] = value
            else:
                dropped.append(f"format: {_show(value)}")
        elif key in _KEPT:
            out[key] = value
        else:
            dropped.append(f"{key}: {_show(value)}")
    if out.get("type") == "object" or "properties" in out:
        out["additionalProperties"] = False
    if dropped:
        note = "{" + ", ".join(dropped) + "}"
        description = out.get("description")
        has_text = isinstance(description, str) and description
        out["description"] = f"{description}\n\n{note}" if has_text else note
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


__all__ = ["output_schema"]
