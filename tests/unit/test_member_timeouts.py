"""Issue 26: a tree member's own ``RunConfig.timeout`` is the machine's.

A workflow child or handoff target with a timeout of its own gets its
deadline from the clock reading the tree is given once it began, and the
machine decides from later readings when it is out of time — so the live
interpreter (trio and asyncio), the scripted one and the step API give the
same events for the same readings, whatever the event loop's clock says.
Before, a member's timeout was measured by the live interpreter's event-loop
clock only: with scripted readings the run completed.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from helikon import LlmAgent, RunConfig, RunContext, RunFailed, SequentialAgent, tool
from helikon.context import HookRegistry
from helikon.effects import Terminate
from helikon.errors import MaxIterationsExceeded, TimedOut
from helikon.events import AgentEvent, RunCompleted, ToolOutputItem
from helikon.interpreters import LiveInterpreter, TestInterpreter
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, call_tools, say

BACKENDS = ["trio", "asyncio"]


class Ticks:
    """A clock that reads 100, 101, 102, ... (one second per reading)."""

    def __init__(self) -> None:
        self.reading = 99.0

    def __call__(self) -> float:
        self.reading += 1.0
        return self.reading


@tool
def ping() -> str:
    """Answer at once."""
    return "pong"


SCRIPT = [call_tools(("ping", {}))] * 6 + [say("done")]


def tree(member_timeout: float | None, seen: list[str]) -> tuple[Any, RunContext[Any]]:
    worker: LlmAgent[Any] = LlmAgent(name="C", model=MockModel(list(SCRIPT)), tools=[ping])
    inner = SequentialAgent("B", "", config=RunConfig(timeout=member_timeout)).then(worker)
    outer = SequentialAgent("A", "").then(inner)

    def hook(ctx: Any, event: object) -> None:
        seen.append(type(event).__name__)

    return outer, RunContext.ephemeral(None).with_hooks(HookRegistry().with_hook(hook))


def live(backend: str, member_timeout: float | None) -> tuple[list[AgentEvent], list[str]]:
    seen: list[str] = []
    agent, ctx = tree(member_timeout, seen)

    async def main() -> list[AgentEvent]:
        interpreter = LiveInterpreter("member-timeout", clock=Ticks())
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter)]

    return anyio.run(main, backend=backend), seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_members_timeout_is_decided_from_the_clock_readings(backend: str) -> None:
    events, seen = live(backend, 5.0)

    last = events[-1]
    assert isinstance(last, RunFailed) and last.error == TimedOut(5.0)  # completed before: wall time is ~0
    assert seen.count("OnSubagentStop") == 2 and seen[-1] == "OnRunComplete"

    untimed, _ = live(backend, None)
    assert isinstance(untimed[-1], RunCompleted)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_step_api_and_the_live_run_agree_on_a_members_timeout(backend: str) -> None:
    events, _ = live(backend, 5.0)
    assert isinstance(events[-1], RunFailed) and events[-1].error == TimedOut(5.0)

    async def stepped() -> list[AgentEvent]:
        seen: list[str] = []
        agent, ctx = tree(5.0, seen)
        clock = Ticks()
        out = start(agent, "go", run_id="member-timeout", ctx=ctx, now=clock())
        got = list(out.events)
        while type(out.effect) is not Terminate:
            live_events, result = await perform(agent, out.effect, ctx, run_id="member-timeout")
            got.extend(live_events)
            out = advance(agent, out.state, result, ctx=ctx, now=clock())
            got.extend(out.events)
        return got

    assert anyio.run(stepped, backend=backend) == events


def test_the_scripted_interpreter_agrees_on_a_members_timeout() -> None:
    events, _ = live("trio", 5.0)
    assert isinstance(events[-1], RunFailed) and events[-1].error == TimedOut(5.0)
    seen: list[str] = []
    agent, ctx = tree(5.0, seen)
    env = prepare(agent, ctx, run_id="member-timeout")
    scripted = TestInterpreter(
        SCRIPT, tools={"ping": lambda args: "pong"}, hooks=ctx.hooks.hooks, clock=Ticks()
    ).run(env.machine.spec, "go", "member-timeout")

    assert list(scripted.events) == events


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_member_entered_again_gets_a_fresh_deadline(backend: str) -> None:
    # The live interpreter cut a member's work short at a deadline measured
    # once per run (from the member's first effect): the loop's second pass
    # timed out at once. The machine gives each entry its own deadline, and
    # the live interpreter cuts work short at the machine's deadline.
    from helikon import LoopAgent

    @tool
    async def nap() -> str:
        """Nap a little."""
        await anyio.sleep(0.25)
        return "rested"

    script = [call_tools(("nap", {})), say("ok")] * 2
    worker: LlmAgent[Any] = LlmAgent(name="C", model=MockModel(script), tools=[nap])
    inner = SequentialAgent("B", "", config=RunConfig(timeout=0.4)).then(worker)
    loop = LoopAgent("L", "", max_iterations=2).then(inner)

    async def main() -> list[AgentEvent]:
        return [e async for e in loop.run(RunContext.ephemeral(None), "go")]

    events = anyio.run(main, backend=backend)

    # both passes ran whole (the second was cut short with TimedOut(0.4) before)
    last = events[-1]
    assert isinstance(last, RunFailed) and last.error == MaxIterationsExceeded(2)
    assert sum(isinstance(e, ToolOutputItem) for e in events) == 2
