"""A tool step is started once, then known (issue 36, item 3).

The state marks a call started when its tool is asked to run; a stored state
with a started call and no result never silently runs the tool again: an
idempotent tool runs again with the same call id, any other is reconciled,
and without a reconcile callback the model is told the outcome is unknown.
Approval answers are consumed once.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio

from helikon import (
    AskUser,
    LlmAgent,
    Reconciled,
    RunContext,
    SequentialAgent,
    ToolContext,
    advance,
    collect,
    dump_state,
    load_state,
    pending_effect,
    perform,
    start,
    tool,
)
from helikon.effects import (
    ApprovalsGiven,
    AwaitApproval,
    ExecuteTools,
    InvokeTool,
    ReconcileTool,
    Terminate,
    ToolOutcomeUnknown,
    ToolsExecuted,
)
from helikon.events import ToolOutputItem
from helikon.ids import CallId
from helikon.loop import MAX_RECONCILES, Reconciling, Running
from helikon.testing import MockModel, call_tools, say


def payer(
    ran: list[str], *, idempotent: bool = False, reconcile: Any = None, run_id: str = "r"
) -> LlmAgent[Any]:
    @tool(idempotent=idempotent, reconcile=reconcile)
    async def pay(ctx: ToolContext[Any], amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        ran.append(ctx.call_id)
        return f"paid {amount}"

    model = MockModel([call_tools(("c1", "pay", {"amount": 5})), say("done")])
    return LlmAgent(name="payer", model=model, instructions="Pay.", tools=[pay])


def stored_before_the_tool(agent: LlmAgent[Any], ctx: RunContext[Any] | None = None) -> bytes:
    """Drive the run with the step API, storing the state after every step,
    up to the step that runs the tool: what the store holds when it runs."""
    outcome = start(agent, "pay 5", run_id="r", ctx=ctx)

    async def go() -> bytes:
        nonlocal outcome
        while not isinstance(outcome.effect, ExecuteTools):
            _, result = await perform(agent, outcome.effect, ctx, run_id="r")
            outcome = advance(agent, outcome.state, result, ctx=ctx)
        return dump_state(outcome.state)

    return trio.run(go)


def finish(agent: LlmAgent[Any], stored: bytes) -> tuple[list[Any], Any]:
    """A fresh job: load the stored state and drive it to its end."""
    state = load_state(stored)
    effect = pending_effect(agent, state)
    events: list[Any] = []

    async def go() -> Any:
        nonlocal state, effect
        while not isinstance(effect, Terminate):
            _, result = await perform(agent, effect, run_id="r")
            outcome = advance(agent, state, result)
            events.extend(outcome.events)
            state, effect = outcome.state, outcome.effect
        return state

    return events, trio.run(go)


def tool_output(events: list[Any]) -> Any:
    (output,) = [e.item for e in events if isinstance(e, ToolOutputItem)]
    return output


def test_a_redelivered_tool_step_does_not_run_the_tool_again() -> None:
    # Defect 3 of issue 36: a job queue redelivering a killed ``perform``
    # ran the tool again, silently. Here the first job ran the tool and died
    # before its result was stored; the redelivered job starts from the store.
    ran: list[str] = []
    agent = payer(ran)
    stored = stored_before_the_tool(agent)
    effect = pending_effect(agent, load_state(stored))
    trio.run(
        lambda: perform(agent, ExecuteTools((InvokeTool(CallId("c1"), "pay", {"amount": 5}),)), run_id="r")
    )
    assert ran == ["c1"]  # the first job's run of the tool

    events, state = finish(agent, stored)

    assert ran == ["c1"]  # never again
    assert effect == ExecuteTools((ReconcileTool(CallId("c1"), "pay", {"amount": 5}),))
    output = tool_output(events)
    assert output.is_error and "the outcome of tool call 'c1' (pay) is unknown" in output.content
    assert "tool 'pay' has no reconcile callback" in output.content
    assert state.phase.output == "done"


def test_an_idempotent_tool_runs_again_with_the_same_call_id() -> None:
    ran: list[str] = []
    agent = payer(ran, idempotent=True)
    stored = stored_before_the_tool(agent)
    ran.append("c1")  # the lost run

    events, _ = finish(agent, stored)

    assert ran == ["c1", "c1"]
    assert tool_output(events).content == "paid 5"


@pytest.mark.parametrize("happened", [True, False])
def test_a_reconcile_callback_says_whether_the_call_happened(happened: bool) -> None:
    ran: list[str] = []
    asked: list[tuple[str, Any]] = []

    def reconcile(ctx: ToolContext[Any], args: Any) -> Reconciled:
        asked.append((ctx.call_id, args))
        return Reconciled(True, "paid 5 (found)") if happened else Reconciled(False)

    agent = payer(ran, reconcile=reconcile)
    events, _ = finish(agent, stored_before_the_tool(agent))

    assert asked == [("c1", {"amount": 5})]
    if happened:
        assert ran == [] and tool_output(events).content == "paid 5 (found)"
    else:
        assert ran == ["c1"] and tool_output(events).content == "paid 5"


def test_the_live_interpreter_resumed_from_a_snapshot_does_not_run_the_tool_again() -> None:
    ran: list[str] = []
    agent = payer(ran)
    state = load_state(stored_before_the_tool(agent))

    result = trio.run(lambda: collect(agent.resume(RunContext.ephemeral(None), state)))

    assert ran == []
    output = tool_output(list(result.events))
    assert output.is_error and "is unknown: it was started before the run was resumed" in output.content


def test_a_call_whose_worker_was_lost_is_reconciled() -> None:
    # An interpreter that cannot tell whether a started call ran (a Temporal
    # activity that did not complete) reports it; the machine reconciles it.
    ran: list[str] = []
    agent = payer(ran, reconcile=lambda ctx, args: Reconciled(False))
    state = load_state(stored_before_the_tool(agent))

    lost = advance(agent, state, ToolsExecuted((ToolOutcomeUnknown(CallId("c1"), "the worker was lost"),)))

    assert lost.state.phase.calls[0].stage == Reconciling("the worker was lost")
    assert lost.effect == ExecuteTools((ReconcileTool(CallId("c1"), "pay", {"amount": 5}),))
    assert pending_effect(agent, load_state(dump_state(lost.state))) == lost.effect
    _, answer = trio.run(lambda: perform(agent, lost.effect, run_id="r"))
    again = advance(agent, lost.state, answer)
    assert again.state.phase.calls[0].stage == Running(reconciles=1)
    assert again.effect == ExecuteTools((InvokeTool(CallId("c1"), "pay", {"amount": 5}),))


def test_the_same_approval_delivered_twice_changes_nothing() -> None:
    ran: list[str] = []
    agent = payer(ran)
    ask = RunContext.ephemeral(None).with_permission_policy(lambda c, t, a: AskUser("Pay?"))
    ctx = ask.with_suspend_on_approval()
    outcome = start(agent, "pay 5", run_id="r", ctx=ctx)

    async def to_the_ask() -> Any:
        nonlocal outcome
        while not isinstance(outcome.effect, AwaitApproval):
            _, result = await perform(agent, outcome.effect, ctx, run_id="r")
            outcome = advance(agent, outcome.state, result, ctx=ctx)
        return outcome

    asked = trio.run(to_the_ask)
    answer = ApprovalsGiven((asked.effect.requests[0].decide(True),))
    first = advance(agent, asked.state, answer, ctx=ctx)
    assert isinstance(first.effect, ExecuteTools)

    again = advance(agent, first.state, answer, ctx=ctx)

    assert again.state == first.state and again.events == ()
    assert again.effect == pending_effect(agent, first.state, ctx=ctx)


def test_an_agent_tree_resumed_from_a_snapshot_reconciles_its_started_calls() -> None:
    ran: list[str] = []
    member = payer(ran)
    agent = SequentialAgent("pipeline").then(member)
    outcome = start(agent, "pay 5", run_id="t")

    async def to_the_tool() -> Any:
        nonlocal outcome
        while "InvokeTool" not in repr(outcome.effect):
            _, result = await perform(agent, outcome.effect, run_id="t")
            outcome = advance(agent, outcome.state, result)
        return outcome

    asked = trio.run(to_the_tool)
    resumed = pending_effect(agent, load_state(dump_state(asked.state)))

    assert "InvokeTool(call_id='c1'" in repr(asked.effect)
    assert "ReconcileTool(call_id='c1', tool='pay'" in repr(resumed)
    assert "InvokeTool" not in repr(resumed) and ran == []


def test_reconciles_of_a_call_whose_workers_keep_dying_are_bounded() -> None:
    # A reconcile that keeps answering "not performed" while every worker
    # that runs the tool again dies: each job loads the store, reconciles,
    # stores the state that runs the tool again, and dies running it. The
    # machine counts the reconciles in the call's state and, at the
    # MAX_RECONCILES-th, gives the model the "outcome unknown" error result.
    ran: list[str] = []
    asked: list[str] = []

    def reconcile(ctx: ToolContext[Any], args: Any) -> Reconciled:
        asked.append(ctx.call_id)
        return Reconciled(False)

    agent = payer(ran, reconcile=reconcile)
    stored = stored_before_the_tool(agent)
    for _ in range(2 * MAX_RECONCILES + 2):  # old code reconciled forever
        state = load_state(stored)
        effect = pending_effect(agent, state)
        assert isinstance(effect, ExecuteTools)
        if not isinstance(effect.steps[0], ReconcileTool):
            break  # the call settled: the run goes on
        _, answer = trio.run(functools.partial(perform, agent, effect, run_id="r"))
        outcome = advance(agent, state, answer)
        stored = dump_state(outcome.state)  # then the worker dies running the tool
        step = outcome.effect.steps[0] if isinstance(outcome.effect, ExecuteTools) else None
        if not isinstance(step, InvokeTool):
            break
    assert asked == ["c1"] * MAX_RECONCILES
    assert ran == []  # each job died before the tool returned
    events, final = finish(agent, stored)
    output = tool_output(list(outcome.events) + events)
    assert output.is_error and "the outcome of tool call 'c1' (pay) is unknown" in output.content
    assert f"{MAX_RECONCILES} times" in output.content
    assert final.phase.output == "done"
