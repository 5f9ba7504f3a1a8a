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
from hypothesis import given
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
from helikon.ids import CallId, RunId
from helikon.items import AgentInput
from helikon.loop import AgentSpec
from helikon.loop._model_form import model_answer, model_form_problem
from helikon.loop._outcome import Outcome
from helikon.loop._spec import Governance, HandoffSpec
from helikon.loop._states import ExecutingTools
from helikon.loop._table import TABLE, transition
from helikon.loop._transition import start
from helikon.loop._validate import schema_errors, surely_valid
from helikon.model import Finish, FinishReason, TextChunk, ToolCallChunk, ToolDef, ToolEffect, Usage
from helikon.pricing import ModelPrice

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


@st.composite
def specs(draw: st.DrawFn) -> AgentSpec:
    effect = draw(st.sampled_from(ToolEffect))
    tools = (ToolDef("add", "", SCHEMA, effect=effect), ToolDef("echo", "", {"type": "object"}))
    plain = draw(st.integers(0, 3)) > 0  # the hot path's agent, or anything
    return AgentSpec(
        "a",
        tools=tools,
        config=RunConfig(
            max_turns=draw(st.integers(2, 4)) if plain else draw(st.integers(1, 4)),
            usage_limits=UsageLimits() if plain or draw(st.booleans()) else UsageLimits(tool_calls=2),
        ),
        handoffs=() if plain or draw(st.booleans()) else (HandoffSpec("to_b", "b", ""),),
        price=None if plain or draw(st.booleans()) else ModelPrice(Decimal(1), Decimal(2)),
        hooks=not plain and draw(st.booleans()),
        dynamic_instructions=not plain and draw(st.booleans()),
        governance=Governance() if plain and draw(st.integers(0, 3)) else draw(governances(("add", "echo"))),
    )


texts = st.sampled_from(["add", "add", "echo", "nope", "", "add\u00e9", "add\ud800"])
arguments = st.sampled_from(
    ['{"a": 1}', '{"a": 1}', '{"a": "x"}', "{}", "", '{"a":', '{"a": 1, "k": "s\u00e9"}']
)


@st.composite
def answers(draw: st.DrawFn) -> ModelResponded:
    """Mostly one whole call, its usage and its finish; now and then not quite."""
    hot = draw(st.integers(0, 3)) > 0  # the call the hot path takes, or any
    chunk = ToolCallChunk(
        draw(st.sampled_from([0, None])),
        draw(st.sampled_from(["c1", "c1", "", None, "c\u00e9"])),
        "add" if hot else draw(st.one_of(texts, st.none())),
        '{"a": 1}' if hot else draw(arguments),
    )
    usage = draw(
        st.sampled_from([Usage(1, 1), Usage(), Usage(0, 0, requests=1, tool_calls=2, cost=Decimal(1))])
    )
    finish = Finish(FinishReason.TOOL_CALLS, draw(st.sampled_from([None, "r1", "r\u00e9"])))
    events: list[object] = [chunk, usage, finish]
    match draw(st.integers(0, 15)):
        case 0:
            events.reverse()
        case 1:
            events.insert(0, TextChunk("hm"))
        case 2:
            events.pop(draw(st.integers(0, 2)))
        case 3:
            events.insert(1, ToolCallChunk(1, "c2", "add", '{"a": 2}'))
    return ModelResponded(tuple(events))  # type: ignore[arg-type]


outputs = st.one_of(
    st.sampled_from([3, 3.5, True, None, "done", "x=1", "k: v", "secret-abc-1234", "a" * 9, -(2**70)]),
    st.dictionaries(st.sampled_from(["a", "API_KEY", "out"]), st.sampled_from([1, "v", "sk-0123456789"])),
    st.lists(st.sampled_from([1, "v"]), max_size=2),
)


@scaled(0.5)
@given(specs(), answers(), st.data())
def test_a_model_turn_and_its_round_go_as_the_general_rules_say(
    spec: AgentSpec, answer: ModelResponded, data: st.DataObject
) -> None:
    first = start(spec, AgentInput.from_user_text("hi"), RunId("r"))
    while type(first.effect) is not CallModel:  # the turn's hooks, its instructions
        given_ = HooksRan() if type(first.effect) is RunHooks else InstructionsRendered("be brief")
        first = transition(first.state, given_, spec).unwrap()
    state = first.state
    if data.draw(st.booleans()):
        cost = data.draw(st.sampled_from([None, Decimal(1)]))
        state = attrs.evolve(state, usage=Usage(2, 3, requests=1, cost=cost))
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
    results = ToolsExecuted((reply,) if data.draw(st.integers(0, 4)) else (reply, reply))
    fed = outcome.state
    if data.draw(st.integers(0, 4)) == 0:  # a round after one with invalid arguments
        assert type(fed.phase) is ExecutingTools
        fed = attrs.evolve(fed, phase=attrs.evolve(fed.phase, invalid_args=True), strikes=1)
    same(transition(fed, results, spec), general(fed, results, spec))


leaf_types = st.sampled_from(["string", "integer", "number", "boolean", "null", "array"])
leaf_schemas = st.one_of(
    leaf_types.map(lambda kind: {"type": kind}),
    st.lists(leaf_types, min_size=1, max_size=3).map(lambda kinds: {"type": kinds}),
)
flat_schemas = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(st.sampled_from("abc"), leaf_schemas)},
    optional={
        "required": st.lists(st.sampled_from("abc"), unique=True),
        "additionalProperties": st.booleans(),
    },
)
values = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([1.0, 1.5, -0.0]), st.text("x", max_size=2)
)


@given(flat_schemas, st.one_of(st.dictionaries(st.sampled_from("abcd"), values), values))
def test_the_quick_argument_test_says_valid_only_of_valid_arguments(schema: JsonObject, value: Any) -> None:
    # (it may say False of a valid value; of these flat schemas it knows every one)
    assert surely_valid(schema)(value) == (schema_errors(value, schema) == ())
