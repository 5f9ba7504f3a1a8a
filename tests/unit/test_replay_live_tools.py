"""Live-tools replay: the model from the recording, tools and instructions
for real, so a regression in a tool or an instructions function shows."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from helikon import AgentEvent, ConfigError, Handoff, LlmAgent, RunContext, Trace, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayDivergence, ReplayInterpreter
from helikon.testing import MockModel, call_tools, say

CALLS: list[tuple[int, int]] = []


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    CALLS.append((a, b))
    return a + b


@tool(name="add")
async def add_off_by_one(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b + 1


def make_agent(tool_: Any = add, instructions: Any = "Add.", model_id: str | None = None) -> LlmAgent[Any]:
    model = MockModel(
        [call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), say("3 and 7")],
        **({"model_id": model_id} if model_id else {}),
    )
    return LlmAgent(name="calc", model=model, instructions=instructions, tools=[tool_])


def run(agent: LlmAgent[Any], interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [event async for event in agent.run(None, "sums?", interpreter=interpreter)]

    return trio.run(go)


def record(agent: LlmAgent[Any]) -> Trace:
    # Lock-step: one trace, whichever call ends first.
    recorder = RecordingInterpreter(LiveInterpreter("r", lock_step=True))
    run(agent, recorder)
    return recorder.trace


def test_live_tools_run_the_tools_and_give_the_recorded_events() -> None:
    trace = record(make_agent())
    CALLS.clear()

    events = run(make_agent(), ReplayInterpreter(trace, live_tools=True))

    assert tuple(events) == trace.events
    assert sorted(CALLS) == [(1, 2), (3, 4)]  # the tools really ran (concurrently)


def test_a_tool_regression_passes_plain_replay_but_not_live_tools() -> None:
    trace = record(make_agent())

    assert tuple(run(make_agent(add_off_by_one), ReplayInterpreter(trace))) == trace.events
    with pytest.raises(ReplayDivergence) as caught:
        run(make_agent(add_off_by_one), ReplayInterpreter(trace, live_tools=True))

    message = str(caught.value)
    assert "replay diverged at step 1: ExecuteTools run live gave another result from add(" in message
    assert "result.results[0].output: expected 3, got 4" in message
    assert caught.value.step == 1


def test_a_dynamic_instructions_regression_shows_under_live_tools() -> None:
    def instructions(ctx: RunContext[Any]) -> str:
        return "Add carefully."

    def changed(ctx: RunContext[Any]) -> str:
        return "Add quickly."

    trace = record(make_agent(instructions=instructions))

    with pytest.raises(ReplayDivergence, match="the dynamic instructions rendered another text"):
        run(make_agent(instructions=changed), ReplayInterpreter(trace, live_tools=True))


def test_a_changed_model_id_diverges_strictly_and_warns_loosely() -> None:
    trace = record(make_agent(model_id="model-a"))

    with pytest.raises(ReplayDivergence, match=r"definition\.model_id: expected 'model-a', got 'model-b'"):
        run(make_agent(model_id="model-b"), ReplayInterpreter(trace, live_tools=True))
    with pytest.warns(UserWarning, match="definition.model_id"):
        run(make_agent(model_id="model-b"), ReplayInterpreter(trace, strict=False))


def test_a_tool_regression_in_a_handoff_target_names_its_path() -> None:
    def tree(tool_: Any) -> LlmAgent[Any]:
        target = LlmAgent(
            name="math",
            model=MockModel([call_tools(("add", {"a": 2, "b": 2})), say("4")]),
            instructions="Add.",
            tools=[tool_],
        )
        return LlmAgent(
            name="triage",
            model=MockModel([call_tools(("transfer_to_math", {}))]),
            instructions="Route.",
            handoffs=[Handoff.to(target)],
        )

    trace = record(tree(add))
    assert tuple(run(tree(add), ReplayInterpreter(trace, live_tools=True))) == trace.events

    with pytest.raises(ReplayDivergence, match="in the sub-agent at math"):
        run(tree(add_off_by_one), ReplayInterpreter(trace, live_tools=True))


def test_a_bare_agent_as_a_handoff_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"wrap an agent as Handoff.to\(agent\)"):
        LlmAgent(name="t", model=MockModel([]), handoffs=[make_agent()])
