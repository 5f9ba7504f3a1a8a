"""LlmAgent, the run API (collect, collect_typed, run_sync) and the step API."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import attrs
import msgspec
import pytest
import trio

from helikon import (
    AgentInput,
    ConfigError,
    LlmAgent,
    RunCompleted,
    RunConfig,
    RunError,
    RunStarted,
    SequentialAgent,
    StepError,
    ToolEffect,
    Usage,
    advance,
    collect,
    collect_typed,
    run_sync,
    start,
    tool,
)
from helikon.effects import CallModel, ModelResponded, Terminate
from helikon.errors import InvalidStructuredOutput, MaxTurnsExceeded, OtherError
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter
from helikon.model import JsonSchema, TextChunk
from helikon.testing import MockModel, call_tools, say


@tool(effect=ToolEffect.READ_ONLY)
async def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


def test_the_spec_is_the_agent_as_data() -> None:
    agent = LlmAgent(name="w", model=MockModel(model_id="m1"), instructions="Be brief.", tools=[lookup])

    spec = agent.spec
    assert spec.name == "w" and spec.instructions == "Be brief." and not spec.dynamic_instructions
    (tool_def,) = spec.tools
    assert tool_def.name == "lookup" and tool_def.effect is ToolEffect.READ_ONLY
    assert tool_def.parameters["required"] == ["city"]
    assert spec.model_id == "m1"


def test_functions_passed_as_tools_are_decorated() -> None:
    async def ping() -> str:
        """Ping."""
        return "pong"

    agent = LlmAgent(name="a", model=MockModel(), tools=[ping])

    assert agent.spec.tools[0].name == "ping" and agent.spec.tools[0].description == "Ping."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "non-empty name"),
        ({"model": object()}, "no invoke"),
        ({"tools": [lookup, lookup]}, "two tools (are )?named 'lookup'"),
        ({"instructions": 42}, "instructions must be text or a function"),
    ],
)
def test_bad_definitions_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"name": "a", "model": MockModel(), **kwargs}
    with pytest.raises(ConfigError, match=message):
        LlmAgent(**args)


def test_bad_run_config_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        RunConfig(max_turns=0)
    with pytest.raises(ConfigError, match="parallel_tool_call_limit"):
        RunConfig(parallel_tool_call_limit=0)
    with pytest.raises(ConfigError, match="timeout"):
        RunConfig(timeout=-1)


def test_with_setters_return_changed_copies() -> None:
    agent = LlmAgent(name="a", model=MockModel())
    other = agent.with_instructions("new").with_tools(lookup).with_config(RunConfig(max_turns=3))

    assert agent.spec.instructions is None and agent.spec.tools == ()
    assert other.spec.instructions == "new" and other.spec.tools[0].name == "lookup"
    assert other.spec.config.max_turns == 3


def test_run_sync_runs_a_whole_agent() -> None:
    model = MockModel(
        [call_tools(("lookup", {"city": "Oslo"})), say("It is sunny in Oslo.", usage=Usage(3, 4))]
    )
    agent = LlmAgent(name="w", model=model, tools=[lookup])

    result = run_sync(agent, "Weather in Oslo?")

    assert result.final_output == "It is sunny in Oslo."
    assert result.usage == Usage(3, 4)
    assert type(result.events[-1]) is RunCompleted
    assert model.calls == 2


def test_run_config_override_applies_to_one_run() -> None:
    model = MockModel([call_tools(("lookup", {"city": "Oslo"})), say("never")])
    agent = LlmAgent(name="w", model=model, tools=[lookup])

    with pytest.raises(RunError) as info:
        run_sync(agent, "x", config=RunConfig(max_turns=1))

    assert info.value.error == MaxTurnsExceeded(1)


def test_collect_raises_run_error_with_the_events() -> None:
    agent = LlmAgent(name="w", model=MockModel([]))

    with pytest.raises(RunError) as info:
        run_sync(agent, "hi")

    assert "no script left" in str(info.value)
    assert len(info.value.events) >= 2


@attrs.frozen
class AttrsOut:
    city: str
    temperature: int


@dataclasses.dataclass
class DataOut:
    city: str
    temperature: int


class DictOut(TypedDict):
    city: str
    temperature: int


class StructOut(msgspec.Struct):
    city: str
    temperature: int


@pytest.mark.parametrize("output_type", [AttrsOut, DataOut, DictOut, StructOut])
def test_structured_output_end_to_end(output_type: type[Any]) -> None:
    model = MockModel(
        [say('{"city": "Oslo", "temperature": "warm"}'), say('{"city": "Oslo", "temperature": 21}')]
    )
    agent = LlmAgent(name="w", model=model, output_type=output_type)

    result = run_sync(agent, "Weather?")

    expected = output_type(city="Oslo", temperature=21)
    assert result.final_output == expected
    response_format = model.requests[0].settings.response_format
    assert isinstance(response_format, JsonSchema) and response_format.strict
    assert response_format.schema["properties"]["temperature"] == {"type": "integer"}  # type: ignore[index]
    assert model.calls == 2  # the finalizing turn and one repair


def test_structured_output_fails_after_one_repair() -> None:
    model = MockModel([say("not json"), say('{"city": 1}')])
    agent = LlmAgent(name="w", model=model, output_type=AttrsOut)

    with pytest.raises(RunError) as info:
        run_sync(agent, "Weather?")

    error = info.value.error
    assert isinstance(error, InvalidStructuredOutput) and error.text == '{"city": 1}'
    assert any("city" in e for e in error.schema_errors)


def test_collect_typed_on_plain_text_is_an_other_error() -> None:
    import trio

    agent = LlmAgent(name="w", model=MockModel([say("just text")]))

    with pytest.raises(RunError) as info:
        trio.run(lambda: collect_typed(agent.run(None, "x"), AttrsOut))

    assert isinstance(info.value.error, OtherError)


def test_agent_run_accepts_agent_input_and_rejects_other_types() -> None:
    import trio

    agent = LlmAgent(name="w", model=MockModel([say("ok")]))
    result = trio.run(lambda: collect(agent.run(None, AgentInput.from_user_text("hi"))))
    assert result.final_output == "ok"
    with pytest.raises(TypeError, match="input must be"):
        agent.run(None, 42)  # type: ignore[arg-type]


def test_the_step_api_drives_a_run_by_hand() -> None:
    agent = LlmAgent(name="w", model=MockModel())

    outcome = start(agent, "hi", run_id="r1")
    assert isinstance(outcome.effect, CallModel)
    outcome = advance(agent, outcome.state, ModelResponded((TextChunk("hello"),)))

    assert isinstance(outcome.effect, Terminate)
    assert type(outcome.events[-1]) is RunCompleted
    with pytest.raises(StepError, match="does not accept"):
        advance(agent, outcome.state, ModelResponded(()))


def test_live_interpreter_with_a_fixed_run_id() -> None:
    import trio

    agent = LlmAgent(name="w", model=MockModel([say("ok")]))
    result = trio.run(lambda: collect(agent.run(None, "x", interpreter=LiveInterpreter("fixed"))))
    assert result.events[0].run_id == "fixed"  # type: ignore[union-attr]


def test_a_run_takes_its_id_as_the_step_api_does() -> None:
    agent = LlmAgent(name="a", model=MockModel([say("hi"), say("again"), say("and again")]))
    events = trio.run(lambda: collect(agent.run(None, "go", run_id="run-7"))).events
    assert events[0] == RunStarted("a", RunId("run-7"))
    assert run_sync(agent, "go", run_id="run-8").events[0] == RunStarted("a", RunId("run-8"))
    other = trio.run(lambda: collect(agent.run(None, "go"))).events[0]
    assert isinstance(other, RunStarted) and other.run_id not in ("run-7", "run-8")


def test_a_workflow_run_takes_its_id() -> None:
    first = LlmAgent(name="first", model=MockModel([say("one")]))
    pipeline = SequentialAgent("pipeline", "").then(first)
    events = run_sync(pipeline, "go", run_id="wf-1").events
    assert {e.run_id for e in events if isinstance(e, RunStarted)} == {RunId("wf-1")}
