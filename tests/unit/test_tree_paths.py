"""Agent trees address members by path and key, never by name alone (issue 27).

Two members may share a name and each runs with its own spec; a model's
duplicate call id within one turn is renamed; an approval answers exactly
the call (path and id) it names.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from helikon import (
    LlmAgent,
    ParallelAgent,
    RunContext,
    SequentialAgent,
    advance,
    collect,
    perform,
    start,
    tool,
)
from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval, Terminate
from helikon.errors import StepError
from helikon.governance import AskUser
from helikon.items import AgentInput, SystemMessage, text_of
from helikon.testing import MockModel, call_tools, say

paid: list[int] = []


@tool
async def pay(amount: int) -> str:
    """Pay money.

    Args:
        amount: dollars.
    """
    paid.append(amount)
    return f"paid {amount}"


def test_members_sharing_a_name_run_with_their_own_spec() -> None:
    first, second = MockModel([say("one")]), MockModel([say("two")])
    writer_1 = LlmAgent(name="writer", model=first, instructions="FIRST")
    writer_2 = LlmAgent(name="writer", model=second, instructions="SECOND")
    flow = SequentialAgent("pipeline", children=(("a", writer_1), ("b", writer_2)))

    async def go() -> str:
        result = await collect(flow.run(RunContext.ephemeral(None), AgentInput.from_user_text("hi")))
        return result.final_output

    assert trio.run(go) == "two"
    request = second.requests[0]
    systems = [text_of(m.content) for m in request.messages if isinstance(m, SystemMessage)]
    assert (request.instructions, systems) == ("SECOND", [])


def suspending() -> RunContext[None]:
    ctx: RunContext[None] = RunContext.ephemeral(None)
    return ctx.with_permission_policy(lambda c, t, a: AskUser("Pay?")).with_suspend_on_approval()


def run_until_suspended(agent: Any, ctx: RunContext[None]) -> Any:
    outcome = start(agent, "go", run_id="r", ctx=ctx)
    while not isinstance(outcome.effect, Terminate | AwaitApproval):
        _, result = trio.run(lambda e=outcome.effect: perform(agent, e, ctx, run_id="r"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
    return outcome


def finish(agent: Any, outcome: Any, ctx: RunContext[None]) -> Any:
    while not isinstance(outcome.effect, Terminate):
        _, result = trio.run(lambda e=outcome.effect: perform(agent, e, ctx, run_id="r"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
    return outcome


def test_a_duplicate_call_id_in_one_turn_is_renamed_and_approved_alone() -> None:
    paid.clear()
    model = MockModel(
        [call_tools(("c1", "pay", {"amount": 5}), ("c1", "pay", {"amount": 100000})), say("done")]
    )
    agent = LlmAgent(name="clerk", model=model, tools=[pay])
    ctx = suspending()
    outcome = run_until_suspended(agent, ctx)
    assert isinstance(outcome.effect, AwaitApproval)
    requests = outcome.effect.requests
    assert [r.call_id for r in requests] == ["c1", "c1_1"]
    answer = ApprovalsGiven((requests[0].decide(True), requests[1].decide(False, "too much")))
    finish(agent, advance(agent, outcome.state, answer, ctx=ctx), ctx)
    assert paid == [5]


def branches() -> ParallelAgent:
    small = LlmAgent(
        name="small", model=MockModel([call_tools(("c1", "pay", {"amount": 5})), say("ok")]), tools=[pay]
    )
    big = LlmAgent(
        name="big", model=MockModel([call_tools(("c1", "pay", {"amount": 100000})), say("ok")]), tools=[pay]
    )
    return ParallelAgent("desk", "both").add(small).add(big)


def test_two_branches_with_the_same_call_id_are_answered_apart() -> None:
    paid.clear()
    agent, ctx = branches(), suspending()
    outcome = run_until_suspended(agent, ctx)
    assert isinstance(outcome.effect, AwaitApproval)
    requests = outcome.effect.requests
    assert sorted((r.path, r.call_id) for r in requests) == [(("big",), "c1"), (("small",), "c1")]
    answer = ApprovalsGiven(tuple(r.decide(r.path == ("small",), "no") for r in requests))
    finish(agent, advance(agent, outcome.state, answer, ctx=ctx), ctx)
    assert paid == [5]


def test_an_ambiguous_answer_without_a_path_is_refused() -> None:
    paid.clear()
    agent, ctx = branches(), suspending()
    outcome = run_until_suspended(agent, ctx)
    with pytest.raises(StepError, match="answer each with its path"):
        advance(agent, outcome.state, ApprovalsGiven((ApprovalDecision("c1", True),)), ctx=ctx)
    assert paid == []
