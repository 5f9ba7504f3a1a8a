"""The Gemini JSON-Schema sanitiser: the book's rewrite rules, one by one, and
real schemas (the ``@tool`` decorator's, pydantic-shaped ones) end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helikon import tool
from helikon.providers.gemini import sanitize_schema

_REQUEST_SCHEMA = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "gemini" / "generate_content_request.schema.json").read_text()
)


def _gemini_schema_errors(schema: dict[str, Any]) -> list[str]:
    """Validate ``schema`` against the Schema subset Gemini documents."""
    document = {"$defs": _REQUEST_SCHEMA["$defs"], "$ref": "#/$defs/Schema"}
    validator = jsonschema.Draft202012Validator(document)
    return [e.message for e in validator.iter_errors(schema)]


def test_meta_keywords_are_stripped() -> None:
    out = sanitize_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "$comment": "internal",
            "type": "object",
            "properties": {"a": {"type": "string", "default": "x", "examples": ["y"]}},
            "additionalProperties": False,
            "unevaluatedProperties": False,
            "patternProperties": {"^x-": {"type": "string"}},
            "examples": [{"a": "z"}],
            "default": {},
        }
    )
    assert out == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_type_with_null_becomes_nullable() -> None:
    assert sanitize_schema({"type": ["integer", "null"]}) == {"type": "integer", "nullable": True}
    assert sanitize_schema({"type": ["null", "string"], "description": "d"}) == {
        "type": "string",
        "description": "d",
        "nullable": True,
    }


def test_several_non_null_types_become_any_of() -> None:
    assert sanitize_schema({"type": ["string", "integer", "null"]}) == {
        "anyOf": [{"type": "string"}, {"type": "integer"}],
        "nullable": True,
    }


def test_const_becomes_a_single_item_enum_with_its_type() -> None:
    assert sanitize_schema({"const": "a"}) == {"enum": ["a"], "type": "string"}
    assert sanitize_schema({"type": "integer", "const": 3}) == {"type": "integer", "enum": ["3"]}
    assert sanitize_schema({"const": True}) == {"enum": ["true"], "type": "boolean"}


def test_enum_values_become_strings_and_null_becomes_nullable() -> None:
    assert sanitize_schema({"enum": ["a", "b", None]}) == {
        "enum": ["a", "b"],
        "type": "string",
        "nullable": True,
    }
    assert sanitize_schema({"type": "integer", "enum": [1, 2]}) == {"type": "integer", "enum": ["1", "2"]}


def test_one_of_is_renamed_any_of() -> None:
    out = sanitize_schema({"oneOf": [{"type": "string"}, {"type": "number"}]})
    assert out == {"anyOf": [{"type": "string"}, {"type": "number"}]}


def test_optional_any_of_collapses_into_its_member() -> None:
    out = sanitize_schema(
        {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}], "default": None, "description": "maybe"}
        | {"$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    )
    assert out == {
        "description": "maybe",
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "nullable": True,
    }


def test_all_of_members_merge() -> None:
    out = sanitize_schema(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ],
            "description": "both",
        }
    )
    assert out == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "description": "both",
    }


def test_refs_are_inlined_including_definitions_and_siblings() -> None:
    schema: dict[str, Any] = {
        "definitions": {"Tag": {"type": "string", "description": "a tag"}},
        "type": "array",
        "items": {"$ref": "#/definitions/Tag", "description": "overridden"},
    }
    assert sanitize_schema(schema) == {
        "type": "array",
        "items": {"type": "string", "description": "overridden"},
    }


def test_recursive_and_unresolvable_refs_are_cut_off() -> None:
    tree: dict[str, Any] = {
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
            }
        },
        "$ref": "#/$defs/Tree",
    }
    assert sanitize_schema(tree) == {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"type": "object"}}},
    }
    assert sanitize_schema({"$ref": "https://example.com/remote.json"}) == {"type": "object"}
    assert sanitize_schema({"$ref": "#/$defs/Missing", "description": "d"}) == {
        "type": "object",
        "description": "d",
    }


def test_formats_are_kept_only_where_gemini_knows_them() -> None:
    out = sanitize_schema(
        {
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "kind": {"type": "string", "format": "enum", "enum": ["a"]},
                "site": {"type": "string", "format": "uri"},
                "mail": {"type": "string", "format": "email"},
                "ratio": {"type": "number", "format": "double"},
                "count": {"type": "integer", "format": "int64"},
                "odd": {"type": "integer", "format": "uint8"},
            },
        }
    )
    props = out["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["kind"] == {"type": "string", "format": "enum", "enum": ["a"]}
    assert props["site"] == props["mail"] == {"type": "string"}
    assert props["ratio"] == {"type": "number", "format": "double"}
    assert props["count"] == {"type": "integer", "format": "int64"}
    assert props["odd"] == {"type": "integer"}


def test_required_keeps_only_known_properties() -> None:
    out = sanitize_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]})
    assert out["required"] == ["a"]
    assert "required" not in sanitize_schema({"type": "object", "required": ["ghost"]})


def test_unsupported_validation_keywords_are_dropped_supported_kept() -> None:
    out = sanitize_schema(
        {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 2, "minimum": 1, "maximum": 9},
            "uniqueItems": True,
            "minItems": 1,
            "maxItems": 4,
            "prefixItems": [{"type": "string"}],
        }
    )
    assert out == {
        "type": "array",
        "items": {"type": "number", "minimum": 1, "maximum": 9},
        "minItems": 1,
        "maxItems": 4,
    }


def test_the_input_is_not_modified() -> None:
    schema: dict[str, Any] = {
        "type": ["string", "null"],
        "$defs": {"X": {"const": 1}},
        "properties": {"x": {"$ref": "#/$defs/X"}},
    }
    before = json.dumps(schema, sort_keys=True)
    sanitize_schema(schema)
    assert json.dumps(schema, sort_keys=True) == before


@attrs.frozen
class Window:
    start: str
    end: str | None = None


def test_a_tool_decorator_schema_passes_gemini_validation() -> None:
    @tool
    async def search(
        query: str, limit: int = 5, window: Window | None = None, tags: list[str] | None = None
    ) -> str:
        """Search the archive.

        Args:
            query: what to look for.
            limit: how many hits.
            window: the time window.
            tags: only these tags.
        """
        return ""

    out = sanitize_schema(search.parameters)
    assert _gemini_schema_errors(out) == []
    assert out["type"] == "object"
    assert set(out["properties"]) == {"query", "limit", "window", "tags"}
    assert "query" in out.get("required", [])
    serialized = json.dumps(out)
    for banned in ("$ref", "$defs", "additionalProperties", "default", "const", "oneOf", '"null"'):
        assert banned not in serialized, banned


def test_a_pydantic_style_schema_passes_gemini_validation() -> None:
    schema: dict[str, Any] = {
        "$defs": {
            "Kind": {"enum": ["home", "work"], "title": "Kind", "type": "string"},
            "Address": {
                "type": "object",
                "title": "Address",
                "properties": {
                    "street": {"title": "Street", "type": "string"},
                    "kind": {"$ref": "#/$defs/Kind", "default": "home"},
                    "zip": {
                        "anyOf": [{"type": "string", "pattern": "^[0-9]{5}$"}, {"type": "null"}],
                        "default": None,
                    },
                },
                "required": ["street"],
                "additionalProperties": False,
            },
        },
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"title": "Name", "type": "string", "minLength": 1},
            "addresses": {"type": "array", "items": {"$ref": "#/$defs/Address"}},
            "shape": {
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}},
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
                    },
                ],
                "discriminator": {"propertyName": "kind"},
            },
        },
        "required": ["name", "addresses"],
    }
    out = sanitize_schema(schema)
    assert _gemini_schema_errors(out) == []
    address = out["properties"]["addresses"]["items"]
    assert address["properties"]["kind"] == {"enum": ["home", "work"], "title": "Kind", "type": "string"}
    assert address["properties"]["zip"] == {"type": "string", "pattern": "^[0-9]{5}$", "nullable": True}
    circle, square = out["properties"]["shape"]["anyOf"]
    assert circle["properties"]["kind"] == {"enum": ["circle"], "type": "string"}
    assert square["properties"]["kind"] == {"enum": ["square"], "type": "string"}


_names = st.text(alphabet="abcxyz", min_size=1, max_size=3)
_leaf = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["string", "integer", "number", "boolean", ["string", "null"], ["integer", "null"]]
        )
    },
    optional={
        "default": st.none(),
        "examples": st.lists(st.integers(), max_size=1),
        "format": st.sampled_from(["uri", "date-time", "int64", "email", "double"]),
        "description": st.text(max_size=5),
        "const": st.one_of(st.text(max_size=3), st.integers(), st.booleans()),
    },
)
_schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(
            lambda props, req, extra: {
                "type": "object",
                "properties": props,
                "required": req,
                "additionalProperties": extra,
            },
            st.dictionaries(_names, inner, max_size=3),
            st.lists(_names, max_size=3),
            st.booleans(),
        ),
        st.builds(lambda item: {"type": "array", "items": item, "uniqueItems": True}, inner),
        st.builds(lambda members: {"oneOf": members}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(
            lambda members: {"anyOf": [*members, {"type": "null"}]}, st.lists(inner, min_size=1, max_size=2)
        ),
    ),
    max_leaves=8,
)


@given(_schemas)
def test_any_schema_sanitises_into_the_gemini_subset(schema: dict[str, Any]) -> None:
    out = sanitize_schema(schema)
    assert _gemini_schema_errors(out) == []
    assert sanitize_schema(out) == out  # idempotent


@pytest.mark.parametrize("value", [True, False])
def test_boolean_subschemas_become_empty(value: bool) -> None:
    assert sanitize_schema({"type": "object", "properties": {"x": value}}) == {
        "type": "object",
        "properties": {"x": {}},
    }
