"""Hypothesis strategies for JSON values, names and tool-argument schemas.

Part of :mod:`helikon.testing.strategies` (import the names from there). The
rules it follows:

- Generated JSON is what a real wire carries: finite floats, integers a
  double holds exactly, strings without lone surrogates, so values survive
  ``msgspec`` and every provider's JSON.
- Argument schemas come from one small JSON Schema subset (see
  :func:`arg_schemas`); :func:`matching_args` and :func:`non_matching_args`
  understand exactly that subset, so "matching" and "violating" are true by
  construction, not by filtering.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from functools import cache
from typing import Final

import msgspec
from hypothesis import strategies as st

from helikon._json import JsonObject, JsonValue
from helikon.ids import RunId

#: Integers a JSON wire carries exactly (IEEE doubles and int64 agree here).
_INT_BOUND: Final = 2**53


# -- JSON --------------------------------------------------------------------


@cache
def json_scalars() -> st.SearchStrategy[JsonValue]:
    """JSON scalars: null, booleans, bounded integers, finite floats, strings."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-_INT_BOUND, _INT_BOUND),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )


@cache
def json_values(max_leaves: int = 8) -> st.SearchStrategy[JsonValue]:
    """Any JSON value (lists and objects nest up to ``max_leaves`` scalars)."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(st.text(max_size=8), children, max_size=3),
        ),
        max_leaves=max_leaves,
    )


@cache
def json_objects(max_leaves: int = 8) -> st.SearchStrategy[dict[str, JsonValue]]:
    """A JSON object with any values."""
    return st.dictionaries(st.text(max_size=8), json_values(max_leaves), max_size=4)


def encode(value: object) -> str:
    """``value`` as compact JSON text."""
    return msgspec.json.encode(value).decode()


# -- names -------------------------------------------------------------------


_LOWER: Final = "abcdefghijklmnopqrstuvwxyz"
_DIGITS: Final = "0123456789"


@cache
def tool_names() -> st.SearchStrategy[str]:
    """A tool name as providers accept it: ``[a-z][a-z0-9_]{0,11}``."""
    return st.builds(operator.add, st.sampled_from(_LOWER), st.text(_LOWER + _DIGITS + "_", max_size=11))


@cache
def run_ids() -> st.SearchStrategy[RunId]:
    """A run id."""
    return st.text(_LOWER + _DIGITS, min_size=1, max_size=10).map(RunId)


@cache
def provider_call_ids() -> st.SearchStrategy[str]:
    """A call id as a provider would send it (never shaped like a derived one)."""
    return st.text(_LOWER + _LOWER.upper() + _DIGITS, min_size=1, max_size=8).map("toolu_".__add__)


# -- argument schemas --------------------------------------------------------


def _leaf_schemas() -> st.SearchStrategy[dict[str, JsonValue]]:
    return st.one_of(
        st.just({"type": "string"}),
        st.integers(0, 8).map(lambda n: {"type": "string", "maxLength": n}),
        st.just({"type": "integer"}),
        st.tuples(st.integers(-10, 10), st.integers(0, 20)).map(
            lambda lo_span: {"type": "integer", "minimum": lo_span[0], "maximum": lo_span[0] + lo_span[1]}
        ),
        st.just({"type": "number"}),
        st.just({"type": "boolean"}),
        st.just({"type": "null"}),
        st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True).map(lambda e: {"enum": e}),
    )


@st.composite
def _object_schema(
    draw: st.DrawFn, values: st.SearchStrategy[dict[str, JsonValue]], max_properties: int
) -> dict[str, JsonValue]:
    names = draw(st.lists(tool_names(), max_size=max_properties, unique=True))
    properties: dict[str, JsonValue] = {name: draw(values) for name in names}
    required = [name for name in names if draw(st.booleans())]
    schema: dict[str, JsonValue] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    closed = draw(st.sampled_from([None, True, False]))
    if closed is not None:
        schema["additionalProperties"] = not closed
    if draw(st.booleans()):
        schema["description"] = draw(st.text(max_size=10))
    return schema


def _property_schemas() -> st.SearchStrategy[dict[str, JsonValue]]:
    leaf = _leaf_schemas()
    return st.one_of(
        leaf,
        leaf.map(lambda items: {"type": "array", "items": items}),
        _object_schema(leaf, max_properties=2),
    )


def arg_schemas(max_properties: int = 4) -> st.SearchStrategy[dict[str, JsonValue]]:
    """A tool's argument schema: a JSON Schema object of a small subset.

    The subset: ``type`` (string, integer, number, boolean, null, array,
    object), ``enum`` of strings, ``maxLength``, ``minimum``/``maximum``,
    ``items``, ``properties``, ``required``, ``additionalProperties`` (bool)
    and ``description``; objects nest one level.
    """
    return _object_schema(_property_schemas(), max_properties=max_properties)


def _instances(schema: JsonValue) -> st.SearchStrategy[JsonValue]:
    """Values valid against ``schema`` (of the :func:`arg_schemas` subset)."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"not a schema: {schema!r}")
    if "enum" in schema:
        enum_values = schema["enum"]
        assert isinstance(enum_values, list)
        return st.sampled_from(enum_values)
    kind = schema.get("type")
    if kind is None:
        return json_values()
    if kind == "string":
        limit = schema.get("maxLength")
        return st.text(max_size=limit if isinstance(limit, int) else 12)
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.integers(
            low if isinstance(low, int) else -_INT_BOUND, high if isinstance(high, int) else _INT_BOUND
        )
    if kind == "number":
        return st.one_of(
            st.integers(-_INT_BOUND, _INT_BOUND), st.floats(allow_nan=False, allow_infinity=False)
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = _instances(schema.get("items", {}))
        return st.lists(items, max_size=3)
    if kind == "object":
        return _object_instances(schema)
    raise ValueError(f"matching_args does not understand the schema {schema!r}")


def _object_parts(schema: Mapping[str, JsonValue]) -> tuple[Mapping[str, JsonValue], list[JsonValue]]:
    """An object schema's ``properties`` and ``required`` (empty when absent)."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    assert isinstance(properties, Mapping) and isinstance(required, list)
    return properties, required


@st.composite
def _object_instances(draw: st.DrawFn, schema: Mapping[str, JsonValue]) -> JsonValue:
    properties, required = _object_parts(schema)
    value: dict[str, JsonValue] = {}
    for name, sub in properties.items():
        if name in required or draw(st.booleans()):
            value[name] = draw(_instances(sub))
    if schema.get("additionalProperties", True) is not False and draw(st.booleans()):
        extra = draw(st.text(max_size=6).filter(lambda key: key not in properties))
        value[extra] = draw(json_values(max_leaves=2))
    return value


def matching_args(schema: JsonObject) -> st.SearchStrategy[JsonValue]:
    """Arguments valid against ``schema`` (one of :func:`arg_schemas`)."""
    return _instances_of(msgspec.json.encode(schema, order="sorted"))


@cache
def _instances_of(canonical: bytes) -> st.SearchStrategy[JsonValue]:
    # Building a strategy costs more than drawing from it: memoise per schema.
    return _instances(msgspec.json.decode(canonical))


def _wrong_type(schema: Mapping[str, JsonValue]) -> st.SearchStrategy[JsonValue]:
    """A value of a JSON type ``schema`` does not allow."""
    kind = schema.get("type")
    if "enum" in schema or kind in ("string", "array", "null", "boolean"):
        # An integer is never a string, list, null or bool (nor in a string enum).
        return st.integers(-100, 100)
    if kind in ("integer", "number", "object"):
        return st.text(max_size=6)
    raise ValueError(f"non_matching_args does not understand the schema {schema!r}")


@st.composite
def _violations(draw: st.DrawFn, schema: Mapping[str, JsonValue]) -> JsonValue:
    properties, required = _object_parts(schema)
    options: list[str] = ["not_object"]
    if required:
        options.append("missing_required")
    if properties:
        options.append("wrong_type")
    if schema.get("additionalProperties", True) is False:
        options.append("extra_key")
    how = draw(st.sampled_from(options))
    if how == "not_object":
        return draw(st.one_of(st.lists(json_scalars(), max_size=2), json_scalars()))
    value = draw(_object_instances(schema))
    assert isinstance(value, dict)
    if how == "missing_required":
        del value[draw(st.sampled_from(required))]
    elif how == "wrong_type":
        name = draw(st.sampled_from(sorted(properties)))
        sub = properties[name]
        assert isinstance(sub, Mapping)
        value[name] = draw(_wrong_type(sub))
    else:
        value[draw(tool_names().filter(lambda key: key not in properties))] = 1
    return value


def non_matching_args(schema: JsonObject) -> st.SearchStrategy[JsonValue]:
    """Arguments that break ``schema`` (a non-object, a missing, mistyped or unexpected key)."""
    return _violations(schema)


@cache
def malformed_json() -> st.SearchStrategy[str]:
    """Text that is not JSON: a cut-off object, or prose."""
    cut = (
        json_objects(max_leaves=3)
        .map(encode)
        .flatmap(lambda text: st.integers(1, len(text) - 1).map(lambda end: text[:end]))
    )
    prose = st.sampled_from(["{", "{'a': 1}", "not json", '{"a": }', "[1, 2", "{} {}"])
    return st.one_of(cut, prose)


__all__ = [
    "arg_schemas",
    "json_objects",
    "json_scalars",
    "json_values",
    "malformed_json",
    "matching_args",
    "non_matching_args",
    "provider_call_ids",
    "run_ids",
    "tool_names",
]
