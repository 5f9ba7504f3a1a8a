"""The machine's hot paths give what its general rules give.

:func:`helikon.loop.transition` answers the commonest steps of a tool loop (a
model turn of one whole tool call; a round of one running call answered by its
tool) without going through the general rules. For every state, answer and
agent drawn here, most of them just inside or just outside a hot path's
conditions, the outcome must be the one the general rule of the
``(phase, result)`` pair gives: the same state, events, effect and items,
down to each value's type.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from returns.result import Failure, Result
from strategies import governances, scaled

from helikon._json import JsonObject
from helikon.config import RunConfig, UsageLimits
from helikon.effects import (
    CallModel,
    EffectResult,
    HooksRan,
    InstructionsRendered,
    ModelResponded,
    RunHooks,
    StepResult,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import StepError, ToolCrashed
from helikon.ids import CallId, RunId, derive_call_id
from helikon.items import AgentInput
from helikon.loop import AgentSpec
from helikon.loop._aggregate import aggregate
from helikon.loop._limits import spend, turn_usage
from helikon.loop._model_form import model_answer, model_form_problem
from helikon.loop._outcome import Outcome
from helikon.loop._spec import Governance, HandoffSpec, OutputSchema
from helikon.loop._states import ExecutingTools
from helikon.loop._table import TABLE, transition
from helikon.loop._transition import in_pieces, one_call_turn, start
from helikon.loop._validate import _fast_check, schema_errors, surely_valid
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelSettings,
    TextChunk,
    ToolCallChunk,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceRequired,
    ToolDef,
    ToolEffect,
    Usage,
)
from helikon.pricing import ModelPrice

#: The names of the tools every agent drawn has (its governance's rules name them).
NAMES = ("add", "echo", "any")
#: True one time in four (``sampled_from`` draws evenly, where ``integers`` leans to its bounds).
ONE_IN_FOUR = st.sampled_from([False, False, False, True])

SCHEMA: JsonObject = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def general(state: Any, result: EffectResult, spec: AgentSpec) -> Result[Outcome, StepError]:
    """What :func:`transition` gives without its hot paths: the table's rule."""
    if type(result) is ModelResponded and model_form_problem(result.events) is not None:
        result = model_answer(result)
    return TABLE[(type(state.phase), type(result))](state, result, spec)


def same(fast: Result[Outcome, StepError], slow: Result[Outcome, StepError]) -> None:
    if isinstance(slow, Failure):  # a StepError is an exception: compared by its message
        assert isinstance(fast, Failure)
        assert repr(fast.failure()) == repr(slow.failure())
        return
    assert fast == slow
    assert repr(fast) == repr(slow)  # the same values, of the same types
    assert type(fast.unwrap().state.conversation) is type(slow.unwrap().state.conversation)


#: A schema the quick check leaves to jsonschema (keywords it does not read, a nested object).
PICKY: JsonObject = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "s": {"type": "string", "enum": ["x", "\u00e9"]},
        "o": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": False},
    },
    "additionalProperties": False,
}
choices = st.sampled_from(
    [
        None,
        ToolChoiceAuto(),
        ToolChoiceRequired(),
        ToolChoiceRequired(keep=True),
        ToolChoiceNamed("add"),
        ToolChoiceNamed("echo", keep=True),
    ]
)


@st.composite
def specs(draw: st.DrawFn) -> AgentSpec:
    effect = draw(st.sampled_from(ToolEffect))
    tools = [
        ToolDef("add", "", SCHEMA, effect=effect),
        ToolDef("echo", "", {"type": "object"}),
        ToolDef("any", "", {}),  # any JSON fits: a list, a string, null
    ]
    if draw(st.booleans()):
        tools.append(ToolDef("pick", "", PICKY, effect=draw(st.sampled_from(ToolEffect))))
    if draw(ONE_IN_FOUR):  # a second tool of a name: the first is the one called
        tools.append(ToolDef("add", "", {"type": "object"}, effect=draw(st.sampled_from(ToolEffect))))
    plain = not draw(ONE_IN_FOUR)  # the hot path's agent, or anything
    handoffs = (HandoffSpec(draw(st.sampled_from(["to_b", "add"])), "b", ""),)
    return AgentSpec(
        "a",
        tools=tuple(tools),
        settings=ModelSettings(tool_choice=draw(choices)),
        output=draw(st.sampled_from([None, OutputSchema("o", {"type": "object"})])),
        config=RunConfig(
            max_turns=draw(st.integers(2, 4)) if plain else draw(st.integers(1, 4)),
            usage_limits=UsageLimits() if plain or draw(st.booleans()) else UsageLimits(tool_calls=2),
        ),
        handoffs=() if plain or draw(st.booleans()) else handoffs,
        price=None if plain or draw(st.booleans()) else ModelPrice(Decimal(1), Decimal(2)),
        hooks=not plain and draw(st.booleans()),
        dynamic_instructions=not plain and draw(st.booleans()),
        governance=Governance() if plain and not draw(ONE_IN_FOUR) else draw(governances(NAMES)),
    )


texts = st.sampled_from(["add", "add", "echo", "pick", "any", "nope", "", "add\u00e9", "add\ud800"])
arguments = st.sampled_from(
    [
        '{"a": 1}',
        '{"a": 1}',
        '{"a": "x"}',
        "{}",
        "",
        '{"a":',
        '{"a": 1, "k": "s\u00e9"}',
        # JSON edge cases: not an object, integral and huge numbers, duplicate keys, escapes
        "[1]",
        "null",
        '"a"',
        " {\"a\": 1} ",
        '{"a": 1.0}',
        '{"a": true}',
        '{"a": 1e400}',
        '{"a": 100000000000000000000000}',
        '{"a": "x", "a": 1}',
        '{"a": 1, "a": "x"}',
        '{"a": NaN}',
        '{"a": 1, "k": "\\u00e9\\ud800"}',
        '{"a": 1, "k": "e\\u0301"}',
        '{"n": 1, "s": "x"}',
        '{"n": -1}',
        '{"s": "\\u00e9"}',
        '{"o": {"k": "v"}}',
        '{"o": {"k": 1}}',
    ]
)


hot_names = st.sampled_from(["add", "add", *NAMES[1:], "pick"])


late_ids = st.sampled_from([None, None, None, None, "c3"])


def first_arguments(head: str) -> st.SearchStrategy[str]:
    """What the first piece of a call in pieces carries: mostly nothing."""
    return st.sampled_from(["", "", "", head])


late_names = st.sampled_from([None, None, None, None, "", "echo", "add"])


@st.composite
def answers(draw: st.DrawFn) -> ModelResponded:
    """Mostly one whole call, its usage (or none, or first) and its finish; now and then not quite."""
    hot = not draw(ONE_IN_FOUR)  # the call the hot path takes, or any
    chunk = ToolCallChunk(
        draw(st.sampled_from([0, None])),
        draw(st.sampled_from(["c1", "c1", "", None, "c\u00e9"])),
        draw(hot_names) if hot else draw(st.one_of(texts, st.none())),
        '{"a": 1}' if hot and draw(st.booleans()) else draw(arguments),
    )
    usage = draw(
        st.sampled_from([Usage(1, 1), Usage(), Usage(0, 0, requests=1, tool_calls=2, cost=Decimal(1))])
    )
    reason = draw(st.sampled_from([FinishReason.TOOL_CALLS, FinishReason.TOOL_CALLS, FinishReason.LENGTH]))
    response_id = draw(st.sampled_from([None, "r1", "r\u00e9"]))
    finish = Finish(reason, response_id, draw(st.sampled_from([None, "m\u00e9"])))
    events: list[object] = [chunk, usage, finish]
    shapes = ["as is"] * 8 + ["no usage"] * 4 + ["usage first"] * 2 + ["in pieces"] * 10
    match draw(st.sampled_from([*shapes, "reversed", "with text", "short", "two calls", "two usages"])):
        case "in pieces":  # as live providers stream a call: its start, then its arguments
            text = chunk.arguments
            cut = draw(st.integers(0, len(text)))
            index = chunk.index if chunk.index is not None else draw(st.sampled_from([0, None]))
            later = draw(st.sampled_from([index, index, index, index, index, None, 1]))
            pieces = [
                ToolCallChunk(index, chunk.call_id, chunk.name, draw(first_arguments(text[:cut]))),
                # now and then an id or a name in a later piece (the first given is the call's)
                ToolCallChunk(later, draw(late_ids), draw(late_names), text[:cut]),
                ToolCallChunk(later, None, None, text[cut:]),
            ]
            events[:1] = pieces[: draw(st.integers(2, 3))]
            if draw(ONE_IN_FOUR):  # the usage between two pieces, or none
                events.remove(usage)
                if draw(st.booleans()):
                    events.insert(draw(st.integers(0, len(events) - 1)), usage)
        case "no usage":  # a model that reports none (a replayed one)
            events.remove(usage)
        case "usage first":
            events[:2] = [usage, chunk]
        case "two usages":
            events.insert(draw(st.integers(0, 2)), Usage(1, 2))
        case "reversed":
            events.reverse()
        case "with text":
            events.insert(0, TextChunk("hm"))
        case "short":
            events.pop(draw(st.integers(0, 2)))
        case "two calls":
            events.insert(1, ToolCallChunk(1, "c2", "add", '{"a": 2}'))
    return ModelResponded(tuple(events))  # type: ignore[arg-type]


# now and then one that is not ASCII, or not in normal form (a lone surrogate)
piece_ids = st.sampled_from([None, None, "", "c1", "c2", "c\u00e9", "\ud800"])
piece_names = st.sampled_from([None, None, "", "add", "echo", "x\udc00"])


@st.composite
def calls_in_pieces(draw: st.DrawFn) -> tuple[ModelEvent, ...]:
    """A model answer that is, or is nearly, one call in pieces: chunks of
    one index (now and then another, or none), ids and names in any of them,
    at most a usage (now and then two, or text), then a finish."""
    index = draw(st.sampled_from([0, 0, 0, 2, None]))
    pieces: list[ModelEvent] = [
        ToolCallChunk(
            draw(st.sampled_from([index, index, index, index, None, 1])) if n else index,
            draw(piece_ids),
            draw(piece_names),
            draw(st.sampled_from(["", '{"a"', ": 1", "}", "\u00e9"])),
        )
        for n in range(draw(st.integers(1, 5)))
    ]
    extras = draw(st.lists(st.sampled_from([Usage(1, 2), Usage(), TextChunk("hm")]), max_size=2))
    for extra in extras:
        pieces.insert(draw(st.integers(0, len(pieces))), extra)
    return (*pieces, Finish(FinishReason.TOOL_CALLS))


@given(calls_in_pieces())
def test_a_call_in_pieces_is_the_call_aggregate_makes(events: tuple[ModelEvent, ...]) -> None:
    pieces = in_pieces(events)
    response = aggregate(events, RunId("r"), 1)
    calls = [e for e in events if type(e) is ToolCallChunk]
    usages = [e for e in events if type(e) is Usage]
    indexes = {e.index for e in calls}
    plain = all((e.call_id or "").isascii() and (e.name or "").isascii() for e in calls)
    one = indexes != {None} and len(indexes) == 1 and len(usages) <= 1 and plain
    if not one or any(type(e) is TextChunk for e in events):
        assert pieces is None
        return
    assert pieces is not None
    call_id, name, arguments, reported, finish = pieces
    (call,) = response.calls
    made = call_id or derive_call_id(RunId("r"), 1, 0)
    assert (made, name, arguments) == (call.call_id, call.name, call.arguments)
    assert (reported or Usage()) == response.usage and finish == events[-1]


def _calling(spec: AgentSpec) -> Any:
    """The state of ``spec``'s run as it asks its first model call."""
    first = start(spec, AgentInput.from_user_text("hi"), RunId("r"))
    while type(first.effect) is not CallModel:  # the turn's hooks, its instructions
        given_ = HooksRan() if type(first.effect) is RunHooks else InstructionsRendered("be brief")
        first = transition(first.state, given_, spec).unwrap()
    return first.state


#: Answers in pieces the fast path must leave to the general rule.
LEFT_TO_THE_GENERAL_RULE = {
    "a later id not in normal form": (
        ToolCallChunk(0, "c1", "add", ""),
        ToolCallChunk(0, "\ud800", None, '{"a": 1}'),
        Finish(FinishReason.TOOL_CALLS),
    ),
    "a later name not in normal form": (
        ToolCallChunk(0, "c1", "add", '{"a": '),
        ToolCallChunk(0, None, "x\udc00", "1}"),
        Usage(1, 1),
        Finish(FinishReason.TOOL_CALLS),
    ),
    "an empty id, then one not in normal form": (
        ToolCallChunk(0, "", "add", ""),
        ToolCallChunk(0, "\ud800", None, '{"a": 1}'),
        Finish(FinishReason.TOOL_CALLS),
    ),
    "no finish at the end": (
        ToolCallChunk(0, "c1", "add", '{"a": '),
        ToolCallChunk(0, None, None, "1}"),
        Usage(1, 1),
    ),
    "a finish before the last piece": (
        ToolCallChunk(0, "c1", "add", '{"a": '),
        Finish(FinishReason.TOOL_CALLS),
        ToolCallChunk(0, None, None, "1}"),
    ),
}


@pytest.mark.parametrize("case", sorted(LEFT_TO_THE_GENERAL_RULE))
def test_an_answer_in_pieces_the_fast_path_leaves_goes_as_the_general_rule_says(case: str) -> None:
    spec = AgentSpec("a", tools=(ToolDef("add", "Add.", SCHEMA),))
    state = _calling(spec)
    answer = ModelResponded(LEFT_TO_THE_GENERAL_RULE[case])  # type: ignore[arg-type]

    assert one_call_turn(state, state.phase.turn, answer, spec) is None
    same(transition(state, answer, spec), general(state, answer, spec))


outputs = st.one_of(
    st.sampled_from(
        [3, 3.5, True, None, "done", "x=1", "k: v", "secret-abc-1234", "a" * 9, -(2**70), "", "\u00e9=1"]
    ),
    st.text("abc", min_size=7, max_size=11),  # now and then a governance's secret (or one within)
    st.dictionaries(
        st.sampled_from(["a", "API_KEY", "out", "\u00e9"]),
        st.sampled_from([1, "v", "sk-0123456789", "abcabcab", 1.5]),
    ),
    st.lists(st.sampled_from([1, "v"]), max_size=2),
)


@scaled(0.5)
@given(specs(), answers(), st.data())
def test_a_model_turn_and_its_round_go_as_the_general_rules_say(
    spec: AgentSpec, answer: ModelResponded, data: st.DataObject
) -> None:
    state = _calling(spec)
    if data.draw(st.booleans()):
        cost = data.draw(st.sampled_from([None, Decimal(1)]))
        state = attrs.evolve(state, usage=Usage(2, 3, requests=1, cost=cost))
    if data.draw(ONE_IN_FOUR):  # after a round with invalid arguments
        state = attrs.evolve(state, strikes=1)
    turn = transition(state, answer, spec)
    same(turn, general(state, answer, spec))
    outcome = turn.unwrap()
    steps = getattr(outcome.effect, "steps", None)
    if not steps:
        return
    step = steps[0]
    call_id = CallId(data.draw(st.sampled_from([step.call_id, step.call_id, "other"])))
    replies: list[StepResult] = [
        ToolReturned(call_id, data.draw(outputs)),
        ToolRaised(call_id, ToolCrashed("boom")),
    ]
    reply = data.draw(st.sampled_from(replies))
    results = ToolsExecuted((reply, reply) if data.draw(ONE_IN_FOUR) else (reply,))
    fed = outcome.state
    if data.draw(ONE_IN_FOUR):  # a round after one with invalid arguments
        assert type(fed.phase) is ExecutingTools
        fed = attrs.evolve(fed, phase=attrs.evolve(fed.phase, invalid_args=True), strikes=1)
    same(transition(fed, results, spec), general(fed, results, spec))


leaf_types = st.sampled_from(["string", "integer", "number", "boolean", "null", "array"])
annotations = st.fixed_dictionaries(
    {},
    optional={
        "description": st.just("d"),
        "title": st.just("t"),
        "default": st.just(1),
        "examples": st.just([]),
    },
)
leaf_schemas = st.one_of(
    leaf_types.map(lambda kind: {"type": kind}),
    st.lists(leaf_types, min_size=1, max_size=3, unique=True).map(lambda kinds: {"type": kinds}),
    st.tuples(leaf_types, annotations).map(lambda pair: {"type": pair[0], **pair[1]}),
    # keywords the quick check does not read: it must leave these to jsonschema
    st.sampled_from(
        [
            {"type": "integer", "minimum": 0},
            {"type": "string", "enum": ["x"]},
            {"const": 1},
            {"type": "string", "pattern": "^x$"},
            {"type": "string", "format": "email"},
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            {"type": "object", "properties": {"k": {"type": "string"}}},
            {"$ref": "#/$defs/n"},
            {},
        ]
    ),
)
flat_schemas = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(st.sampled_from("abc"), leaf_schemas)},
    optional={
        "required": st.lists(st.sampled_from("abc"), unique=True),
        # a number is no schema (``schema_problem`` says so of an agent's), but a
        # low-level spec is not checked: jsonschema reads 0 as closed, 1 as open
        "additionalProperties": st.sampled_from([True, False, 0, 1, 0.0, {}, {"type": "integer"}]),
        "title": st.just("t"),
        "description": st.just("d"),
    },
).map(lambda schema: _with_defs(schema) if "$ref" in str(schema) else schema)


def _with_defs(schema: JsonObject) -> JsonObject:
    return {**schema, "$defs": {"n": {"type": "integer"}}}  # what its ``$ref`` names

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 1.5, -0.0, 1e300, 2**70, -(2**64)]),
    st.text("x@.", max_size=4),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from("abk"), inner, max_size=2)
    ),
    max_leaves=4,
)


def jsonschema_valid(value: Any, schema: JsonObject) -> bool:
    validator_class = jsonschema.validators.validator_for(schema)
    checker = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return not list(checker.iter_errors(value))


@example({"type": "object", "properties": {}, "additionalProperties": 0}, {"x": 1})
@given(flat_schemas, st.one_of(st.dictionaries(st.sampled_from("abcd"), values), values))
def test_the_quick_argument_test_says_valid_only_of_valid_arguments(schema: JsonObject, value: Any) -> None:
    # Against jsonschema itself (``schema_errors`` has the same quick check in front):
    # True only of a valid value; of the flat schemas it reads, True of every one.
    valid = jsonschema_valid(value, schema)
    quick = surely_valid(schema)(value)
    assert quick <= valid
    assert (schema_errors(value, schema) == ()) == valid
    if _fast_check(schema) is not None:
        assert quick == valid


_counts = st.integers(min_value=0, max_value=2**40)
_usages = st.builds(
    Usage,
    _counts,
    _counts,
    _counts,
    _counts,
    _counts,
    _counts,
    _counts,
    st.none() | st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False),
)


@given(_usages, _usages | st.just(Usage()), st.integers(min_value=0, max_value=3))
def test_spend_without_a_price_is_the_sum_it_stands_for(
    total: Usage, reported: Usage, tool_calls: int
) -> None:
    # ``spend`` builds its usage straight into its ``__dict__`` (the hot path):
    # it must be what ``total + turn_usage(reported)`` is, made the usual way.
    cost, after = spend(total, reported, None, tool_calls)
    summed = total + turn_usage(reported, None)
    expected = attrs.evolve(summed, tool_calls=summed.tool_calls + tool_calls)

    assert cost is None
    assert type(after) is Usage
    assert after == expected
    assert list(after.__dict__.items()) == list(expected.__dict__.items())  # same fields, same order
    assert [type(v) for v in after.__dict__.values()] == [type(v) for v in expected.__dict__.values()]
