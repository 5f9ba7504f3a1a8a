"""Decoding is strict (issue 26, defect 7): a value of the wrong type in a
snapshot, a trace or a request body is refused naming its field path, never
coerced; what ``dump_state`` writes reads back equal, or is refused. Each
test here fails on the code that coerced."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
import trio

from helikon import LlmAgent, RunContext, Trace, dump_state, load_state, prepare, tool
from helikon.errors import ModelError, ModelFailed, OtherModelFailure, TimedOut, describe
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, TestInterpreter
from helikon.items import ToolCall
from helikon.loop import RunState
from helikon.loop._calls import Running, ToolCallState
from helikon.loop._states import CallingModel, ExecutingTools, Failed
from helikon.snapshots import StateFormatError
from helikon.testing import MockModel, call_tools, say
from helikon.trace import TraceFormatError

# -- load_state --------------------------------------------------------------------------


def _snapshot() -> dict[str, Any]:
    agent: LlmAgent[Any] = LlmAgent(name="a", model=MockModel([say("hi")]))
    spec = prepare(agent, RunContext.ephemeral(None), run_id="run-1").spec
    done = TestInterpreter([call_tools(("t", {})), say("hi")]).run(spec, "go")
    data: dict[str, Any] = json.loads(dump_state(done.state))
    return data


def _with(data: dict[str, Any], path: list[str | int], value: object) -> bytes:
    changed = copy.deepcopy(data)
    where: Any = changed
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return json.dumps(changed).encode()


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (["state", "phase"], {"type": "CallingModel", "turn": 1, "rendered": "no"}, "state.phase.rendered"),
        (["state", "strikes"], "5", "state.strikes"),
        (["state", "strikes"], 1.5, "state.strikes"),
        (["state", "agent"], 7, "state.agent"),
        (["state", "run_id"], 7, "state.run_id"),
        (["state", "conversation", 0, "content", 0, "text"], None, "state.conversation[0].content[0].text"),
        (["state", "conversation", 2, "is_error"], "no", "state.conversation[2].is_error"),
        (["state", "conversation"], "abc", "state.conversation"),
        (["state", "conversation"], [None], "state.conversation[0]"),
        (["state", "usage", "input_tokens"], True, "state.usage.input_tokens"),
    ],
)
def test_load_state_refuses_a_wrong_type_naming_its_path(
    path: list[str | int], value: object, named: str
) -> None:
    data = _snapshot()
    assert load_state(json.dumps(data)) is not None

    with pytest.raises(StateFormatError) as caught:
        load_state(_with(data, path, value))

    assert f"@ {named}" in str(caught.value)
    assert str(caught.value).startswith("malformed state snapshot: expected ")


# -- dump_state --------------------------------------------------------------------------


def _calling(args: Any) -> RunState:
    call = ToolCallState(ToolCall("c1", "t", "{}"), args, Running())  # type: ignore[arg-type]
    return RunState("r", "a", ExecutingTools(1, (call,)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "named"),
    [
        (RunState("r", "a", Failed(TimedOut(math.nan))), "state.phase.error.timeout_s: nan"),  # type: ignore[arg-type]
        (_calling({1: "x"}), "state.phase.calls[0].args: a dict key must be a string"),
        (_calling({"a": (1, 2)}), "state.phase.calls[0].args.a: a value of type tuple"),
        (RunState("r", "a", CallingModel(1, rendered="no")), "state.phase.rendered"),  # type: ignore[arg-type]
    ],
)
def test_dump_state_refuses_what_would_not_read_back_equal(state: RunState, named: str) -> None:
    with pytest.raises(StateFormatError) as caught:
        dump_state(state)
    assert named in str(caught.value)


def test_dump_state_round_trips_a_state_exactly() -> None:
    state = _calling({"a": [1, 2.5, None, "x"]})
    assert load_state(dump_state(state)) == state


# -- Trace.load --------------------------------------------------------------------------


@tool
async def echo() -> str:
    """Echo."""
    return "x"


def _recorded_lines() -> list[dict[str, Any]]:
    model = MockModel([call_tools(("echo", {})), say("ok")])
    agent: LlmAgent[Any] = LlmAgent(name="b", model=model, tools=[echo])
    recorder = RecordingInterpreter(LiveInterpreter("r"))

    async def go() -> None:
        async for _ in agent.run(None, "go", interpreter=recorder):
            pass

    trio.run(go)
    return [json.loads(line) for line in recorder.trace.to_lines()]


def _load(lines: list[dict[str, Any]]) -> Trace:
    return Trace.from_lines([json.dumps(line).encode() for line in lines])


def test_trace_load_refuses_a_wrong_type_naming_the_line_and_path() -> None:
    lines = _recorded_lines()
    assert _load(lines).events  # as written, it reads
    number, step = next(
        (n, line) for n, line in enumerate(lines) if line.get("result", {}).get("escalated") is False
    )

    for key, value, named in [
        ("escalated", "no", "@ result.escalated"),
        ("escalated", 0, "@ result.escalated"),
    ]:
        changed = copy.deepcopy(lines)
        changed[number]["result"][key] = value
        with pytest.raises(TraceFormatError) as caught:
            _load(changed)
        assert f"<trace>:{number + 1}: malformed trace line: expected a boolean" in str(caught.value)
        assert named in str(caught.value)

    changed = copy.deepcopy(lines)
    changed[number]["index"] = "1"
    with pytest.raises(TraceFormatError, match="expected an integer"):
        _load(changed)
    assert step["kind"] == "step"


def test_trace_load_refuses_a_tool_result_flag_given_as_text() -> None:
    lines = _recorded_lines()
    number = next(n for n, line in enumerate(lines) if "ToolOutputItem" in json.dumps(line.get("events", [])))
    changed = copy.deepcopy(lines)
    for event in changed[number]["events"]:
        if event["type"] == "ToolOutputItem":
            event["item"]["is_error"] = "no"

    with pytest.raises(TraceFormatError, match=r"expected a boolean, got a string \('no'\)"):
        _load(changed)


# -- the server's request decoder --------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"messages": [None]}, "@ messages[0]"),
        ({"messages": [{"type": "UserMessage", "content": [{"type": "TextPart", "text": None}]}]}, "text"),
        ({"messages": [{"type": "UserMessage", "content": "hello"}]}, "messages[0].content"),
    ],
)
def test_the_server_refuses_a_wrong_type_in_a_body_naming_the_field(body: Any, named: str) -> None:
    pytest.importorskip("starlette")
    from helikon.server._http import BadRequest, run_input

    with pytest.raises(BadRequest) as caught:
        run_input(body)

    assert caught.value.status == 422
    assert named in str(caught.value.message)


# -- ModelError --------------------------------------------------------------------------


def test_a_model_error_built_from_text_describes_itself() -> None:
    error = ModelError("upstream 503")

    assert error.failure == OtherModelFailure("upstream 503")
    assert describe(ModelFailed(error.failure)) == "model call failed: upstream 503"


def test_a_model_error_built_from_anything_else_is_refused_naming_the_factories() -> None:
    with pytest.raises(TypeError, match=r"ModelError\.unavailable"):
        ModelError(503)  # type: ignore[arg-type]
