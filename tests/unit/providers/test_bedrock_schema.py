"""rewrite_tool_schema: $ref inlining, combinator collapsing, meta-keyword stripping."""

from __future__ import annotations

import copy
import json
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from helikon.providers.bedrock import rewrite_tool_schema
from helikon.tools import type_schema

FORBIDDEN = {"$ref", "$defs", "definitions", "oneOf", "anyOf", "allOf", "$schema", "format", "examples"}


def keywords(schema: Any) -> set[str]:
    """Every keyword used at a schema position (property names excluded)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "patternProperties"):
                for sub in value.values():
                    found |= keywords(sub)
            elif isinstance(value, dict):
                found |= keywords(value)
            elif isinstance(value, list):
                for sub in value:
                    found |= keywords(sub)
    return found


def test_refs_are_inlined_and_definitions_dropped() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"home": {"$ref": "#/definitions/Address"}, "work": {"$ref": "#/definitions/Address"}},
        "definitions": {"Address": {"type": "object", "properties": {"street": {"type": "string"}}}},
    }

    out = rewrite_tool_schema(schema)

    address = {"type": "object", "properties": {"street": {"type": "string"}}}
    assert out == {"type": "object", "properties": {"home": address, "work": address}}


def test_keywords_beside_a_ref_refine_it() -> None:
    schema: dict[str, Any] = {
        "properties": {"p": {"$ref": "#/$defs/P", "description": "the point"}},
        "$defs": {"P": {"type": "object", "description": "a point", "properties": {}}},
    }

    assert rewrite_tool_schema(schema)["properties"]["p"]["description"] == "the point"


@attrs.frozen
class Tree:
    label: str
    children: list[Tree] | None = None


def test_recursive_types_are_cut_at_the_first_repeat() -> None:
    out = rewrite_tool_schema(type_schema(Tree))

    children = out["properties"]["children"]
    assert children["type"] == ["array", "null"]
    assert children["items"]["properties"]["children"]["items"] == {"type": "object"}
    assert not keywords(out) & FORBIDDEN


def test_mutual_recursion_and_depth_are_bounded() -> None:
    chain: dict[str, Any] = {
        f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(50)
    }
    chain["D50"] = {"type": "string"}

    out = rewrite_tool_schema({"$ref": "#/$defs/D0", "$defs": chain})

    depth, node = 0, out
    while node != {"type": "object"} and "properties" in node:
        node, depth = node["properties"]["next"], depth + 1
    assert node == {"type": "object"} and depth == 32


def test_unresolvable_and_remote_refs_become_permissive() -> None:
    out = rewrite_tool_schema(
        {"properties": {"a": {"$ref": "#/$defs/Missing"}, "b": {"$ref": "https://example.com/s.json"}}}
    )

    assert out["properties"] == {"a": {"type": "object"}, "b": {"type": "object"}}


def test_a_tagged_union_collapses_with_the_tag_as_an_enum() -> None:
    circle: dict[str, Any] = {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": ["circle"]}, "radius": {"type": "number"}},
        "required": ["kind", "radius"],
        "additionalProperties": False,
    }
    square: dict[str, Any] = {
        "type": "object",
        "properties": {"kind": {"type": "string", "const": "square"}, "side": {"type": "number"}},
        "required": ["kind", "side"],
        "additionalProperties": False,
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"shape": {"anyOf": [{"$ref": "#/$defs/Circle"}, {"$ref": "#/$defs/Square"}]}},
        "$defs": {"Circle": circle, "Square": square},
    }

    shape = rewrite_tool_schema(schema)["properties"]["shape"]

    assert shape == {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["circle", "square"]},
            "radius": {"type": "number"},
            "side": {"type": "number"},
        },
        "required": ["kind"],
        "additionalProperties": False,
    }


def test_all_of_merges_and_keeps_every_required_key() -> None:
    schema: dict[str, Any] = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ],
        "description": "both",
    }

    assert rewrite_tool_schema(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "description": "both",
    }


def test_a_single_all_of_wrapper_is_unwrapped() -> None:
    schema: dict[str, Any] = {
        "properties": {"unit": {"allOf": [{"$ref": "#/$defs/Unit"}], "description": "which unit"}},
        "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
    }

    assert rewrite_tool_schema(schema)["properties"]["unit"] == {
        "type": "string",
        "enum": ["c", "f"],
        "description": "which unit",
    }


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        ([{"type": "string"}, {"type": "null"}], {"type": ["string", "null"]}),
        (
            [{"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["b", "a"]}],
            {"type": "string", "enum": ["a", "b"]},
        ),
        ([{"const": "x"}, {"const": 1}], {"enum": ["x", 1]}),
        (
            [{"const": "x"}, {"const": "y"}, {"type": "null"}],
            {"type": ["string", "null"], "enum": ["x", "y", None]},
        ),
        ([{"type": "integer", "minimum": 0}, {"type": "array"}], {"type": ["integer", "array"]}),
        (
            [{"type": "string"}, {"type": "integer"}, {"type": "null"}],
            {"type": ["string", "integer", "null"]},
        ),
    ],
)
def test_scalar_unions(variants: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    out = rewrite_tool_schema({"properties": {"v": {"anyOf": variants}}})["properties"]["v"]

    assert out == expected


def test_meta_keywords_go_but_properties_named_like_them_stay() -> None:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "type": "object",
        "examples": [{"format": "csv"}],
        "properties": {
            "format": {
                "type": "string",
                "format": "uri",
                "examples": ["csv"],
                "description": "output format",
            },
            "examples": {"type": "array", "items": {"type": "string", "format": "email"}},
        },
        "required": ["format"],
    }

    out = rewrite_tool_schema(schema)

    assert out == {
        "type": "object",
        "properties": {
            "format": {"type": "string", "description": "output format"},
            "examples": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["format"],
    }


def test_the_input_is_not_mutated() -> None:
    schema: dict[str, Any] = {
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "string", "format": "date"}},
    }
    before = copy.deepcopy(schema)

    rewrite_tool_schema(schema)

    assert schema == before


# A small generator of schemas built from the constructs the rewriter handles.
leaves = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "format": "int32"},
        {"type": "string", "enum": ["a", "b"]},
        {"$ref": "#/$defs/Node"},
        {"type": "null"},
        {"type": "string", "examples": ["x"]},
    ]
)
schemas = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(
            lambda props: {"type": "object", "properties": props},
            st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
        ),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda vs: {"anyOf": vs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda vs: {"oneOf": vs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda vs: {"allOf": vs}, st.lists(inner, min_size=1, max_size=2)),
    ),
    max_leaves=8,
)


@given(schemas)
@example({"anyOf": [{"type": "string"}, {"type": "null"}, {"anyOf": [{"type": "string"}, {"type": "null"}]}]})
def test_no_forbidden_keyword_survives_and_the_result_is_a_valid_schema(body: dict[str, Any]) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"x": body},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}, "v": body}}},
    }

    out = rewrite_tool_schema(schema)

    assert not keywords(out) & FORBIDDEN
    jsonschema.Draft202012Validator.check_schema(out)
    json.dumps(out)  # plain JSON
    assert rewrite_tool_schema(out) == out  # a rewritten schema is a fixed point
