"""JSON parsing and JSON Schema validation for the loop: pure.

Errors are short strings of the form ``"$.path: message"``, in the order the
validator reports them (deterministic for a given schema), so they can be fed
back to the model and compared in traces. Compiled validators are memoised by
the schema's canonical JSON; the memo changes speed, never results.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Final, TypeAlias

import msgspec

from helikon._json import JsonObject, JsonValue
from helikon._normal import normal_form
from helikon.errors import NormalFormError

#: A compiled check: instance -> schema errors (empty when valid).
Check: TypeAlias = Callable[[JsonValue], tuple[str, ...]]

_decoder = msgspec.json.Decoder()
#: ``msgspec.json.Decoder().decode``: JSON text to a value, raising ``msgspec.DecodeError``
#: (for a hot path that handles the error itself; else :func:`parse_json`).
decode: Final = _decoder.decode


def parse_json(text: str) -> tuple[JsonValue, str | None]:
    """Parse ``text`` as JSON: ``(value, None)`` or ``(None, error)``.

    >>> parse_json('{"a": 1}')
    ({'a': 1}, None)
    >>> parse_json('{"a":')[1]
    'invalid JSON: Input data was truncated'
    """
    try:
        value: JsonValue = _decoder.decode(text)
    except msgspec.DecodeError as exc:
        return None, f"invalid JSON: {exc}"
    return value, None


def schema_errors(instance: JsonValue, schema: JsonObject) -> tuple[str, ...]:
    """The ways ``instance`` fails ``schema`` (empty when it is valid).

    >>> schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    >>> schema_errors({"a": 1}, schema)
    ()
    >>> schema_errors({"a": "x"}, schema)
    ("$.a: 'x' is not of type 'integer'",)
    """
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1](instance)
    check = _compile(msgspec.json.encode(schema, order="sorted"))
    if len(_by_identity) >= _IDENTITIES:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, check)
    return check(instance)


def surely_valid(schema: JsonObject) -> Callable[[JsonValue], bool]:
    """A quick test of values against ``schema``: True only for a value that
    fits it (``schema_errors`` of it is empty); False says nothing (ask
    :func:`schema_errors`). For a caller that keeps it (it is compiled here)."""
    return _surely_valid(msgspec.json.encode(schema, order="sorted"))


#: The checker of each schema object met lately, by identity: a tool's schema
#: is one object for the whole run, so its checker is found without encoding
#: it again (the entry holds the schema, so its id is not reused meanwhile).
_by_identity: dict[int, tuple[JsonObject, Callable[[JsonValue], tuple[str, ...]]]] = {}
_IDENTITIES = 256


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be used to check values (``None``: it can): it
    is not JSON data in normal form, not an object, or not a valid JSON
    Schema of its draft (a typo'd ``type``, a ``pattern`` that is no regular
    expression). The problem names its path in the schema.

    An agent checks its tools' schemas with this when it is built, so
    :func:`schema_errors` never meets a schema it cannot compile.

    >>> schema_problem({"type": "object"}) is None
    True
    >>> schema_problem({"type": "object", "properties": {"n": {"type": "integr"}}})
    "$.properties.n.type: 'integr' is not valid under any of the given schemas"
    """
    try:
        normal = normal_form(schema)
    except NormalFormError as exc:
        return str(exc)
    if not isinstance(normal, dict):
        return f"$: a schema must be a JSON object, not {type(normal).__name__}"
    return _schema_problem(msgspec.json.encode(normal, order="sorted"))


@lru_cache(maxsize=1024)
def _schema_problem(canonical: bytes) -> str | None:
    import jsonschema

    schema = msgspec.json.decode(canonical)
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
        validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
        for _ in validator.iter_errors({}):  # resolves what a first check needs ($ref at the top)
            pass
    except jsonschema.SchemaError as exc:
        return f"{exc.json_path}: {exc.message}"
    except Exception as exc:  # an unresolvable $ref, a regex re cannot compile, ...
        return f"$: {type(exc).__name__}: {exc}"
    return None


@lru_cache(maxsize=1024)
def _compile(canonical: bytes) -> Check:
    schema = msgspec.json.decode(canonical)
    fast = _fast_check(schema)
    full = _jsonschema_check(schema)
    if fast is None:
        return full

    def check(instance: JsonValue) -> tuple[str, ...]:
        # The fast path only ever says "valid"; anything else gets the full
        # validator so messages are always jsonschema's.
        if fast(instance):
            return ()
        return full(instance)

    return check


@lru_cache(maxsize=1024)
def _surely_valid(canonical: bytes) -> Callable[[JsonValue], bool]:
    fast = _fast_check(msgspec.json.decode(canonical))
    if fast is not None:
        return fast
    full = _compile(canonical)
    return lambda instance: not full(instance)


def _jsonschema_check(schema: JsonObject) -> Check:
    import jsonschema

    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)

    def check(instance: JsonValue) -> tuple[str, ...]:
        return tuple(f"{error.json_path}: {error.message}" for error in validator.iter_errors(instance))

    return check


# -- fast path ---------------------------------------------------------------
#
# Tool argument schemas are overwhelmingly flat objects of scalars. For those
# a hand-compiled check answers "valid" in about a microsecond, where
# jsonschema takes about ten. It covers a closed set of keywords; a schema
# with any other keyword gets no fast path.

#: The exact types each JSON Schema type takes (an "integer" takes an integral float too).
_KINDS: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({type(None)}),
}
_LEAF_KEYS = frozenset({"type", "description", "title", "default", "examples"})
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title"})

#: A leaf's check: the exact types it takes, and whether it takes an integral float.
_Leaf: TypeAlias = tuple[frozenset[type], bool]


def _fast_leaf(schema: JsonValue) -> _Leaf | None:
    if not isinstance(schema, dict) or not set(schema) <= _LEAF_KEYS:
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        kinds = [kind]
    elif isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
        kinds = kind
    else:
        return None
    if not all(k in _KINDS for k in kinds):
        return None
    return frozenset().union(*(_KINDS[k] for k in kinds)), "integer" in kinds


def _fast_check(schema: JsonValue) -> Callable[[JsonValue], bool] | None:
    if not isinstance(schema, dict) or schema.get("type") != "object" or not set(schema) <= _OBJECT_KEYS:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    # (``extra`` is ``True`` or ``False`` itself: ``0 == False`` but jsonschema reads a
    # falsy ``0`` as closed, a truthy ``1`` as open; any other value is not for this check)
    if not isinstance(properties, dict) or not isinstance(required, list) or type(extra) is not bool:
        return None
    leaves: dict[str, _Leaf] = {}
    for name, sub in properties.items():
        leaf = _fast_leaf(sub)
        if leaf is None:
            return None
        leaves[name] = leaf
    required_names = tuple(required)
    closed = extra is False

    def fast(instance: JsonValue) -> bool:
        if type(instance) is not dict:
            return False
        for name in required_names:
            if name not in instance:
                return False
        for key, value in instance.items():
            leaf = leaves.get(key)
            if leaf is None:
                if closed:
                    return False
            elif type(value) not in leaf[0] and not (
                leaf[1] and isinstance(value, float) and value.is_integer()
            ):
                return False
        return True

    return fast


__all__ = ["decode", "parse_json", "schema_errors", "schema_problem", "surely_valid"]
