"""Record any scripted run through the live interpreter, replay it with no
IO: the replay's events are the recording's, byte for byte."""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from helikon import AgentEvent, LlmAgent, RunConfig, Trace
from helikon._json import JsonObject, JsonValue
from helikon.codec import to_json
from helikon.context import ToolContext
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.model import ToolDef, ToolEffect
from helikon.testing import MockModel
from helikon.testing.strategies import model_turns, tool_def_lists


class ScriptedTool:
    """A tool from a generated definition: returns its arguments, reversed keys."""

    def __init__(self, spec: ToolDef) -> None:
        self.name = spec.name
        self.description = spec.description
        self.parameters = spec.parameters
        self.output_schema = None
        self.effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        # Keys in an order of their own: the text the model sees does not
        # depend on it (the machine sorts them), so the replay is the same.
        return {"tool": self.name, "keys": sorted(args, reverse=True)}


@st.composite
def scripted_runs(draw: st.DrawFn) -> tuple[tuple[ToolDef, ...], list[list[Any]], int]:
    tools = draw(tool_def_lists(min_size=1, max_size=3))
    turns = draw(st.lists(model_turns(tools), min_size=1, max_size=5))
    return tools, turns, draw(st.integers(1, 6))


def run(agent: LlmAgent[Any], interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [event async for event in agent.run(None, "go", interpreter=interpreter)]

    return trio.run(go)


@given(scripted_runs())
def test_replaying_a_recording_gives_the_same_events(script: tuple[Any, ...]) -> None:
    tools, turns, max_turns = script

    def agent() -> LlmAgent[Any]:
        return LlmAgent(
            name="prop",
            model=MockModel([list(t) for t in turns]),
            tools=[ScriptedTool(t) for t in tools],
            config=RunConfig(max_turns=max_turns),
        )

    recorder = RecordingInterpreter(LiveInterpreter("run-p"))
    recorded = run(agent(), recorder)
    trace = Trace.from_bytes(recorder.trace.to_bytes())

    replayed = run(agent(), ReplayInterpreter(trace))

    assert replayed == recorded
    assert [to_json(e, AgentEvent) for e in replayed] == [to_json(e, AgentEvent) for e in recorded]
    assert trace.to_bytes() == recorder.trace.to_bytes()
