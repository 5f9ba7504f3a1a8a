"""Hypothesis strategies for helikon's carriers, agents and model turns.

Use them in your own property tests::

    from hypothesis import given
    from helikon.testing.strategies import agent_specs, turn_plans

It owns generation only; nothing here decides anything the core decides.
The rules it follows:

- Generated JSON is what a real wire carries: finite floats, integers a
  double holds exactly, strings without lone surrogates, so values survive
  ``msgspec`` and every provider's JSON.
- Argument schemas come from one small JSON Schema subset (see
  :func:`arg_schemas`); :func:`matching_args` and :func:`non_matching_args`
  understand exactly that subset, so "matching" and "violating" are true by
  construction, not by filtering.
- A generated model turn is a :class:`TurnPlan`: the event list plus what the
  loop must make of it (text, reasoning parts, calls in first-appearance
  order, summed usage), so a test can compare the aggregation with the plan.

This module imports ``hypothesis`` and is only imported explicitly.
"""

from __future__ import annotations

import enum
import itertools
import operator
import types
import typing
import zlib
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any, Final, Literal, TypeVar

import attrs
import msgspec
from hypothesis import strategies as st

from helikon._json import JsonObject, JsonValue
from helikon.config import RunConfig
from helikon.effects import (
    ApprovalPending,
    ApprovalRequest,
    RunInterrupted,
    ToolOutcome,
    ToolRaised,
    ToolReturned,
)
from helikon.errors import (
    Cancelled,
    ContextLengthExceeded,
    Denied,
    InvalidArgs,
    ModelError,
    ModelFailure,
    OtherModelFailure,
    RateLimited,
    Refused,
    TimedOut,
    ToolCrashed,
    ToolError,
    ToolFailure,
    TransportFailure,
    Unavailable,
)
from helikon.ids import CallId, RunId, derive_call_id
from helikon.items import (
    AgentInput,
    AssistantMessage,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.loop import AgentSpec, HandoffSpec, OutputSchema, handoff_slug
from helikon.model import (
    Finish,
    FinishReason,
    JsonSchema,
    ModelEvent,
    ModelSettings,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    ToolDef,
    ToolEffect,
    Usage,
)

T = TypeVar("T")

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


def _encode(value: object) -> str:
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


@st.composite
def _object_instances(draw: st.DrawFn, schema: Mapping[str, JsonValue]) -> JsonValue:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    assert isinstance(properties, Mapping) and isinstance(required, list)
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
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    assert isinstance(properties, Mapping) and isinstance(required, list)
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
        .map(_encode)
        .flatmap(lambda text: st.integers(1, len(text) - 1).map(lambda end: text[:end]))
    )
    prose = st.sampled_from(["{", "{'a': 1}", "not json", '{"a": }', "[1, 2", "{} {}"])
    return st.one_of(cut, prose)


# -- tools -------------------------------------------------------------------


def tool_defs(name: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[ToolDef]:
    """A tool definition with an :func:`arg_schemas` parameter schema."""
    return st.builds(
        ToolDef,
        name=name if name is not None else tool_names(),
        description=st.text(max_size=20),
        parameters=arg_schemas(),
        output_schema=st.none() | arg_schemas(max_properties=2),
        effect=st.sampled_from(ToolEffect),
    )


def tool_def_lists(min_size: int = 0, max_size: int = 3) -> st.SearchStrategy[tuple[ToolDef, ...]]:
    """A tuple of tool definitions with distinct names."""
    return st.lists(tool_defs(), min_size=min_size, max_size=max_size, unique_by=lambda t: t.name).map(tuple)


@cache
def tool_failures() -> st.SearchStrategy[ToolFailure]:
    """Why a tool call failed: invalid arguments, a denial or a crash."""
    return st.one_of(
        st.builds(InvalidArgs, st.lists(st.text(max_size=10), min_size=1, max_size=2).map(tuple)),
        st.builds(Denied, st.text(max_size=10)),
        st.builds(ToolCrashed, st.text(max_size=10)),
    )


def tool_errors() -> st.SearchStrategy[ToolError]:
    """A :class:`ToolError` a tool function raises."""
    return tool_failures().map(ToolError)


@cache
def tool_return_values() -> st.SearchStrategy[JsonValue]:
    """What a tool function returns: text or any JSON value."""
    return st.one_of(st.text(max_size=20), json_values(max_leaves=4))


def tool_outcomes(call_id: CallId | str, approvals: bool = False) -> st.SearchStrategy[ToolOutcome]:
    """How tool call ``call_id`` ended: returned, raised, or (with ``approvals``) awaiting approval."""
    cid = CallId(call_id)
    ended: list[st.SearchStrategy[ToolOutcome]] = [
        st.builds(
            ToolReturned,
            st.just(cid),
            tool_return_values().map(lambda v: v if isinstance(v, str) else _encode(v)),
        ),
        st.builds(ToolRaised, st.just(cid), tool_failures()),
    ]
    if approvals:
        ended.append(st.builds(ApprovalPending, st.just(cid), st.text(max_size=12)))
    return st.one_of(ended)


@attrs.frozen
class ScriptedTool:
    """A deterministic tool function for :class:`~helikon.testing.TestInterpreter`.

    The answer depends only on the arguments (a checksum of their canonical
    JSON picks one of ``answers``), so two runs with the same calls agree. A
    :data:`~helikon.errors.ToolFailure` answer is raised as a ``ToolError``.
    """

    answers: tuple[JsonValue | ToolFailure, ...]

    def __call__(self, args: JsonObject) -> JsonValue:
        key = zlib.crc32(msgspec.json.encode(args, order="sorted"))
        answer = self.answers[key % len(self.answers)]
        if isinstance(answer, InvalidArgs | Denied | ToolCrashed):
            raise ToolError(answer)
        return answer


def tool_fns(raises: bool = True) -> st.SearchStrategy[ScriptedTool]:
    """A :class:`ScriptedTool` returning values (and raising ``ToolError`` if ``raises``)."""
    answer: st.SearchStrategy[JsonValue | ToolFailure] = (
        st.one_of(tool_return_values(), tool_failures()) if raises else tool_return_values()
    )
    return st.lists(answer, min_size=1, max_size=3).map(lambda a: ScriptedTool(tuple(a)))


# -- model turns -------------------------------------------------------------


class CallKind(enum.Enum):
    """What a generated tool call is, as the loop will judge it."""

    #: A known tool with arguments that match its schema.
    VALID = "valid"
    #: A known tool with arguments that are not JSON.
    MALFORMED_JSON = "malformed_json"
    #: A known tool with JSON arguments that break its schema.
    SCHEMA_VIOLATION = "schema_violation"
    #: A tool the agent does not have.
    UNKNOWN_TOOL = "unknown_tool"


@attrs.frozen
class PlannedCall:
    """A tool call of a generated turn: ``call_id`` is None when the provider
    sent none (the loop derives one)."""

    call_id: str | None
    name: str
    arguments: str
    kind: CallKind


#: How a generated turn keys its tool-call fragments.
Keying = Literal["index", "call_id", "sequential"]


@attrs.frozen
class TurnPlan:
    """A generated model turn and what aggregating it must give.

    Args:
        events: the model events, in stream order.
        text: the answer text.
        reasoning: the reasoning parts.
        calls: the tool calls, in the order they first appear.
        usage: the sum of the usage events.
        finish: the finish reason, if the stream sent one.
        keying: how the call fragments were keyed.
        text_parts: the answer's text parts (``text`` split where a
            :class:`~helikon.model.TextBreak` stands).
    """

    events: tuple[ModelEvent, ...]
    text: str = ""
    reasoning: tuple[ReasoningPart, ...] = ()
    calls: tuple[PlannedCall, ...] = ()
    usage: Usage = attrs.field(factory=Usage)
    finish: FinishReason | None = None
    keying: Keying = "index"
    text_parts: tuple[str, ...] = ()

    def tool_calls(self, run_id: RunId, turn: int) -> tuple[ToolCall, ...]:
        """The calls as the loop must see them on ``turn`` of run ``run_id``."""
        return tuple(
            ToolCall(CallId(c.call_id) if c.call_id else derive_call_id(run_id, turn, i), c.name, c.arguments)
            for i, c in enumerate(self.calls)
        )


@cache
def usages(max_tokens: int = 10_000) -> st.SearchStrategy[Usage]:
    """A usage increment."""
    n = st.integers(0, max_tokens)
    return st.builds(Usage, n, n, n, n)


def _split(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut into fragments (possibly with an empty first one)."""
    if len(text) < 2:
        return st.just([text])
    return st.tuples(st.lists(st.integers(1, len(text) - 1), max_size=3, unique=True), st.booleans()).map(
        lambda cuts_lead: _cut(text, sorted(cuts_lead[0]), cuts_lead[1])
    )


def _cut(text: str, cuts: list[int], empty_first: bool) -> list[str]:
    bounds = [0, *cuts, len(text)]
    parts = [text[a:b] for a, b in itertools.pairwise(bounds)]
    return ["", *parts] if empty_first else parts


@st.composite
def _interleave(draw: st.DrawFn, streams: list[list[T]]) -> list[T]:
    """Merge ``streams`` in a drawn order, keeping each stream's own order."""
    queues = [list(s) for s in streams if s]
    merged: list[T] = []
    while queues:
        i = draw(st.integers(0, len(queues) - 1))
        merged.append(queues[i].pop(0))
        if not queues[i]:
            del queues[i]
    return merged


@st.composite
def _planned_call(draw: st.DrawFn, tools: tuple[ToolDef, ...], kinds: tuple[CallKind, ...]) -> PlannedCall:
    names = {t.name for t in tools}
    available = [k for k in kinds if k is CallKind.UNKNOWN_TOOL or tools]
    if not any(t.parameters.get("type") == "object" for t in tools):
        available = [k for k in available if k is not CallKind.SCHEMA_VIOLATION]
    if not available:
        raise ValueError("no call kind can be generated for these tools")
    kind = draw(st.sampled_from(available))
    if kind is CallKind.UNKNOWN_TOOL:
        name = draw(tool_names().filter(lambda n: n not in names))
        return PlannedCall(None, name, _encode(draw(json_objects(max_leaves=3))), kind)
    candidates = (
        tools
        if kind is not CallKind.SCHEMA_VIOLATION
        else tuple(t for t in tools if t.parameters.get("type") == "object")
    )
    tool = draw(st.sampled_from(candidates))
    if kind is CallKind.VALID:
        arguments = _encode(draw(matching_args(tool.parameters)))
        if arguments == "{}" and draw(st.booleans()):
            arguments = ""  # no arguments at all: the loop reads it as {}
    elif kind is CallKind.MALFORMED_JSON:
        arguments = draw(malformed_json())
    else:
        arguments = _encode(draw(non_matching_args(tool.parameters)))
    return PlannedCall(None, tool.name, arguments, kind)


def _as_tool_defs(tools: Sequence[ToolDef | str]) -> tuple[ToolDef, ...]:
    return tuple(t if isinstance(t, ToolDef) else ToolDef(t, "", {}) for t in tools)


@attrs.define
class _Fragment:
    call: int
    first: bool
    arguments: str


@st.composite
def _turn_plans(
    draw: st.DrawFn,
    tools: tuple[ToolDef, ...],
    text: st.SearchStrategy[str] | None,
    reasoning: bool,
    min_calls: int,
    max_calls: int,
    kinds: tuple[CallKind, ...],
    finish: bool | None,
) -> TurnPlan:
    # Reasoning: blocks closed by a signature, the last one perhaps open.
    reasoning_chunks: list[ModelEvent] = []
    parts: list[ReasoningPart] = []
    if reasoning and draw(st.booleans()):
        blocks = draw(st.integers(1, 2))
        for b in range(blocks):
            chunks = draw(st.lists(st.text(max_size=8), min_size=1, max_size=3))
            signed = b < blocks - 1 or draw(st.booleans())
            signature = draw(st.text(min_size=1, max_size=6)) if signed else None
            reasoning_chunks.extend(ReasoningChunk(c) for c in chunks[:-1])
            reasoning_chunks.append(ReasoningChunk(chunks[-1], signature))
            parts.append(ReasoningPart("".join(chunks), signature))
    # Text: drawn whole, perhaps in several parts (a TextBreak between two), each streamed in pieces.
    answer = draw(text if text is not None else st.text(max_size=20))
    pieces = draw(_split(answer)) if draw(st.booleans()) else [answer]
    text_parts = tuple(p for p in pieces if p)
    text_chunks: list[ModelEvent] = []
    for k, part in enumerate(text_parts):
        text_chunks.extend([TextBreak()] if k else [])
        text_chunks.extend(TextChunk(p) for p in draw(_split(part)))
    # Tool calls, each fragmented; interleaved unless keyed sequentially.
    n_calls = draw(st.integers(min_calls, max_calls))
    planned = [draw(_planned_call(tools, kinds)) for _ in range(n_calls)]
    keying: Keying = draw(st.sampled_from(["index", "call_id", "sequential"]))
    # Distinct within the turn by construction (a suffix per call), not by filtering.
    ids: list[str | None] = [f"{draw(provider_call_ids())}{k}" for k in range(n_calls)]
    if keying == "index" or (keying == "sequential" and n_calls == 1):
        ids = [i if draw(st.booleans()) else None for i in ids]
    fragment_streams = [
        [_Fragment(c, k == 0, piece) for k, piece in enumerate(draw(_split(call.arguments)))]
        for c, call in enumerate(planned)
    ]
    if keying == "sequential":
        fragments = [f for stream in fragment_streams for f in stream]
    else:
        fragments = draw(_interleave(fragment_streams))
    order: list[int] = []
    for fragment in fragments:
        if fragment.first:
            order.append(fragment.call)
    base = draw(st.integers(0, 1))
    repeat_ids = draw(st.booleans())
    call_chunks: list[ModelEvent] = []
    for fragment in fragments:
        # Index keying may repeat the id on later fragments; call-id keying must.
        with_id = fragment.first or keying == "call_id" or (keying == "index" and repeat_ids)
        call_chunks.append(
            ToolCallChunk(
                index=base + order.index(fragment.call) if keying == "index" else None,
                call_id=ids[fragment.call] if with_id else None,
                name=planned[fragment.call].name if fragment.first else None,
                arguments=fragment.arguments,
            )
        )
    calls = tuple(attrs.evolve(planned[c], call_id=ids[c]) for c in order)
    body = draw(_interleave([reasoning_chunks, text_chunks, call_chunks]))
    # Usage increments anywhere; a finish (or none) last.
    usage = Usage()
    for increment in draw(st.lists(usages(), max_size=2)):
        body.insert(draw(st.integers(0, len(body))), increment)
        usage = usage + increment
    reason: FinishReason | None = None
    if finish is True or (finish is None and draw(st.booleans())):
        reason = FinishReason.TOOL_CALLS if calls else draw(st.sampled_from(FinishReason))
        body.append(Finish(reason, draw(st.none() | st.text(min_size=1, max_size=6))))
    return TurnPlan(tuple(body), answer, tuple(parts), calls, usage, reason, keying, text_parts)


def turn_plans(
    tools: Sequence[ToolDef | str] = (),
    *,
    text: st.SearchStrategy[str] | None = None,
    reasoning: bool = True,
    min_calls: int = 0,
    max_calls: int = 3,
    kinds: Collection[CallKind] = tuple(CallKind),
    finish: bool | None = None,
) -> st.SearchStrategy[TurnPlan]:
    """A model turn (as a :class:`TurnPlan`) for an agent with ``tools``.

    Turns mix reasoning (signed blocks), text and up to ``max_calls`` tool
    calls whose arguments are cut into fragments and interleaved across calls
    (keyed by index or by call id), with or without provider call ids, plus
    usage events and a finish. A tool given by name accepts any arguments.

    Args:
        tools: the tools the agent has.
        text: the answer text to stream (default: any short text).
        reasoning: whether reasoning chunks may appear.
        min_calls: the fewest tool calls.
        max_calls: the most tool calls.
        kinds: the kinds of calls to draw from.
        finish: force a ``Finish`` event (True), none (False), or either (None).
    """
    return _turn_plans(_as_tool_defs(tools), text, reasoning, min_calls, max_calls, tuple(kinds), finish)


def model_turns(tools: Sequence[ToolDef | str] = (), **options: Any) -> st.SearchStrategy[list[ModelEvent]]:
    """The event list of a model turn: :func:`turn_plans`' ``events``."""
    return turn_plans(tools, **options).map(lambda plan: list(plan.events))


def final_answers(schema: JsonObject, valid: bool | None = None) -> st.SearchStrategy[str]:
    """A structured-output answer's text: valid against ``schema`` or not.

    Invalid answers are cut-off JSON, prose, or JSON that breaks the schema.
    ``valid=None`` draws either.
    """
    good = matching_args(schema).map(_encode)
    bad = st.one_of(malformed_json(), non_matching_args(schema).map(_encode))
    if valid is None:
        return st.one_of(good, bad)
    return good if valid else bad


# -- model failures ----------------------------------------------------------


@cache
def model_failures() -> st.SearchStrategy[ModelFailure]:
    """Why a model call failed, one of every kind."""
    message = st.text(max_size=12)
    return st.one_of(
        st.builds(Unavailable, message),
        st.builds(RateLimited, message, st.none() | st.integers(0, 60_000)),
        st.builds(ContextLengthExceeded, message),
        st.builds(Refused, message),
        st.builds(TransportFailure, message),
        st.builds(OtherModelFailure, message, st.none() | st.integers(400, 599)),
    )


def model_errors() -> st.SearchStrategy[ModelError]:
    """A :class:`ModelError` a model (or a script) raises."""
    return model_failures().map(ModelError)


def interruptions() -> st.SearchStrategy[RunInterrupted]:
    """A run interrupted by cancellation or a timeout."""
    return st.one_of(
        st.just(RunInterrupted(Cancelled())),
        st.floats(0.001, 3600.0).map(lambda s: RunInterrupted(TimedOut(s))),
    )


# -- agents ------------------------------------------------------------------


def output_schemas() -> st.SearchStrategy[OutputSchema]:
    """A structured-output schema (an :func:`arg_schemas` object)."""
    return st.builds(OutputSchema, name=tool_names(), schema=arg_schemas(max_properties=3))


def run_configs(max_turns: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[RunConfig]:
    """A valid :class:`RunConfig` (few turns, so limits are reached)."""
    return st.builds(
        RunConfig,
        max_turns=max_turns if max_turns is not None else st.integers(1, 6),
        parallel_tool_call_limit=st.none() | st.integers(1, 4),
        max_agent_depth=st.integers(1, 8),
        timeout=st.none() | st.floats(0.1, 600.0),
    )


def model_settings() -> st.SearchStrategy[ModelSettings]:
    """Model settings, mostly defaults."""
    return st.one_of(
        st.just(ModelSettings()),
        st.builds(
            ModelSettings,
            temperature=st.none() | st.floats(0.0, 2.0),
            top_p=st.none() | st.floats(0.0, 1.0),
            max_output_tokens=st.none() | st.integers(1, 4096),
        ),
    )


def handoff_specs() -> st.SearchStrategy[HandoffSpec]:
    """A handoff to another agent, its transfer tool named by :func:`handoff_slug`."""
    return st.builds(_handoff, tool_names(), st.text(max_size=10))


def _handoff(target: str, description: str) -> HandoffSpec:
    return HandoffSpec(handoff_slug(target), target, description)


@st.composite
def _agent_specs(
    draw: st.DrawFn,
    tools: st.SearchStrategy[tuple[ToolDef, ...]],
    output: st.SearchStrategy[OutputSchema | None],
    dynamic_instructions: st.SearchStrategy[bool],
    config: st.SearchStrategy[RunConfig],
    handoffs: st.SearchStrategy[tuple[HandoffSpec, ...]],
    governance: st.SearchStrategy[bool],
) -> AgentSpec:
    own = draw(tools)
    taken = {t.name for t in own}
    return AgentSpec(
        name=draw(tool_names()),
        instructions=draw(st.none() | st.text(max_size=20)),
        dynamic_instructions=draw(dynamic_instructions),
        tools=own,
        settings=draw(model_settings()),
        output=draw(output),
        config=draw(config),
        model_id=draw(st.text(max_size=8)),
        # A transfer tool never shadows one of the agent's own tools.
        handoffs=tuple(h for h in draw(handoffs) if h.tool_name not in taken),
        input_guardrails=draw(governance),
        output_guardrails=draw(governance),
        hooks=draw(governance),
    )


def agent_specs(
    *,
    tools: st.SearchStrategy[tuple[ToolDef, ...]] | None = None,
    output: st.SearchStrategy[OutputSchema | None] | None = None,
    dynamic_instructions: st.SearchStrategy[bool] | None = None,
    config: st.SearchStrategy[RunConfig] | None = None,
    handoffs: st.SearchStrategy[tuple[HandoffSpec, ...]] | None = None,
    governance: st.SearchStrategy[bool] | None = None,
) -> st.SearchStrategy[AgentSpec]:
    """An :class:`AgentSpec`; each keyword overrides one part's strategy.

    By default there are no handoffs and no guardrails or hooks (``governance``
    draws each of ``input_guardrails``, ``output_guardrails`` and ``hooks``),
    so the specs run under :class:`~helikon.testing.TestInterpreter`.
    """
    return _agent_specs(
        tools if tools is not None else tool_def_lists(),
        output if output is not None else st.none() | output_schemas(),
        dynamic_instructions if dynamic_instructions is not None else st.booleans(),
        config if config is not None else run_configs(),
        handoffs if handoffs is not None else st.just(()),
        governance if governance is not None else st.just(False),
    )


def handoff_lists(max_size: int = 2) -> st.SearchStrategy[tuple[HandoffSpec, ...]]:
    """A tuple of handoffs with distinct transfer tools."""
    return st.lists(handoff_specs(), max_size=max_size, unique_by=lambda h: h.tool_name).map(tuple)


def agent_inputs() -> st.SearchStrategy[AgentInput]:
    """A run's input: one user message, or a short history of messages."""
    messages = st.one_of(carriers(UserMessage), carriers(SystemMessage), carriers(AssistantMessage))
    return st.one_of(
        st.text(max_size=20).map(AgentInput.from_user_text),
        st.lists(messages, min_size=1, max_size=3).map(AgentInput.from_items),
    )


# -- any carrier -------------------------------------------------------------

_SCALARS: Final[dict[object, st.SearchStrategy[Any]]] = {
    int: st.one_of(st.integers(0, 8), st.integers(0, 2**40)),
    float: st.floats(0.0, 1e9),
    bool: st.booleans(),
    str: st.text(max_size=10),
    type(None): st.none(),
}


def _union_members(tp: object) -> tuple[object, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return ()


@st.composite
def _with_aligned_calls(draw: st.DrawFn, tp: type, fields: dict[str, st.SearchStrategy[Any]]) -> Any:
    # A phase holding ``calls`` and ``prefilled`` keeps them aligned, and one
    # holding ``pending`` approvals waits on exactly the calls not yet answered.
    calls = draw(st.lists(carriers(ToolCall), max_size=3, unique_by=lambda c: c.call_id))
    prefilled = [
        ToolResult(c.call_id, c.name, draw(st.text(max_size=10)), is_error=True)
        if draw(st.booleans())
        else None
        for c in calls
    ]
    values = {name: draw(strategy) for name, strategy in fields.items() if name not in ("calls", "prefilled")}
    if "pending" in fields:
        values["pending"] = tuple(
            ApprovalRequest(c.call_id, c.name, c.arguments, draw(st.text(max_size=10)))
            for c, p in zip(calls, prefilled, strict=True)
            if p is None
        )
    return tp(calls=tuple(calls), prefilled=tuple(prefilled), **values)


@cache
def _overrides() -> dict[object, st.SearchStrategy[Any]]:
    # Carriers whose fields have constraints their types do not say.
    return {
        RunConfig: run_configs(),
        AgentSpec: agent_specs(handoffs=handoff_lists(), governance=st.booleans()),
        ToolDef: tool_defs(),
        OutputSchema: output_schemas(),
        JsonSchema: st.builds(JsonSchema, tool_names(), arg_schemas(max_properties=2), st.booleans()),
    }


def _deferred(tp: object) -> st.SearchStrategy[Any]:
    # Deferred, so recursive and mutually recursive carriers resolve lazily.
    return st.deferred(lambda: _resolve(tp))


@cache
def _resolve(tp: object) -> st.SearchStrategy[Any]:
    overrides = _overrides()
    if tp in overrides:
        return overrides[tp]
    if tp in _SCALARS:
        return _SCALARS[tp]
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:  # a NewType
        return _resolve(supertype)
    members = _union_members(tp)
    if members and {type(None), bool, int, float, str} <= set(members):
        return json_values(max_leaves=4)
    if members:
        return st.one_of([_deferred(m) for m in members])
    origin = typing.get_origin(tp)
    if origin is tuple:
        item, *rest = typing.get_args(tp)
        if rest != [Ellipsis]:
            raise TypeError(f"carriers() does not generate fixed tuples: {tp!r}")
        return st.lists(_deferred(item), max_size=3).map(tuple)
    if origin is Mapping or origin is dict:
        return json_objects(max_leaves=4)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(tp)
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        fields = {f.name: _deferred(hints[f.name]) for f in attrs.fields(tp)}
        if "calls" in fields and "prefilled" in fields:
            return _with_aligned_calls(tp, fields)
        return st.builds(tp, **fields)
    raise TypeError(f"carriers() cannot generate {tp!r}")


def carriers(tp: object) -> st.SearchStrategy[Any]:
    """Values of any helikon carrier type or union (events, effects, results,
    states, items, failures), every field filled, numbers bounded so values
    survive JSON.

    >>> from helikon.events import AgentEvent
    >>> strategy = carriers(AgentEvent)
    """
    return _resolve(tp)


__all__ = [
    "CallKind",
    "Keying",
    "PlannedCall",
    "ScriptedTool",
    "TurnPlan",
    "agent_inputs",
    "agent_specs",
    "arg_schemas",
    "carriers",
    "final_answers",
    "handoff_lists",
    "handoff_specs",
    "interruptions",
    "json_objects",
    "json_scalars",
    "json_values",
    "malformed_json",
    "matching_args",
    "model_errors",
    "model_failures",
    "model_settings",
    "model_turns",
    "non_matching_args",
    "output_schemas",
    "provider_call_ids",
    "run_configs",
    "run_ids",
    "tool_def_lists",
    "tool_defs",
    "tool_errors",
    "tool_fns",
    "tool_names",
    "tool_outcomes",
    "tool_return_values",
    "turn_plans",
    "usages",
]
