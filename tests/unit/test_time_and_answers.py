"""Issue 26: the machine owns time and every callback's answer; interpreters only perform.

One test per defect, each through the public API (and failing on the code
before the fix): a nested timeout with an observing hook, the step API's
deadline, the one answer table for every callback, escalation as state, and
the scripted interpreter performing guardrails.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from helikon import (
    LlmAgent,
    LoopAgent,
    RunConfig,
    RunContext,
    RunFailed,
    SequentialAgent,
    ToolContext,
    tool,
)
from helikon.context import HookRegistry
from helikon.effects import (
    CallbackRaised,
    ExecuteTools,
    FireHook,
    HookAnswered,
    InvokeTool,
    RunHooks,
    Terminate,
    ToolsExecuted,
)
from helikon.errors import OtherError, StepError, TimedOut
from helikon.events import AgentEvent, ToolOutputItem
from helikon.governance import Allow, Deny, InputPolicy, OnTurnStart, Pass, Tripwire
from helikon.ids import CallId
from helikon.interpreters import TestInterpreter
from helikon.loop import Done, Failed, RunState
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, call_tools, say

BACKENDS = ["trio", "asyncio"]


def events_of(agent: Any, ctx: RunContext[Any], backend: str) -> list[AgentEvent]:
    async def main() -> list[AgentEvent]:
        return [e async for e in agent.run(ctx, "go")]

    return anyio.run(main, backend=backend)


# -- defect 1: a nested timeout plus an observing hook ------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nested_timeout_with_an_observing_hook_ends_with_timed_out(backend: str) -> None:
    @tool
    async def wait() -> str:
        """Wait longer than the child's timeout."""
        await anyio.sleep(2)
        return "ok"

    seen: list[str] = []

    def hook(ctx: Any, event: object) -> None:
        seen.append(type(event).__name__)

    model = MockModel([call_tools(("wait", {})), say("done")])
    worker: LlmAgent[Any] = LlmAgent(name="C", model=model, tools=[wait])
    inner = SequentialAgent("B", "", config=RunConfig(timeout=0.2)).then(worker)
    outer = SequentialAgent("A", "").then(inner)
    ctx = RunContext.ephemeral(None).with_hooks(HookRegistry().with_hook(hook))

    events = events_of(outer, ctx, backend)  # raised StepError: 'B' waits for HooksNotified

    last = events[-1]
    assert isinstance(last, RunFailed) and last.error == TimedOut(0.2)
    assert seen.count("OnSubagentStop") == 2 and seen[-1] == "OnRunComplete"


# -- defect 2: the step API keeps the deadline across calls -------------------------------


@tool
async def nap() -> str:
    """Take a short nap."""
    await anyio.sleep(0.3)
    return "rested"


def napper() -> LlmAgent[Any]:
    script = [call_tools(("nap", {})), call_tools(("nap", {})), call_tools(("nap", {})), say("done")]
    return LlmAgent(name="napper", model=MockModel(script), tools=[nap], config=RunConfig(timeout=0.5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_step_api_bounds_the_run_not_each_call(backend: str) -> None:
    async def main() -> tuple[Any, float]:
        agent, ctx = napper(), RunContext.ephemeral(None)
        began = time.monotonic()
        out = start(agent, "go", run_id="deadline-run", ctx=ctx)
        while type(out.effect) is not Terminate:
            _, result = await perform(agent, out.effect, ctx, run_id="deadline-run")
            out = advance(agent, out.state, result, ctx=ctx)
        return out.state, time.monotonic() - began

    state, took = anyio.run(main, backend=backend)

    assert state.phase == Failed(TimedOut(0.5))  # ran ~0.9 s to Done before
    assert took < 0.85


def test_the_step_api_refuses_a_context_with_other_governance() -> None:
    from helikon import DenyRule
    from helikon.effects import ModelResponded
    from helikon.model import TextChunk

    agent: LlmAgent[Any] = LlmAgent(name="napper", model=MockModel([say("done")]), tools=[nap])
    ctx = RunContext.ephemeral(None)
    out = start(agent, "go", run_id="governed-run", ctx=ctx)
    other = ctx.with_deny_rules([DenyRule.tool("nap")])

    with pytest.raises(StepError, match="permissions changed"):
        advance(agent, out.state, ModelResponded((TextChunk("done"),)), ctx=other)
    done = advance(agent, out.state, ModelResponded((TextChunk("done"),)), ctx=ctx)
    assert isinstance(done.state, RunState) and type(done.state.phase) is Done


# -- defect 3: one answer table for every callback ----------------------------------------


def test_the_answer_table_maps_none_junk_and_exceptions_alike() -> None:
    from helikon.loop import (
        MissingCallback,
        Raised,
        Returned,
        guardrail_verdict,
        hook_step,
        policy_step,
        turn_hook_decision,
    )

    cid = CallId("c1")
    assert hook_step(cid, Returned(None)) == HookAnswered(cid, Allow())
    assert type(hook_step(cid, Returned("yes"))) is CallbackRaised
    assert type(hook_step(cid, Raised(RuntimeError("x")))) is CallbackRaised
    assert turn_hook_decision(Returned(None)) == Allow()
    assert type(turn_hook_decision(Returned(42))) is Deny
    assert turn_hook_decision(Raised(RuntimeError("down"))) == Deny("a hook raised RuntimeError: down")
    assert type(policy_step(cid, Returned(None))) is CallbackRaised
    assert guardrail_verdict(Returned(None)) == Pass()
    assert type(guardrail_verdict(Returned(Tripwire(InputPolicy())))) is Tripwire
    assert type(guardrail_verdict(Raised(ValueError("no")))) is Tripwire
    assert policy_step(cid, Raised(MissingCallback("no permission policy is installed"))) == CallbackRaised(
        cid, "no permission policy is installed"
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("answer", ["raise", "junk"])
def test_a_failing_turn_hook_fails_the_run_closed_under_every_interpreter(backend: str, answer: str) -> None:
    def hook(ctx: Any, event: object) -> object:
        if isinstance(event, OnTurnStart):
            if answer == "raise":
                raise RuntimeError("hook down")
            return "not a decision"
        return None

    agent: LlmAgent[Any] = LlmAgent(name="a", model=MockModel([say("hi")]), hooks=[hook])
    events = events_of(agent, RunContext.ephemeral(None), backend)  # raised out of agent.run before

    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, OtherError)
    assert "a hook stopped the run before turn 1" in last.error.message

    spec = prepare(agent).spec
    run = TestInterpreter([[*say("hi")[0:0]]], hooks=[hook]).run(spec, "go")  # scripted alike
    assert isinstance(run.state, RunState) and isinstance(run.state.phase, Failed)
    assert run.state.phase.error == last.error


def test_a_hook_answering_none_through_advance_allows_the_call() -> None:
    def hook(ctx: Any, event: object) -> None:
        return None

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = MockModel([call_tools(("ping", {})), say("done")])
    agent: LlmAgent[Any] = LlmAgent(name="a", model=model, tools=[ping], hooks=[hook])
    ctx = RunContext.ephemeral(None)
    out = start(agent, "go", run_id="none-hook", ctx=ctx)
    from helikon.effects import HooksRan, ModelResponded
    from helikon.model import ToolCallChunk

    while not isinstance(out.effect, ExecuteTools):
        if type(out.effect) is RunHooks:
            out = advance(agent, out.state, HooksRan(), ctx=ctx)
        else:
            out = advance(agent, out.state, ModelResponded((ToolCallChunk(0, "c1", "ping", "{}"),)), ctx=ctx)
    (step,) = out.effect.steps
    assert type(step) is FireHook
    # raised a bare AssertionError before: None means allow
    out = advance(agent, out.state, ToolsExecuted((HookAnswered(step.call_id, None),)), ctx=ctx)
    assert isinstance(out.effect, ExecuteTools)
    (step,) = out.effect.steps
    assert type(step) is InvokeTool


# -- defect 4: escalation lives in the state ----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_escalation_ends_only_the_iteration_it_happened_in(backend: str) -> None:
    calls: list[int] = []

    @tool
    async def count(ctx: ToolContext[Any]) -> str:
        """Count a call; the first one escalates."""
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            ctx.actions.escalate()
        return "counted"

    def worker() -> LlmAgent[Any]:
        script = [call_tools(("count", {})), say("ok")] * 4
        return LlmAgent(name="w", model=MockModel([s for s in script]), tools=[count])

    inner = LoopAgent("inner", "", max_iterations=2).then(worker())
    outer = LoopAgent("outer", "", max_iterations=2).then(inner)

    events_of(outer, RunContext.ephemeral(None), backend)

    # the inner loop escalates on its first pass only; the later re-entry
    # runs its passes (the flag stuck to a cached environment before)
    assert calls == [1, 2, 3]


# -- time is data: the same readings, the same outcome ------------------------------------


def _readings(*values: float) -> Any:
    """A clock that reads ``values`` in turn (then the last one)."""
    left = list(values)

    def clock() -> float:
        return left.pop(0) if len(left) > 1 else left[0]

    return clock


@tool
def quick() -> str:
    """Answer at once."""
    return "quick result"


def quick_agent() -> LlmAgent[Any]:
    model = MockModel([call_tools(("quick", {})), say("done")])
    return LlmAgent(name="q", model=model, tools=[quick], config=RunConfig(timeout=5.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_work_completed_past_the_deadline_is_the_machines_to_judge(backend: str) -> None:
    from helikon.interpreters import LiveInterpreter

    # began at 100 (deadline 105); the model answered at 101; the tool round
    # came back at 106: past the deadline, whatever the event loop's clock says
    async def main() -> list[AgentEvent]:
        interpreter = LiveInterpreter("timed", clock=_readings(100.0, 101.0, 106.0))
        return [e async for e in quick_agent().run(RunContext.ephemeral(None), "go", interpreter=interpreter)]

    events = anyio.run(main, backend=backend)

    last = events[-1]
    assert isinstance(last, RunFailed) and last.error == TimedOut(5.0)
    assert not [e for e in events if isinstance(e, ToolOutputItem)]  # the late round is not folded

    # the scripted interpreter and the step API, given the same readings, agree
    spec = prepare(quick_agent()).spec
    scripted = TestInterpreter(
        [call_tools(("quick", {})), say("done")],
        tools={"quick": lambda args: "quick result"},
        clock=_readings(100.0, 101.0, 106.0),
    ).run(spec, "go", "timed")
    assert list(scripted.events) == events

    async def stepped() -> Any:
        agent, ctx = quick_agent(), RunContext.ephemeral(None)
        out = start(agent, "go", run_id="timed", ctx=ctx, now=100.0)
        for reading in (101.0, 106.0):
            _, result = await perform(agent, out.effect, ctx, run_id="timed")
            out = advance(agent, out.state, result, ctx=ctx, now=reading)
        return out

    out = anyio.run(stepped, backend=backend)
    assert out.state.phase == Failed(TimedOut(5.0)) and out.state.deadline == 105.0


def test_an_observed_run_keeps_its_interpreters_clock() -> None:
    """An ``ObservingInterpreter`` (what a global tracer provider puts around
    every run) reads time from the interpreter it wraps."""
    from helikon.interpreters import LiveInterpreter
    from helikon.observability import ObservingInterpreter

    inner = LiveInterpreter("timed", clock=_readings(100.0, 101.0, 106.0))
    observed = ObservingInterpreter(inner)

    async def main() -> list[AgentEvent]:
        return [e async for e in quick_agent().run(RunContext.ephemeral(None), "go", interpreter=observed)]

    last = anyio.run(main)[-1]
    assert isinstance(last, RunFailed) and last.error == TimedOut(5.0)
