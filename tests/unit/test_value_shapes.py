"""Value shapes at the core's boundary (issue 26, defect 6): every value
that enters the core is canonical JSON data, or is refused with a named
error. Each test here fails on the code before the normal form existed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from helikon import (
    ConfigError,
    HookRegistry,
    LlmAgent,
    PreToolUse,
    ReplaceInput,
    RunContext,
    ToolEffect,
    Trace,
    prepare,
    tool,
)
from helikon.effects import ToolReturned, ToolsExecuted
from helikon.events import ToolOutputItem
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter, TestInterpreter
from helikon.testing import MockModel, call_tools, say

# -- 6a: a hook rewriting arguments with a tuple -----------------------------------------


@tool
async def pick(xs: list[int]) -> str:
    """Pick.

    Args:
        xs: numbers.
    """
    return f"picked {xs}"


def _rewrite(ctx: object, event: object) -> object:
    if isinstance(event, PreToolUse):
        return ReplaceInput({"xs": (1, 2)})
    return None


def _run(agent: LlmAgent[Any], ctx: Any, interpreter: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter)]

    return trio.run(go)


def test_a_tuple_rewrite_runs_live_and_replays_from_its_own_file(tmp_path: Path) -> None:
    ctx = RunContext.ephemeral(None).with_hooks(HookRegistry(hooks=[_rewrite]))

    def agent() -> LlmAgent[Any]:
        return LlmAgent(
            name="p", model=MockModel([call_tools(("pick", {"xs": [5]})), say("ok")]), tools=[pick]
        )

    recorder = RecordingInterpreter(LiveInterpreter("r"))
    live = _run(agent(), ctx, recorder)
    outputs = [e.item for e in live if isinstance(e, ToolOutputItem)]
    assert [(o.content, o.is_error) for o in outputs] == [("picked [1, 2]", False)]

    recorder.trace.dump(tmp_path / "run.jsonl")
    replayed = _run(agent(), ctx, ReplayInterpreter(Trace.load(tmp_path / "run.jsonl")))
    assert replayed == live


# -- 6b: set outputs do not depend on PYTHONHASHSEED ------------------------------------

_SET_TOOL = """
import trio
from typing import Any
from helikon import LlmAgent, tool
from helikon.effects import ToolReturned, ToolsExecuted
from helikon.events import ToolOutputItem
from helikon.interpreters import LiveInterpreter
from helikon.testing import MockModel, call_tools, say

@tool
async def tags() -> Any:
    '''Tags.'''
    return {"alpha", "beta", "gamma", "delta", "epsilon"}

agent = LlmAgent(name="s", model=MockModel([call_tools(("tags", {})), say("ok")]), tools=[tags])

async def go():
    return [e async for e in agent.run(None, "go", interpreter=LiveInterpreter("r"))]

print([e.item.content for e in trio.run(go) if isinstance(e, ToolOutputItem)][0])
"""


def test_a_set_output_reads_the_same_whatever_the_hash_seed() -> None:
    texts = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SET_TOOL],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        texts.add(done.stdout.strip())
    assert texts == {'["alpha","beta","delta","epsilon","gamma"]'}


# -- 6c: a lone surrogate in a tool output -----------------------------------------------


@tool
async def broken() -> Any:
    """Broken."""
    return {"k": "x\ud800y"}


def test_a_lone_surrogate_is_the_same_tool_error_live_and_scripted() -> None:
    def agent() -> LlmAgent[Any]:
        return LlmAgent(name="b", model=MockModel([call_tools(("broken", {})), say("ok")]), tools=[broken])

    live = [e.item for e in _run(agent(), None, LiveInterpreter("run-1")) if isinstance(e, ToolOutputItem)]
    spec = prepare(agent(), RunContext.ephemeral(None), run_id="run-1").spec
    scripted = TestInterpreter(
        [call_tools(("broken", {})), say("ok")], tools={"broken": lambda args: {"k": "x\ud800y"}}
    ).run(spec, "go")
    outputs = [e.item for e in scripted.events if isinstance(e, ToolOutputItem)]

    assert [o.is_error for o in live] == [True]
    assert "tool 'broken' returned a value with no JSON form: $.k: the string holds a lone surrogate" in (
        live[0].content
    )
    assert [o.content for o in outputs] == [o.content for o in live]


# -- 6d: unusable schemas are refused when the agent is built ----------------------------


class RawTool:
    def __init__(self, parameters: Any) -> None:
        self.parameters = parameters

    name = "raw"
    description = "a tool with a hand-written schema"
    output_schema = None
    effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: Any, args: Any) -> Any:
        return "ok"


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "objekt"}, "$.type: 'objekt' is not valid"),
        (
            {"type": "object", "properties": {"s": {"type": "string", "pattern": "("}}},
            "$.properties.s.pattern",
        ),
        ({"type": "object", "properties": {"n": {"type": "integr"}}}, "$.properties.n.type"),
        ({"type": "object", "minimum": math.nan}, "$.minimum: nan is not a JSON number"),
        (["not", "an", "object"], "a schema must be a JSON object"),
    ],
)
def test_an_unusable_schema_is_a_config_error_naming_the_tool_and_path(schema: Any, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        LlmAgent(name="a", model=MockModel([say("x")]), tools=[RawTool(schema)])
    message = str(caught.value)
    assert "tool 'raw' has an unusable parameters schema" in message
    assert where in message


class Source:
    """A tool source (as an MCP server handle is) that serves a bad schema."""

    async def resolve_tools(self) -> list[Any]:
        return [RawTool({"type": "object", "properties": {"s": {"type": "string", "pattern": "[a-"}}})]


def test_a_tool_source_with_a_bad_schema_is_refused_when_resolved() -> None:
    agent: LlmAgent[Any] = LlmAgent(name="a", model=MockModel([say("x")]), tool_sources=[Source()])
    with pytest.raises(ConfigError, match=r"tool 'raw' has an unusable parameters schema: \$\.properties\.s"):
        trio.run(agent.resolved)


# -- 6e: trace interning and "type" keys -------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"type": {"$text": 0}, "x": 1},
        {"type": {"$object": {"a": 1}}},
        {"type": ["a string long enough to be written on a text line"]},
        {"type": "a string long enough to be written on a text line"},
    ],
)
def test_a_payload_with_a_type_key_reads_back_as_the_same_data(payload: Any) -> None:
    @tool
    async def typed() -> Any:
        """Typed."""
        return payload

    model = MockModel([call_tools(("typed", {})), say("ok")])
    agent: LlmAgent[Any] = LlmAgent(name="b", model=model, tools=[typed])
    recorder = RecordingInterpreter(LiveInterpreter("r"))
    _run(agent, None, recorder)

    back = Trace.from_bytes(recorder.trace.to_bytes())

    assert back == recorder.trace
    result = back.steps[1].result
    assert isinstance(result, ToolsExecuted) and isinstance(result.results[0], ToolReturned)
    assert result.results[0].output == payload
