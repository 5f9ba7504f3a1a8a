"""The one converter for every carrier (``helikon.codec``): tagged unions, enums by
value, raw JSON passed through, byte-stable JSON."""

from __future__ import annotations

import msgspec
import pytest

from helikon._json import JsonValue
from helikon.codec import from_json, structure, to_json, unstructure
from helikon.effects import CallModel, Effect, ExecuteTools, InvokeTool, Terminate
from helikon.errors import Cancelled, ModelFailed, RateLimited
from helikon.events import AgentEvent, ApprovalRequested, RunFailed, TurnStarted
from helikon.ids import CallId, RunId
from helikon.items import AgentInput, Item, ToolCall, ToolResult, user_text
from helikon.loop import AgentSpec, ExecutingTools, Failed, Outcome, Running, RunState, ToolCallState, start
from helikon.loop._calls import settled
from helikon.model import (
    FinishReason,
    ModelRequest,
    ModelSettings,
    ToolChoiceNamed,
    ToolDef,
    ToolEffect,
    Usage,
)

CLOCK = ToolDef("clock", "The time.", {"type": "object", "properties": {"tz": {"type": "string"}}})
CALL = ToolCall(CallId("c1"), "clock", '{"tz":"UTC"}')


def test_a_union_member_is_tagged_with_its_class_name() -> None:
    assert unstructure(TurnStarted(3), AgentEvent) == {"type": "TurnStarted", "turn": 3}


def test_a_tagged_value_structures_back_to_its_class() -> None:
    assert structure({"type": "TurnStarted", "turn": 3}, AgentEvent) == TurnStarted(3)


def test_nested_unions_are_tagged_too() -> None:
    data = unstructure(RunFailed(ModelFailed(RateLimited("slow", 20))), AgentEvent)
    assert data["error"] == {
        "type": "ModelFailed",
        "failure": {"type": "RateLimited", "message": "slow", "retry_after_ms": 20},
    }


def test_a_class_with_no_fields_is_just_its_tag() -> None:
    assert unstructure(Terminate(), Effect) == {"type": "Terminate"}
    assert unstructure(Cancelled(), AgentEvent | Cancelled) == {"type": "Cancelled"}


def test_an_optional_union_keeps_none_as_null() -> None:
    data = unstructure(ModelSettings())
    assert data["tool_choice"] is None and data["response_format"] is None
    assert structure(data, ModelSettings) == ModelSettings()


def test_an_optional_union_with_a_value_is_tagged() -> None:
    settings = ModelSettings(tool_choice=ToolChoiceNamed("clock"))
    assert unstructure(settings)["tool_choice"] == {"type": "ToolChoiceNamed", "name": "clock", "keep": False}
    assert from_json(to_json(settings), ModelSettings) == settings


def test_enums_travel_by_value() -> None:
    assert unstructure(ToolDef("t", "", {}, effect=ToolEffect.READ_ONLY))["effect"] == "read_only"
    assert structure("tool_calls", FinishReason) is FinishReason.TOOL_CALLS


def test_raw_json_fields_pass_through_untouched() -> None:
    args: JsonValue = {"path": ["a", 1, None, {"deep": True}], "n": 1.5}
    event = ApprovalRequested(CallId("c1"), "write", args)
    assert unstructure(event, AgentEvent)["args"] == args
    assert from_json(to_json(event, AgentEvent), AgentEvent) == event
    assert unstructure(CLOCK)["parameters"] == CLOCK.parameters


def test_ids_are_plain_strings_in_json() -> None:
    assert msgspec.json.decode(to_json(CALL)) == {
        "call_id": "c1",
        "name": "clock",
        "arguments": '{"tz":"UTC"}',
    }


def test_tuples_come_back_as_tuples() -> None:
    step = InvokeTool(CallId("c1"), "clock", {"tz": "UTC"})
    effect = from_json(to_json(ExecuteTools((step, step)), Effect), Effect)
    assert effect == ExecuteTools((step, step))
    assert type(effect.steps) is tuple


def test_json_has_sorted_keys_and_no_whitespace() -> None:
    assert to_json(Usage(1, 2)) == (
        b'{"cache_creation_input_tokens":0,"cached_input_tokens":0,"cost":null,"input_tokens":1,'
        b'"output_tokens":2,"reasoning_tokens":0,"requests":0,"tool_calls":0}'
    )


def test_equal_values_give_identical_bytes() -> None:
    first = ModelRequest((user_text("hi"), CALL), (CLOCK,))
    second = ModelRequest((user_text("hi"), CALL), (CLOCK,))
    assert to_json(CallModel(first, 1), Effect) == to_json(CallModel(second, 1), Effect)


def test_a_state_mid_run_round_trips() -> None:
    state = RunState(
        RunId("r"),
        "calc",
        ExecutingTools(
            2,
            (
                ToolCallState(CALL, {"tz": "UTC"}, Running()),
                settled(ToolCall(CallId("c2"), "nope", "{}"), ToolResult(CallId("c2"), "nope", "x", True)),
            ),
        ),
        (user_text("time?"), CALL),
        Usage(3, 4),
        instructions="Be brief.",
        strikes=1,
    )
    assert from_json(to_json(state), RunState) == state


def test_a_failed_state_round_trips() -> None:
    state = RunState(RunId("r"), "calc", Failed(ModelFailed(RateLimited("slow"))))
    assert from_json(to_json(state), RunState) == state


def test_a_whole_outcome_round_trips() -> None:
    spec = AgentSpec("calc", instructions="Add.", tools=(CLOCK,))
    outcome = start(spec, AgentInput.from_user_text("hi"), RunId("r"))
    assert from_json(to_json(outcome), Outcome) == outcome


def test_an_unknown_tag_is_an_error_naming_the_known_ones() -> None:
    expected = "unknown 'type' tag 'Teleport'; expected one of ['AssistantMessage', 'SystemMessage',"
    with pytest.raises(ValueError) as info:
        structure({"type": "Teleport"}, Item)
    assert str(info.value).startswith(expected)
