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


# -- suspended runs record and replay (defect 6) --------------------------------------------

paid: list[int] = []


@tool
async def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: dollars.
    """
    paid.append(amount)
    return f"paid {amount}"


def payers(scripted: bool = True) -> Any:
    def member(name: str, amount: int) -> LlmAgent[Any]:
        script = [call_tools(("c1", "pay", {"amount": amount})), say(f"{name} done")]
        return LlmAgent(name=name, model=MockModel(script if scripted else []), tools=[pay])

    return ParallelAgent("desk", "both").add(member("small", 5)).add(member("big", 7))


def suspending(session: Any = None) -> RunContext[None]:
    from helikon.governance import AskUser

    ctx: RunContext[None] = RunContext.ephemeral(None).with_session(session)
    return ctx.with_permission_policy(lambda c, t, a: AskUser("Pay?")).with_suspend_on_approval()


def test_a_suspended_run_recorded_through_the_step_api_replays_as_one_run() -> None:
    from helikon import RunSuspended, advance, dump_state, load_state, perform, start
    from helikon.effects import ApprovalsGiven, AwaitApproval, Terminate

    paid.clear()
    agent, ctx = payers(), suspending()
    recorder = RecordingInterpreter(LiveInterpreter("r"))
    outcome = start(agent, "go", run_id="r", ctx=ctx, recorder=recorder)
    events = list(outcome.events)
    while not isinstance(outcome.effect, AwaitApproval):
        live, result = trio.run(
            lambda e=outcome.effect: perform(agent, e, ctx, run_id="r", interpreter=recorder)
        )
        outcome = advance(agent, outcome.state, result, ctx=ctx, recorder=recorder)
        events += [*live, *outcome.events]
    suspended = recorder.trace.to_bytes()
    # The recording of the suspended run replays to the same suspension.
    with pytest.raises(RunSuspended):
        run_with(payers(False), suspending(), ReplayInterpreter(Trace.from_bytes(suspended)))

    state = load_state(dump_state(outcome.state))
    answer = ApprovalsGiven(tuple(r.decide(True) for r in outcome.effect.requests))
    outcome = advance(agent, state, answer, ctx=ctx, recorder=recorder)
    events += outcome.events
    while not isinstance(outcome.effect, Terminate):
        live, result = trio.run(
            lambda e=outcome.effect: perform(agent, e, ctx, run_id="r", interpreter=recorder)
        )
        outcome = advance(agent, outcome.state, result, ctx=ctx, recorder=recorder)
        events += [*live, *outcome.events]
    assert sorted(paid) == [5, 7]

    paid.clear()
    replayed = run_with(
        payers(False), suspending(), ReplayInterpreter(Trace.from_bytes(recorder.trace.to_bytes()))
    )
    assert replayed == events
    assert paid == []


def test_agent_resume_records_under_the_state_run_id_and_appends_to_the_session() -> None:
    from helikon import advance, perform, start
    from helikon.effects import ApprovalsGiven, AwaitApproval
    from helikon.sessions import MemorySession
    from helikon.sessions._events import ToolResultRecorded

    paid.clear()
    agent = payers()
    ctx = suspending()
    outcome = start(agent, "go", run_id="run-7", ctx=ctx)
    while not isinstance(outcome.effect, AwaitApproval):
        _, result = trio.run(lambda e=outcome.effect: perform(agent, e, ctx, run_id="run-7"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
    answer = ApprovalsGiven(tuple(r.decide(True) for r in outcome.effect.requests))
    session = MemorySession()
    recorder = RecordingInterpreter(LiveInterpreter())

    async def go() -> Any:
        events = [
            e async for e in agent.resume(suspending(session), outcome.state, answer, interpreter=recorder)
        ]
        return events, await session.events()

    _, logged = trio.run(go)
    assert recorder.trace.header.run_id == "run-7"
    results = sorted(e.content for e in logged if isinstance(e, ToolResultRecorded))
    assert results == ["paid 5", "paid 7"]


def test_a_run_suspended_under_agent_run_leaves_its_calls_open_in_the_session() -> None:
    from helikon import RunSuspended
    from helikon.sessions import MemorySession

    session = MemorySession()
    agent = LlmAgent(name="clerk", model=MockModel([call_tools(("c1", "pay", {"amount": 5}))]), tools=[pay])
    with pytest.raises(RunSuspended):
        run_with(agent, suspending(session), LiveInterpreter())
    logged = trio.run(session.events)
    assert [type(e).__name__ for e in logged] == ["UserMessageEvent", "ToolCallRecorded"]


def test_loose_replay_of_a_tree_tolerates_a_childs_changed_instructions() -> None:
    from helikon import SequentialAgent

    def flow(instructions: str, scripted: bool = True) -> Any:
        first = LlmAgent(
            name="first", model=MockModel([say("one")] if scripted else []), instructions="Be brief."
        )
        second = LlmAgent(
            name="second", model=MockModel([say("two")] if scripted else []), instructions=instructions
        )
        return SequentialAgent("flow").then(first).then(second)

    ctx: RunContext[None] = RunContext.ephemeral(None)
    recorder = RecordingInterpreter(LiveInterpreter("r1"))
    events = run_with(flow("Answer."), ctx, recorder)
    with pytest.warns(UserWarning, match="different agent definition"):
        replayed = run_with(
            flow("Answer politely.", False), ctx, ReplayInterpreter(recorder.trace, strict=False)
        )
    assert replayed == events
