"""Fork (time travel) over recorded runs: helikon.forks and ForkInterpreter.

The fork property: forking a golden trace at any step k with the recorded
answer unchanged, in replay mode, gives the recorded run again, byte for
byte (every step of every golden trace). Then forks that change something:
an edited tool output replayed up to the edit and live after it; a live
fork; an agent tree where only the edited sub-agent goes live; and the
state after any step.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from helikon import LlmAgent, RunContext, codec, dump_state, tool
from helikon.effects import AllPerformed, ApprovalsGiven, ModelResponded, PathResult, ToolsExecuted
from helikon.events import MessageOutput, RunStarted
from helikon.forks import fork, state_after
from helikon.governance import Allow, GuardRule
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.items import ToolResult
from helikon.model import ModelRequest
from helikon.testing import FunctionModel, call_tools
from helikon.trace import Trace
from helikon.workflows import ParallelAgent

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN))
from scenarios import SCENARIOS  # noqa: E402


def _golden(name: str) -> tuple[Any, Any, Trace]:
    agent, _input, ctx = SCENARIOS[name]()
    return agent, ctx, Trace.load(GOLDEN / "traces" / f"{name}.jsonl")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_an_unchanged_replayed_fork_at_any_step_is_the_recorded_run(name: str) -> None:
    agent, ctx, trace = _golden(name)
    assert trace.steps, name
    for k in range(len(trace.steps)):
        # a fresh agent per fork: a scripted model keeps a position of its own
        agent, ctx, _ = _golden(name)
        forked = trio.run(partial(fork, agent, trace, k, ctx=ctx))
        assert forked.trace.to_bytes() == trace.to_bytes(), (name, k)
        assert forked.divergences == ()
        assert [m.how for m in forked.marks] == [
            "edited" if i == k else "replayed" for i in range(len(trace.steps))
        ]


def test_a_fork_with_a_new_run_id_differs_only_by_the_id() -> None:
    agent, ctx, trace = _golden("single_tool")
    forked = trio.run(lambda: fork(agent, trace, 1, ctx=ctx, run_id="fork-1"))
    assert forked.trace.header.run_id == "fork-1"
    assert [(s.effect, s.result) for s in forked.trace.steps] == [(s.effect, s.result) for s in trace.steps]
    started = [e for e in forked.trace.events if isinstance(e, RunStarted)]
    assert [e.run_id for e in started] == ["fork-1"]
    renamed = tuple(
        attrs.evolve(e, run_id=trace.header.run_id) if isinstance(e, RunStarted) else e
        for e in forked.trace.events
    )
    assert renamed == trace.events


@tool
async def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def _echo(request: ModelRequest) -> Any:
    outputs = [m for m in request.messages if isinstance(m, ToolResult)]
    if not outputs:
        return call_tools(("weather", {"city": "Oslo"}))
    return f"The forecast: {outputs[-1].content}."


def _recorded(agent: Any, text: str, *, lock_step: bool = False) -> Trace:
    recorder = RecordingInterpreter(LiveInterpreter(lock_step=lock_step))

    async def go() -> None:
        async for _ in agent.run(RunContext.ephemeral(None), text, interpreter=recorder):
            pass

    trio.run(go)
    return recorder.trace


def _final(trace: Trace) -> str:
    said = [e.item for e in trace.events if isinstance(e, MessageOutput)]
    assert said, trace.events
    return "".join(getattr(p, "text", "") for p in said[-1].content)


def _tool_step(trace: Trace) -> int:
    return next(s.index for s in trace.steps if isinstance(s.result, ToolsExecuted))


def test_an_edited_tool_output_is_replayed_up_to_the_edit_and_live_after_it() -> None:
    model = FunctionModel(_echo)
    agent = LlmAgent(name="forecaster", model=model, tools=[weather])
    trace = _recorded(agent, "weather in Oslo?")
    assert "sunny in Oslo" in _final(trace)
    k = _tool_step(trace)
    recorded = trace.steps[k].result
    assert isinstance(recorded, ToolsExecuted)
    edited = codec.structure(
        _replace_text(codec.unstructure(recorded, ToolsExecuted), "sunny in Oslo", "snowing in Oslo"),
        ToolsExecuted,
    )
    calls = model.calls
    forked = trio.run(lambda: fork(agent, trace, k, edited))
    assert "snowing in Oslo" in _final(forked.trace)
    assert [m.how for m in forked.marks] == ["replayed"] * k + ["edited", "live"]
    assert model.calls == calls + 1  # only the call after the edit went to the model
    (divergence,) = forked.divergences
    assert divergence.step == k + 1
    assert any("snowing" in d for d in divergence.differences), divergence.differences
    # a live fork calls the model for every step after the edit too, and reports no divergence
    live = trio.run(lambda: fork(agent, trace, 0, replay=False))
    assert [m.how for m in live.marks] == ["edited", "live", "live"]
    assert live.divergences == ()
    assert "sunny in Oslo" in _final(live.trace)


def _replace_text(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_text(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_text(v, old, new) for k, v in value.items()}
    return value


def test_a_fork_of_another_user_message_goes_live_at_the_first_model_call() -> None:
    agent = LlmAgent(name="forecaster", model=FunctionModel(_echo), tools=[weather])
    trace = _recorded(agent, "weather in Oslo?")
    forked = trio.run(lambda: fork(agent, trace, None, input="weather in Bergen?"))
    assert forked.marks[0].how == "live"
    assert forked.divergences[0].step == 0
    assert any("Bergen" in d for d in forked.divergences[0].differences)


def test_in_a_tree_only_the_edited_sub_agent_goes_live() -> None:
    def branch(name: str) -> LlmAgent[Any]:
        return LlmAgent(name=name, model=FunctionModel(_echo), tools=[weather])

    def fan_out() -> Any:
        return ParallelAgent("fan", "two forecasts").branch("a", branch("a")).branch("b", branch("b"))

    # recorded part by part (each part's answer its own step): an unchanged fork is the same run
    parted = _recorded(fan_out(), "weather?")
    for k in range(len(parted.steps)):
        again = trio.run(partial(fork, fan_out(), parted, k))
        assert again.trace.to_bytes() == parted.to_bytes(), k
    fan = fan_out()
    trace = _recorded(fan, "weather?", lock_step=True)
    waves = [s for s in trace.steps if isinstance(s.result, AllPerformed)]
    tools = next(s for s in waves if any(isinstance(r.result, ToolsExecuted) for r in s.result.results))
    assert isinstance(tools.result, AllPerformed)
    parts = []
    for part in tools.result.results:
        if part.path[-1] == "a":
            data = _replace_text(codec.unstructure(part.result, ToolsExecuted), "sunny", "foggy")
            parts.append(PathResult(part.path, codec.structure(data, ToolsExecuted)))
        else:
            parts.append(part)
    forked = trio.run(lambda: fork(fan, trace, tools.index, AllPerformed(tuple(parts))))
    after = forked.marks[tools.index + 1]
    assert after.how == "mixed"
    hows = {path[-1]: how for path, how in after.parts}
    assert hows == {"a": "live", "b": "replayed"}
    # the first divergence is the edited sub-agent's; what follows from it (the output) after it
    assert forked.divergences[0].step == tools.index + 1
    assert "in the sub-agent at a" in str(forked.divergences[0])
    text = forked.trace.to_bytes().decode()
    assert "foggy in Oslo" in text and "sunny in Oslo" in text


def test_the_state_after_each_step_is_the_machines_and_dumps_as_json() -> None:
    agent, ctx, trace = _golden("single_tool")
    before = state_after(agent, trace, -1, ctx)
    assert len(before.conversation) == 1
    states = [state_after(agent, trace, k, ctx) for k in range(len(trace.steps))]
    assert all(dump_state(s) for s in states)
    assert len(states[-1].conversation) > len(states[0].conversation)
    with pytest.raises(ValueError, match="not a step"):
        state_after(agent, trace, len(trace.steps), ctx)


def _approval_run() -> tuple[LlmAgent[Any], RunContext[Any], Trace, list[str]]:
    paid: list[str] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        paid.append(str(amount))
        return f"paid {amount}"

    def answer(request: ModelRequest) -> Any:
        outputs = [m for m in request.messages if isinstance(m, ToolResult)]
        if not outputs:
            return call_tools(("pay", {"amount": 12}))
        return f"Result: {outputs[-1].content}"

    agent = LlmAgent(name="desk", model=FunctionModel(answer), tools=[pay])
    ctx = (
        RunContext.ephemeral(None)
        .with_guard_rules([GuardRule.tool("pay")])
        .with_approval_handler(lambda request: Allow())
    )
    recorder = RecordingInterpreter(LiveInterpreter(lock_step=True))

    async def go() -> None:
        async for _ in agent.run(ctx, "pay 12", interpreter=recorder):
            pass

    trio.run(go)
    return agent, ctx, recorder.trace, paid


def test_a_fork_with_an_approval_refused_does_not_run_the_tool() -> None:
    agent, ctx, trace, paid = _approval_run()
    assert paid == ["12"] and "paid 12" in _final(trace)
    k = next(s.index for s in trace.steps if isinstance(s.result, ApprovalsGiven))
    recorded = trace.steps[k].result
    assert isinstance(recorded, ApprovalsGiven)
    refused = ApprovalsGiven(
        tuple(attrs.evolve(d, approved=False, reason="not today") for d in recorded.decisions)
    )
    forked = trio.run(partial(fork, agent, trace, k, refused, ctx=ctx))
    assert paid == ["12"]  # the refused call never ran
    assert "paid 12" not in _final(forked.trace)
    assert forked.marks[k].how == "edited"
    assert all(m.how == "replayed" for m in forked.marks[:k])
    assert forked.divergences and forked.divergences[0].step == k + 1


def test_a_fork_with_an_edited_model_reply_ends_with_it() -> None:
    agent, ctx, trace = _golden("single_tool")
    last = len(trace.steps) - 1
    reply = trace.steps[last].result
    assert isinstance(reply, ModelResponded)
    data = codec.unstructure(reply, ModelResponded)
    chunks = [e for e in data["events"] if e.get("text")]
    assert chunks, data
    for n, chunk in enumerate(chunks):  # the reply as streamed: the first chunk says it all
        chunk["text"] = "Edited." if n == 0 else ""
    edited = codec.structure(data, ModelResponded)
    forked = trio.run(partial(fork, agent, trace, last, edited, ctx=ctx))
    assert _final(forked.trace) == "Edited."
    assert [m.how for m in forked.marks] == ["replayed"] * last + ["edited"]
