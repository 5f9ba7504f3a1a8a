"""JSON Schema from type hints (helikon.tools._schema, _models, _docstrings) and JSON conversion (_convert).

Every model kind (attrs, msgspec Struct, dataclass, TypedDict) gets the same
schema for the same fields, descriptions come from metadata, msgspec.Meta,
attribute docstrings and ``Attributes:`` sections, and every schema produced
here accepts the JSON form of a real instance (checked with jsonschema).
"""

import dataclasses
import datetime
import enum
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict

import attrs
import jsonschema.validators
import msgspec
import pytest

from helikon._json import JsonObject, JsonValue
from helikon.errors import ConfigError
from helikon.tools import convert, to_json, type_schema
from helikon.tools._convert import ConversionError, accepts_none, is_plain
from helikon.tools._docstrings import parse_docstring
from helikon.tools._models import field_docs, model_fields
from helikon.tools._schema import SchemaBuilder


def errors(schema: JsonObject, instance: Any) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [e.message for e in validator.iter_errors(instance)]


# -- models of every kind ----------------------------------------------------


class Color(enum.Enum):
    """A color."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class AttrsPoint:
    x: int = attrs.field(metadata={"description": "Horizontal position."})
    y: int = 0
    """Vertical position."""


class StructPoint(msgspec.Struct):
    x: Annotated[int, msgspec.Meta(description="Horizontal position.")]
    y: int = 0
    """Vertical position."""


@dataclasses.dataclass
class DataPoint:
    x: int = dataclasses.field(metadata={"description": "Horizontal position."})
    y: int = 0
    """Vertical position."""


class DictPoint(TypedDict):
    """A point.

    Attributes:
        x: Horizontal position.
    """

    x: int
    y: NotRequired[int]
    """Vertical position."""


POINTS = [AttrsPoint, StructPoint, DataPoint, DictPoint]


@pytest.mark.parametrize("cls", POINTS, ids=lambda c: c.__name__)
def test_every_model_kind_gives_the_same_closed_object_schema(cls: type) -> None:
    schema = type_schema(cls)
    assert schema["title"] == cls.__name__
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["x", "y"]
    assert schema["required"] == ["x"]
    assert schema["properties"]["x"]["description"] == "Horizontal position."
    assert schema["properties"]["y"]["description"] == "Vertical position."
    assert schema["properties"]["x"]["type"] == "integer"


@pytest.mark.parametrize("cls", [AttrsPoint, StructPoint, DataPoint], ids=lambda c: c.__name__)
def test_defaults_appear_in_the_schema(cls: type) -> None:
    assert type_schema(cls)["properties"]["y"]["default"] == 0


@pytest.mark.parametrize("cls", POINTS, ids=lambda c: c.__name__)
def test_convert_builds_each_model_kind(cls: type) -> None:
    value: Any = convert({"x": 3}, cls)
    if cls is DictPoint:
        assert value == {"x": 3}
    else:
        assert isinstance(value, cls)
        assert (value.x, value.y) == (3, 0)  # type: ignore[attr-defined]
    assert to_json(convert({"x": 3, "y": 4}, cls)) == {"x": 3, "y": 4}


def test_class_docstring_becomes_the_description_but_not_a_generated_dataclass_one() -> None:
    assert type_schema(DictPoint)["description"] == "A point."
    assert "description" not in type_schema(DataPoint)


# -- descriptions ------------------------------------------------------------


@attrs.frozen
class Described:
    """Things with descriptions.

    Attributes:
        a: From the Attributes section.
        b: Loses to the attribute docstring.
    """

    a: str
    b: str
    """From the attribute docstring."""
    c: Annotated[str, msgspec.Meta(description="From msgspec.Meta.")]
    """Loses to the Meta description."""


def test_description_precedence() -> None:
    props = type_schema(Described)["properties"]
    assert props["a"]["description"] == "From the Attributes section."
    assert props["b"]["description"] == "From the attribute docstring."
    assert props["c"]["description"] == "From msgspec.Meta."


def test_field_docs_tolerate_missing_source() -> None:
    namespace: dict[str, Any] = {"attrs": attrs}
    exec("@attrs.frozen\nclass Hidden:\n    a: int\n    'doc'\n", namespace)
    hidden = namespace["Hidden"]
    assert field_docs(hidden) == {}
    assert type_schema(hidden)["properties"]["a"] == {"type": "integer"}


def test_parse_docstring_summary_args_and_sections() -> None:
    doc = parse_docstring(
        """Look up   spending
        for a month.

        Second paragraph.

        Args:
            category (str): Spending category,
                e.g. "Dining".
            *rest: Ignored.

        Returns:
            The total.
        """
    )
    assert doc.summary == "Look up spending for a month.\n\nSecond paragraph."
    assert doc.args == (("category", 'Spending category, e.g. "Dining".'), ("rest", "Ignored."))
    assert parse_docstring(None).summary == ""


# -- the type table ----------------------------------------------------------

UserId = NewType("UserId", str)


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (JsonValue, {}),
        (UserId, {"type": "string"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - Optional is supported too
        (int | str, {"type": ["integer", "string"]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x", None], {"type": ["integer", "string", "null"], "enum": [1, "x", None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level | None, {"type": ["integer", "null"], "enum": [1, 2, None]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Mapping[str, Any], {"type": "object"}),
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (
            Annotated[int, msgspec.Meta(ge=0, le=10, description="Score.")],
            {"type": "integer", "minimum": 0, "maximum": 10, "description": "Score."},
        ),
        (
            Annotated[str, msgspec.Meta(min_length=1, max_length=5, pattern="^[a-z]+$")],
            {"type": "string", "pattern": "^[a-z]+$", "minLength": 1, "maxLength": 5},
        ),
        (
            Annotated[list[int], msgspec.Meta(min_length=1)],
            {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        ),
        (AttrsPoint | None, None),  # checked below: anyOf with a null branch
    ],
)
def test_type_table(hint: object, expected: dict[str, Any] | None) -> None:
    schema = type_schema(hint)
    if expected is None:
        assert schema["anyOf"][1] == {"type": "null"}
        assert schema["anyOf"][0]["properties"]["x"]["type"] == "integer"
    else:
        assert schema == expected


@pytest.mark.parametrize(
    "hint",
    [bytes, dict[int, str], complex, list[bytes], Literal[b"x"], "Missing"],
    ids=repr,
)
def test_unsupported_hints_raise_config_error(hint: object) -> None:
    with pytest.raises(ConfigError):
        type_schema(hint)


@attrs.frozen
class HasBadField:
    blob: bytes


def test_unsupported_field_is_named_in_the_error() -> None:
    with pytest.raises(ConfigError, match=r"bytes.*HasBadField\.blob"):
        type_schema(HasBadField)


# -- nesting and recursion ---------------------------------------------------


@attrs.frozen
class Line:
    """A segment."""

    start: AttrsPoint
    end: StructPoint
    color: Color = Color.RED
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Tree:
    value: int
    children: "list[Tree]" = dataclasses.field(default_factory=list)


@attrs.frozen
class Forest:
    trees: tuple[Tree, ...]
    biggest: Tree | None = None


def test_nested_models_are_inlined_without_defs() -> None:
    schema = type_schema(Line)
    assert "$defs" not in schema
    assert schema["properties"]["start"]["properties"]["x"]["description"] == "Horizontal position."
    assert schema["properties"]["end"]["required"] == ["x"]
    assert schema["properties"]["color"] == {"type": "string", "enum": ["red", "green"], "default": "red"}
    assert schema["properties"]["tags"]["default"] == []


def test_recursive_model_uses_defs_and_ref() -> None:
    schema = type_schema(Tree)
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert schema["$defs"]["Tree"]["properties"]["value"] == {"type": "integer"}
    assert "default" not in schema["properties"]["children"]  # a factory default is not shown


def test_recursive_model_nested_in_another_is_referenced_everywhere() -> None:
    schema = type_schema(Forest)
    assert schema["properties"]["trees"]["items"] == {"$ref": "#/$defs/Tree"}
    assert schema["properties"]["biggest"]["anyOf"][0] == {"$ref": "#/$defs/Tree"}
    assert list(schema["$defs"]) == ["Tree"]


def test_schema_keys_are_deterministic() -> None:
    first = json.dumps(type_schema(Forest))
    assert all(json.dumps(type_schema(Forest)) == first for _ in range(3))


def test_builder_shares_defs_between_several_types() -> None:
    builder = SchemaBuilder()
    one, two = builder.schema(Tree), builder.schema(list[Tree])
    assert one == {"$ref": "#/$defs/Tree"} and two["items"] == one
    defs: Any = builder.finish({})["$defs"]
    assert list(defs) == ["Tree"]


# -- instances validate against their schemas --------------------------------


class Tagged(msgspec.Struct, tag=True):
    name: str


class Renamed(msgspec.Struct, rename="camel"):
    first_name: str


@attrs.frozen
class Everything:
    when: datetime.datetime
    day: datetime.date
    ident: uuid.UUID
    level: Level
    mode: Literal["fast", "slow"]
    pair: tuple[int, str]
    scores: dict[str, float]
    line: Line
    forest: Forest
    tagged: Tagged
    renamed: Renamed
    maybe: int | None = None
    labels: frozenset[str] = frozenset()


EVERYTHING = Everything(
    when=datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC),
    day=datetime.date(2024, 5, 1),
    ident=uuid.UUID(int=7),
    level=Level.HIGH,
    mode="slow",
    pair=(1, "a"),
    scores={"a": 1.5},
    line=Line(AttrsPoint(1, 2), StructPoint(3), tags=("t",)),
    forest=Forest((Tree(1, [Tree(2)]),), Tree(3)),
    tagged=Tagged("x"),
    renamed=Renamed("Ada"),
    labels=frozenset({"z"}),
)

INSTANCES = [
    AttrsPoint(1, 2),
    StructPoint(1),
    DataPoint(5),
    Line(AttrsPoint(1), StructPoint(2), Color.GREEN, ("a", "b")),
    Tree(1, [Tree(2, [Tree(3)])]),
    Forest((Tree(1),)),
    EVERYTHING,
]


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_schema_accepts_the_json_form_of_an_instance(instance: object) -> None:
    schema = type_schema(type(instance))
    assert errors(schema, to_json(instance)) == []


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_convert_round_trips_the_json_form(instance: object) -> None:
    assert convert(to_json(instance), type(instance)) == instance


def test_schema_rejects_what_the_type_rejects() -> None:
    schema = type_schema(Line)
    assert errors(schema, {"start": {"x": 1}, "end": {"x": 1}, "color": "blue"})
    assert errors(schema, {"start": {"x": 1}, "end": {"x": 1}, "extra": 1})
    assert errors(schema, {"start": {"x": "1"}, "end": {"x": 1}})


def test_tagged_struct_requires_its_tag() -> None:
    schema = type_schema(Tagged)
    assert schema["properties"]["type"] == {"enum": ["Tagged"]}
    assert schema["required"] == ["type", "name"]
    with pytest.raises(ValueError, match="expected 'Tagged'"):
        convert({"type": "Other", "name": "x"}, Tagged)


def test_renamed_struct_fields_use_their_encoded_names() -> None:
    assert list(type_schema(Renamed)["properties"]) == ["firstName"]
    assert convert({"firstName": "Ada"}, Renamed) == Renamed("Ada")
    assert [f.init_name for f in model_fields(Renamed)] == ["first_name"]


# -- convert and to_json -----------------------------------------------------


def test_convert_error_messages_name_the_path() -> None:
    with pytest.raises(ConversionError) as info:
        convert({"trees": [{"value": 1, "children": [{"value": "two"}]}]}, Forest)
    assert str(info.value) == "$.trees[0].children[0].value: expected integer, got string"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        ("x", int, "expected integer, got string"),
        (True, int, "expected integer, got boolean"),
        (1, bool, "expected boolean, got integer"),
        ("purple", Color, "expected one of 'red', 'green', got 'purple'"),
        ([1], tuple[int, int], "expected an array of 2 items, got 1"),
        ({"x": 1, "z": 2}, AttrsPoint, "unexpected property 'z'"),
        ({"y": 1}, DataPoint, "missing required property 'x'"),
        ("yesterday", datetime.date, "expected an ISO 8601 date, got 'yesterday'"),
        ("nope", list[int], "expected array, got string"),
    ],
)
def test_convert_rejects_mismatches(value: object, hint: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        convert(value, hint)


def test_convert_widens_and_narrows_numbers() -> None:
    assert convert(1, float) == 1.0 and isinstance(convert(1, float), float)
    assert convert(2.0, int) == 2 and isinstance(convert(2.0, int), int)


def test_convert_treats_null_as_absent_for_optional_non_nullable_fields() -> None:
    """Strict mode sends ``null`` for an optional field the model left out."""
    assert convert({"x": 1, "y": None}, AttrsPoint) == AttrsPoint(1, 0)


def test_convert_passes_json_values_through() -> None:
    value = {"a": [1, {"b": None}]}
    assert convert(value, JsonValue) is value


@attrs.frozen
class Validated:
    n: int = attrs.field(validator=attrs.validators.ge(0))


def test_constructor_validation_failures_become_conversion_errors() -> None:
    with pytest.raises(ConversionError, match="invalid Validated"):
        convert({"n": -1}, Validated)


def test_to_json_gives_json_round_trip_values() -> None:
    assert to_json("text") == "text"
    assert to_json(Color.RED) == "red"
    assert to_json((1, {2, 3} - {3})) == [1, [2]]
    assert to_json(EVERYTHING)["when"] == "2024-05-01T12:30:00Z"  # type: ignore[index,call-overload]
    with pytest.raises(TypeError, match="has no JSON form"):
        to_json(object())


def test_plainness_decides_which_parameters_skip_conversion() -> None:
    assert all(is_plain(t) for t in (str, int, float, bool, JsonValue, list[int], dict[str, Any], int | None))
    assert not any(is_plain(t) for t in (Color, tuple[int, ...], AttrsPoint, datetime.date, set[int]))
    assert accepts_none(Any) and accepts_none(Literal["a", None]) and not accepts_none(str)
