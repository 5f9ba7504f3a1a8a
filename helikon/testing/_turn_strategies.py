"""Hypothesis strategies for tools and model turns.

Part of :mod:`helikon.testing.strategies` (import the names from there). A
generated model turn is a :class:`TurnPlan`: the event list plus what the loop
must make of it (text and its parts, reasoning parts, calls in
first-appearance order, summed usage), so a test can compare the aggregation
with the plan. Tool functions (:class:`ScriptedTool`) answer from their
arguments alone, so two runs with the same calls agree.
"""

from __future__ import annotations

import enum
import itertools
import zlib
from collections.abc import Collection, Sequence
from functools import cache
from typing import Any, Literal, TypeVar

import attrs
import msgspec
from hypothesis import strategies as st

from helikon._json import JsonObject, JsonValue
from helikon.effects import (
    AskPolicy,
    CallbackRaised,
    CallStep,
    FireHook,
    HookAnswered,
    InvokeTool,
    PolicyAnswered,
    ReconcileTool,
    StepResult,
    ToolNotPerformed,
    ToolRaised,
    ToolReturned,
)
from helikon.errors import Denied, InvalidArgs, ToolCrashed, ToolError, ToolFailure
from helikon.governance import (
    Allow,
    AskUser,
    Deny,
    HookDecision,
    InjectSystemMessage,
    PermissionDecision,
    Replace,
    ReplaceInput,
    ReplaceOutput,
)
from helikon.ids import CallId, RunId, derive_call_id
from helikon.items import ReasoningPart, ToolCall
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    ToolDef,
    ToolEffect,
    Usage,
)
from helikon.testing._json_strategies import (
    arg_schemas,
    encode,
    json_objects,
    json_values,
    malformed_json,
    matching_args,
    non_matching_args,
    provider_call_ids,
    tool_names,
)

T = TypeVar("T")

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


@cache
def tool_return_values() -> st.SearchStrategy[JsonValue]:
    """What a tool function returns: text or any JSON value."""
    return st.one_of(st.text(max_size=20), json_values(max_leaves=4))


def tool_outcomes(call_id: CallId | str) -> st.SearchStrategy[ToolReturned | ToolRaised]:
    """How tool call ``call_id``'s tool ended: it returned, or it raised."""
    cid = CallId(call_id)
    return st.one_of(
        st.builds(ToolReturned, st.just(cid), tool_return_values()),
        st.builds(ToolRaised, st.just(cid), tool_failures()),
    )


def hook_decisions() -> st.SearchStrategy[HookDecision]:
    """What a hook answers: mostly Allow, sometimes a denial, a rewrite or an injection."""
    return st.one_of(
        st.just(Allow()),
        st.builds(Deny, st.text(max_size=10)),
        st.builds(ReplaceInput, json_values(max_leaves=3)),
        st.builds(ReplaceOutput, json_values(max_leaves=3)),
        st.builds(InjectSystemMessage, st.text(max_size=10)),
    )


def policy_decisions() -> st.SearchStrategy[PermissionDecision]:
    """What a permission policy answers."""
    return st.one_of(
        st.just(Allow()),
        st.builds(Deny, st.text(max_size=10)),
        st.builds(AskUser, st.text(max_size=10)),
        st.builds(Replace, json_values(max_leaves=3)),
    )


def step_results(step: CallStep) -> st.SearchStrategy[StepResult]:
    """A result that answers ``step`` (a callback may also raise)."""
    raised = st.builds(CallbackRaised, st.just(step.call_id), st.text(max_size=10))
    match step:
        case FireHook(call_id=cid):
            return st.one_of(st.builds(HookAnswered, st.just(cid), hook_decisions()), raised)
        case AskPolicy(call_id=cid):
            return st.one_of(st.builds(PolicyAnswered, st.just(cid), policy_decisions()), raised)
        case InvokeTool(call_id=cid):
            return tool_outcomes(cid)
        case ReconcileTool(call_id=cid):
            return st.one_of(tool_outcomes(cid), st.builds(ToolNotPerformed, st.just(cid)), raised)


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
        return PlannedCall(None, name, encode(draw(json_objects(max_leaves=3))), kind)
    candidates = (
        tools
        if kind is not CallKind.SCHEMA_VIOLATION
        else tuple(t for t in tools if t.parameters.get("type") == "object")
    )
    tool = draw(st.sampled_from(candidates))
    if kind is CallKind.VALID:
        arguments = encode(draw(matching_args(tool.parameters)))
        if arguments == "{}" and draw(st.booleans()):
            arguments = ""  # no arguments at all: the loop reads it as {}
    elif kind is CallKind.MALFORMED_JSON:
        arguments = draw(malformed_json())
    else:
        arguments = encode(draw(non_matching_args(tool.parameters)))
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
    good = matching_args(schema).map(encode)
    bad = st.one_of(malformed_json(), non_matching_args(schema).map(encode))
    if valid is None:
        return st.one_of(good, bad)
    return good if valid else bad


__all__ = [
    "CallKind",
    "Keying",
    "PlannedCall",
    "ScriptedTool",
    "TurnPlan",
    "final_answers",
    "hook_decisions",
    "policy_decisions",
    "step_results",
    "model_turns",
    "tool_def_lists",
    "tool_defs",
    "tool_failures",
    "tool_fns",
    "tool_outcomes",
    "tool_return_values",
    "turn_plans",
    "usages",
]
