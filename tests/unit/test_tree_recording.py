"""Agent trees record and replay like single agents, secrets scrubbed (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from helikon import AgentEvent, LlmAgent, ParallelAgent, RunContext, Trace, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.testing import MockModel, call_tools, say
from helikon.workflows import Handoff

SECRET = "sk-live-tree-0123456789abcdef"


@tool
async def leak() -> str:
    """Leak the key."""
    return f"the key is {SECRET}"


def run_with(agent: Any, ctx: RunContext[None], interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter)]

    return trio.run(go)


def handoff_tree(scripted: bool = True) -> Any:
    leaky = LlmAgent(
        name="leaky",
        model=MockModel([call_tools(("leak", {})), say("ok")] if scripted else []),
        tools=[leak],
    )
    return LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_leaky", {})), say("unused")] if scripted else []),
        handoffs=[Handoff.to(leaky)],
    )


def parallel_tree(scripted: bool = True) -> Any:
    def member(name: str) -> LlmAgent[Any]:
        return LlmAgent(
            name=name,
            model=MockModel([call_tools(("leak", {})), say("ok")] if scripted else []),
            tools=[leak],
        )

    return ParallelAgent("desk", "both").add(member("left")).add(member("right"))


@pytest.mark.parametrize("build", [handoff_tree, parallel_tree])
def test_no_secret_reaches_the_trace_of_a_tree(build: Any) -> None:
    ctx = RunContext.ephemeral(None).with_extra_secrets([SECRET])
    recorder = RecordingInterpreter(LiveInterpreter("r1"))
    events = run_with(build(), ctx, recorder)
    data = recorder.trace.to_bytes()
    assert SECRET.encode() not in data
    assert run_with(build(False), ctx, ReplayInterpreter(Trace.from_bytes(data))) == events
