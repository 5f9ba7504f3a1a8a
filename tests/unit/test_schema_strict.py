"""helikon.schema.strict: OpenAI strict-mode normalisation of JSON Schemas."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import enum
from typing import Any, Literal

import attrs
import jsonschema.validators
import msgspec
import pytest

from helikon.schema import nullable, strict
from helikon.tools import to_json, tool, type_schema


def errors(schema: dict[str, Any], instance: Any) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [e.message for e in validator.iter_errors(instance)]


FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "A city."},
        "days": {"type": "integer", "default": 3},
        "unit": {"type": "string", "enum": ["c", "f"]},
    },
    "required": ["city"],
}


def test_flat_object_lists_every_property_and_makes_optional_ones_nullable() -> None:
    assert strict(FLAT) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "A city."},
            "days": {"type": ["integer", "null"]},
            "unit": {"type": ["string", "null"], "enum": ["c", "f", None]},
        },
        "required": ["city", "days", "unit"],
        "additionalProperties": False,
    }


def test_input_is_never_mutated() -> None:
    nested: dict[str, Any] = {
        "type": "object",
        "properties": {"inner": FLAT, "list": {"type": "array", "items": FLAT}},
    }
    before = copy.deepcopy(nested)
    out = strict(nested)
    assert nested == before
    out["properties"]["list"]["items"]["properties"]["city"]["type"] = "changed"
    assert nested == before


def test_nested_objects_in_properties_items_and_combinators_are_rewritten() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "child": FLAT,
            "many": {"type": "array", "items": FLAT},
            "either": {"anyOf": [FLAT, {"type": "string"}]},
            "all": {"allOf": [FLAT]},
            "pair": {"type": "array", "prefixItems": [FLAT, FLAT]},
        },
        "required": ["child", "many", "either", "all", "pair"],
    }
    out = strict(schema)
    expected = strict(FLAT)
    props = out["properties"]
    assert props["child"] == expected
    assert props["many"]["items"] == expected
    assert props["either"]["anyOf"][0] == expected
    assert props["all"]["allOf"][0] == expected
    assert props["pair"]["prefixItems"] == [expected, expected]


def test_optional_nested_object_is_wrapped_in_any_of_with_null() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"child": {**FLAT, "description": "Child."}}}
    child = strict(schema)["properties"]["child"]
    assert child["description"] == "Child."
    assert child["anyOf"][1] == {"type": "null"}
    assert child["anyOf"][0]["required"] == ["city", "days", "unit"]


def test_defs_and_definitions_are_rewritten_too() -> None:
    """Beyond the book's normaliser: $defs/definitions are traversed."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}, "old": {"$ref": "#/definitions/Old"}},
        "required": ["root"],
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "definitions": {"Old": {"type": "object", "properties": {"x": {"type": "number", "default": 1}}}},
    }
    out = strict(schema)
    assert out["properties"]["old"] == {"anyOf": [{"$ref": "#/definitions/Old"}, {"type": "null"}]}
    node = out["$defs"]["Node"]
    assert node["additionalProperties"] is False
    assert node["required"] == ["next"]
    assert node["properties"]["next"] == {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
    assert out["definitions"]["Old"]["properties"]["x"] == {"type": ["number", "null"]}
    assert errors(out, {"root": {"next": {"next": None}}, "old": None}) == []
    assert errors(out, {"root": {"next": {}}, "old": None})  # "next" is required now


def test_default_is_removed_but_a_property_named_default_is_kept() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"default": {"type": "string", "default": "x"}, "required": {"type": "boolean"}},
        "required": ["default", "required"],
        "default": {},
    }
    out = strict(schema)
    assert "default" not in out
    assert out["properties"] == {"default": {"type": "string"}, "required": {"type": "boolean"}}


def test_maps_are_closed_because_strict_mode_cannot_express_them() -> None:
    out = strict({"type": "object", "additionalProperties": {"type": "integer"}})
    assert out == {"type": "object", "additionalProperties": False}


def test_strict_is_idempotent() -> None:
    for schema in (FLAT, type_schema(Order), type_schema(Tree)):
        once = strict(schema)
        assert strict(once) == once


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, {"type": ["string", "null"]}),
        ({"type": ["string", "integer"]}, {"type": ["string", "integer", "null"]}),
        ({"type": "null"}, {"type": "null"}),
        ({}, {}),
        ({"description": "anything"}, {"description": "anything"}),
        ({"const": "x"}, {"anyOf": [{"const": "x"}, {"type": "null"}]}),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        ),
        (
            {"anyOf": [{"type": "null"}, {"type": "string"}]},
            {"anyOf": [{"type": "null"}, {"type": "string"}]},
        ),
        ({"type": ["string", "null"], "enum": ["a"]}, {"type": ["string", "null"], "enum": ["a", None]}),
    ],
)
def test_nullable(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    assert nullable(schema) == expected
    assert errors(nullable(schema), None) == []


# -- strict(type_schema(T)) still accepts a full instance ----------------------


class Status(enum.Enum):
    OPEN = "open"
    PAID = "paid"


@attrs.frozen
class Line:
    sku: str
    quantity: int = 1
    note: str | None = None


class Address(msgspec.Struct):
    street: str
    zip_code: str | None = None


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=list)


@attrs.frozen
class Order:
    """An order."""

    id: str
    status: Status
    lines: tuple[Line, ...]
    ship_to: Address | None
    placed: datetime.date
    priority: Literal["low", "high"] = "low"
    tree: Tree | None = None


FULL_ORDERS = [
    Order(
        "o1",
        Status.PAID,
        (Line("a", 2, "gift"), Line("b", 1, None)),
        Address("Main St", "12345"),
        datetime.date(2024, 5, 1),
        "high",
        Tree(1, [Tree(2, [])]),
    ),
    Order("o2", Status.OPEN, (), None, datetime.date(2024, 1, 2), "low", None),
]


@pytest.mark.parametrize("order", FULL_ORDERS, ids=lambda o: o.id)
def test_strict_type_schema_accepts_a_full_instance(order: Order) -> None:
    schema = type_schema(Order)
    instance = to_json(order)
    assert errors(schema, instance) == []
    assert errors(strict(schema), instance) == []


def test_strict_type_schema_requires_every_field_but_accepts_null_for_optional_ones() -> None:
    schema = strict(type_schema(Order))
    partial = {"id": "o3", "status": "open", "lines": [{"sku": "x"}], "ship_to": None, "placed": "2024-05-01"}
    assert errors(type_schema(Order), partial) == []
    assert errors(schema, partial)  # strict: every property must be present
    lines = [{"sku": "x", "quantity": None, "note": None}]
    full = {**partial, "priority": None, "tree": None, "lines": lines}
    assert errors(schema, full) == []


def test_strict_tool_parameters_round_trip_through_invoke() -> None:
    """A strict-mode call sends null for optional parameters; the tool uses its default."""
    import trio

    from helikon.cancel import CancellationToken
    from helikon.context import Actions, SessionState, ToolContext, TracerHandle
    from helikon.ids import CallId, RunId

    @tool
    async def book(city: str, nights: int = 1, line: Line | None = None) -> str:
        """Book a hotel."""
        return f"{city}:{nights}:{line.quantity if line else '-'}"

    params = strict(book.parameters)
    args = {"city": "Oslo", "nights": None, "line": {"sku": "x", "quantity": None, "note": None}}
    assert errors(params, args) == []
    ctx: ToolContext[None] = ToolContext(
        None, SessionState(), Actions(), CancellationToken(), TracerHandle(), CallId("c"), RunId("r"), "a"
    )

    async def main() -> Any:
        return await book.invoke(ctx, args)

    assert trio.run(main) == "Oslo:1:1"
