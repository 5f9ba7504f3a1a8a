"""The step API drives every agent kind: workflows and agents with handoffs
are agent trees, stepped like a single agent."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from helikon import LlmAgent, advance, pending, perform, prepare, start
from helikon.agents import TreeState
from helikon.effects import CallModel, PerformAll, Terminate
from helikon.interpreters import LiveInterpreter
from helikon.testing import MockModel, call_tools, say
from helikon.workflows import Handoff, ParallelAgent, SequentialAgent


def specialist(name: str, answer: str) -> LlmAgent[Any]:
    return LlmAgent(name=name, description=f"{name}.", model=MockModel([say(answer)]))


def pipeline() -> SequentialAgent:
    return SequentialAgent("desk", "").then(specialist("first", "One.")).then(specialist("second", "Two."))


def triage() -> LlmAgent[Any]:
    return LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_billing", {}))]),
        handoffs=[Handoff.to(specialist("billing", "Refunded."))],
    )


def stepped(make: Any) -> list[Any]:
    agent = make()
    outcome = start(agent, "go", run_id="r")
    events = list(outcome.events)
    while not isinstance(outcome.effect, Terminate):
        live, result = anyio.run(lambda e=outcome.effect: perform(agent, e, run_id="r"))
        outcome = advance(agent, outcome.state, result)
        events += [*live, *outcome.events]
    return events


def run(make: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in make().run(None, "go", interpreter=LiveInterpreter("r"))]

    return anyio.run(go)


@pytest.mark.parametrize("make", [pipeline, triage], ids=["sequential", "handoff"])
def test_stepping_a_tree_gives_the_events_of_agent_run(make: Any) -> None:
    assert stepped(make) == run(make)


def test_a_workflows_first_effect_is_its_childs_model_call_at_its_path() -> None:
    outcome = start(pipeline(), "go", run_id="r")

    assert isinstance(outcome.state, TreeState)
    assert type(outcome.effect) is PerformAll
    (first,) = outcome.effect.effects
    assert first.path == ("first",) and type(first.effect) is CallModel


def test_parallel_branches_are_asked_for_in_one_wave() -> None:
    fan = ParallelAgent("fan", "").add(specialist("a", "A.")).add(specialist("b", "B."))
    outcome = start(fan, "go", run_id="r")

    assert [a.path for a in outcome.effect.effects] == [("a",), ("b",)]  # type: ignore[union-attr]
    assert pending(fan, outcome.state) == outcome.effect


def test_prepare_shows_every_agent_of_the_tree() -> None:
    tree = prepare(triage()).machine.spec
    assert [m.name for m in tree.members] == ["billing", "triage"]


def test_an_agent_used_as_a_tool_is_a_sub_machine_at_tool_and_call_id() -> None:
    from helikon import AgentAsTool

    inner = specialist("inner", "Inner answer.")
    outer = LlmAgent(
        name="outer",
        model=MockModel([call_tools(("c1", "inner", {"input": "hi"})), say("Outer answer.")]),
        tools=[AgentAsTool(inner)],
    )
    outcome = start(outer, "go", run_id="r")
    outcome = advance(outer, outcome.state, anyio.run(lambda: perform(outer, outcome.effect, run_id="r"))[1])

    assert type(outcome.effect) is PerformAll
    (asked,) = outcome.effect.effects
    assert asked.path == ("inner:c1",) and type(asked.effect) is CallModel
    assert type(stepped(lambda: outer)[-1]).__name__ == "RunCompleted"


def test_an_approval_inside_an_agent_used_as_a_tool_suspends_the_whole_run() -> None:
    from helikon import AgentAsTool, AskUser, RunContext, dump_state, load_state, tool
    from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval

    ran: list[int] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: dollars.
        """
        ran.append(amount)
        return "paid"

    inner = LlmAgent(
        name="payer",
        description="Pays.",
        model=MockModel([call_tools(("pay", {"amount": 3})), say("Paid $3.")]),
        tools=[pay],
    )
    outer = LlmAgent(
        name="outer",
        model=MockModel([call_tools(("payer", {"input": "pay 3"})), say("Done.")]),
        tools=[AgentAsTool(inner)],
    )
    ctx = RunContext.ephemeral(None).with_permission_policy(lambda c, t, a: AskUser(f"{t}?"))
    ctx = ctx.with_suspend_on_approval()
    outcome = start(outer, "go", run_id="r", ctx=ctx)
    while not isinstance(outcome.effect, AwaitApproval | Terminate):
        _, result = anyio.run(lambda e=outcome.effect: perform(outer, e, ctx, run_id="r"))
        outcome = advance(outer, outcome.state, result, ctx=ctx)

    # The outer call to the agent tool asked first; approve it, then the inner pay.
    while isinstance(outcome.effect, AwaitApproval):
        state = load_state(dump_state(outcome.state))
        yes = ApprovalsGiven(tuple(ApprovalDecision(r.call_id, True) for r in outcome.effect.requests))
        outcome = advance(outer, state, yes, ctx=ctx)
        while not isinstance(outcome.effect, AwaitApproval | Terminate):
            _, result = anyio.run(lambda e=outcome.effect: perform(outer, e, ctx, run_id="r"))
            outcome = advance(outer, outcome.state, result, ctx=ctx)

    assert ran == [3]
    assert outcome.state.root.state.phase.output == "Done."  # type: ignore[union-attr]


def test_a_cancel_while_on_run_complete_is_due_ends_the_run_cleanly() -> None:
    from helikon import RunContext
    from helikon.effects import NotifyHooks, RunInterrupted
    from helikon.errors import Cancelled

    hooked = LlmAgent(name="hooked", model=MockModel([say("Hi.")]), hooks=[lambda ctx, event: None])
    ctx = RunContext.ephemeral(None)
    outcome = start(hooked, "go", run_id="r", ctx=ctx)
    while not isinstance(outcome.effect, NotifyHooks | Terminate):
        _, result = anyio.run(lambda e=outcome.effect: perform(hooked, e, ctx, run_id="r"))
        outcome = advance(hooked, outcome.state, result, ctx=ctx)
    assert isinstance(outcome.effect, NotifyHooks)  # OnRunComplete is due

    ended = advance(hooked, outcome.state, RunInterrupted(Cancelled()), ctx=ctx)

    assert type(ended.effect) is Terminate and ended.events == ()


def test_the_removed_bounded_handoffs_wrapper_still_works_with_a_warning() -> None:
    import helikon.workflows as workflows
    from helikon.errors import MaxHandoffsExceeded
    from helikon.events import HandoffItem, RunFailed

    with pytest.warns(DeprecationWarning, match="counts handoffs in the machine"):
        bounded = workflows.bounded_handoffs

    async def stream() -> Any:
        for _ in range(3):
            yield HandoffItem("a", "b")

    async def go() -> list[Any]:
        return [e async for e in bounded(stream(), 1)]

    events = anyio.run(go)
    assert events[-1] == RunFailed(MaxHandoffsExceeded(1), events[-1].usage)
    assert sum(type(e) is HandoffItem for e in events) == 1


def test_tool_output_text_is_the_text_the_machine_makes() -> None:
    from helikon.interpreters import tool_output_text

    assert tool_output_text({"tool": "t", "keys": [1]}) == '{"keys":[1],"tool":"t"}'
    assert tool_output_text("plain") == "plain"
