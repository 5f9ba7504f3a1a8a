"""Usage limits are machine state: the run ends with ``UsageLimitExceeded``
at the first model call or tool round that would break one, in a single
agent and across an agent tree (handoffs, agents as tools, workflow
children), whose members all count against the root's limits."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anyio
import pytest

from helikon import (
    AgentAsTool,
    Handoff,
    LlmAgent,
    ModelPrice,
    ParallelAgent,
    PriceTable,
    RunConfig,
    RunContext,
    RunError,
    RunFailed,
    SequentialAgent,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    collect,
    tool,
)
from helikon.errors import ConfigError, describe
from helikon.events import TurnStarted
from helikon.testing import MockModel, call_tools, say

USAGE = Usage(input_tokens=100, output_tokens=10)


def _agent(name: str, scripts: list[Any], **kw: Any) -> LlmAgent[None]:
    return LlmAgent(name=name, model=MockModel(scripts, model_id="m1"), **kw)


def _fails(agent: Any, ctx: Any = None, config: RunConfig | None = None) -> tuple[Any, tuple[Any, ...]]:
    async def go() -> tuple[Any, tuple[Any, ...]]:
        with pytest.raises(RunError) as caught:
            await collect(agent.run(ctx, "go", config=config))
        return caught.value.error, caught.value.events

    return anyio.run(go)


def _runs(agent: Any, ctx: Any = None, config: RunConfig | None = None) -> Any:
    return anyio.run(lambda: collect(agent.run(ctx, "go", config=config)))


ran: list[str] = []


@tool
def ping(n: int) -> str:
    """Ping.

    Args:
        n: a number.
    """
    ran.append(f"ping {n}")
    return "pong"


def test_requests_limit_ends_the_run_before_the_call_that_would_break_it() -> None:
    scripts = [call_tools(("ping", {"n": 1}), usage=USAGE), say("done", usage=USAGE)]
    agent = _agent("a", scripts, tools=[ping])
    error, events = _fails(agent, config=RunConfig(usage_limits=UsageLimits(requests=1)))
    assert error == UsageLimitExceeded("requests", 2, 1, "a", ())
    assert isinstance(events[-1], RunFailed) and events[-1].usage.requests == 1
    # The second turn never started: the limit is checked before it.
    assert [e.turn for e in events if isinstance(e, TurnStarted)] == [1]
    assert "requests" in describe(error)


def test_a_run_within_its_limits_reports_requests_and_tool_calls() -> None:
    scripts = [call_tools(("ping", {"n": 1}), ("ping", {"n": 2}), usage=USAGE), say("done", usage=USAGE)]
    agent = _agent("a", scripts, tools=[ping])
    limits = UsageLimits(requests=2, tool_calls=2, input_tokens=200, output_tokens=20, total_tokens=220)
    result = _runs(agent, config=RunConfig(usage_limits=limits))
    assert result.final_output == "done"
    assert (result.usage.requests, result.usage.tool_calls) == (2, 2)


def test_tool_calls_limit_stops_the_round_before_any_tool_runs() -> None:
    ran.clear()
    scripts = [call_tools(("ping", {"n": 1}), ("ping", {"n": 2}), usage=USAGE), say("done")]
    agent = _agent("a", scripts, tools=[ping])
    error, _ = _fails(agent, config=RunConfig(usage_limits=UsageLimits(tool_calls=1)))
    assert error == UsageLimitExceeded("tool_calls", 2, 1, "a", ())
    assert ran == []


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (UsageLimits(input_tokens=99), UsageLimitExceeded("input_tokens", 100, 99, "a")),
        (UsageLimits(output_tokens=9), UsageLimitExceeded("output_tokens", 10, 9, "a")),
        (UsageLimits(total_tokens=109), UsageLimitExceeded("total_tokens", 110, 109, "a")),
    ],
)
def test_token_limits_are_checked_from_the_reported_usage(
    limits: UsageLimits, expected: UsageLimitExceeded
) -> None:
    ran.clear()
    scripts = [call_tools(("ping", {"n": 1}), usage=USAGE), say("done", usage=USAGE)]
    error, _ = _fails(_agent("a", scripts, tools=[ping]), config=RunConfig(usage_limits=limits))
    assert error == expected
    assert ran == []  # the first turn's tokens already broke it: no tool ran


def test_cost_limit_uses_the_priced_usage() -> None:
    table = PriceTable({"m1": ModelPrice(input="1000", output="1000")})  # $0.11 a turn
    ctx = RunContext.ephemeral(None).with_prices(table)
    scripts = [call_tools(("ping", {"n": 1}), usage=USAGE), call_tools(("ping", {"n": 2}), usage=USAGE)]
    scripts.append(say("done", usage=USAGE))
    error, events = _fails(
        _agent("a", scripts, tools=[ping]), ctx, RunConfig(usage_limits=UsageLimits(cost="0.2"))
    )
    assert error == UsageLimitExceeded("cost", Decimal("0.22"), Decimal("0.2"), "a")
    assert events[-1].usage.cost == Decimal("0.22")


def test_cost_limit_over_an_unknown_cost_ends_the_run() -> None:
    scripts = [call_tools(("ping", {"n": 1}), usage=USAGE), say("done", usage=USAGE)]
    error, _ = _fails(_agent("a", scripts, tools=[ping]), config=RunConfig(usage_limits=UsageLimits(cost=1)))
    assert error == UsageLimitExceeded("cost", None, Decimal(1), "a")
    assert "unknown" in describe(error)


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ConfigError):
        UsageLimits(requests=-1)
    with pytest.raises(ConfigError):
        UsageLimits(cost=0.5)  # type: ignore[arg-type]  # money is not a float
    assert UsageLimits(cost="0.5").cost == Decimal("0.5")


# -- trees ----------------------------------------------------------------------------


def test_a_handoff_target_counts_against_the_roots_limits() -> None:
    specialist = _agent(
        "specialist", [call_tools(("ping", {"n": 1}), usage=USAGE), say("done")], tools=[ping]
    )
    triage = _agent(
        "triage",
        [call_tools(("transfer_to_specialist", {}), usage=USAGE)],
        handoffs=[Handoff.to(specialist)],
        config=RunConfig(usage_limits=UsageLimits(requests=2)),
    )
    error, events = _fails(triage)
    # triage's transfer turn and the specialist's first turn are 2 requests;
    # the specialist's second would be the third.
    assert error == UsageLimitExceeded("requests", 3, 2, "specialist", ("specialist",))
    assert events[-1].usage.requests == 2


def test_an_agent_used_as_a_tool_counts_against_its_callers_limits() -> None:
    helper = _agent("helper", [call_tools(("ping", {"n": 1}), usage=USAGE), say("helped")], tools=[ping])
    boss = _agent(
        "boss",
        [call_tools(("helper", {"input": "x"}), usage=USAGE), say("done")],
        tools=[AgentAsTool(helper)],
        config=RunConfig(usage_limits=UsageLimits(total_tokens=150)),
    )
    ran.clear()
    error, _ = _fails(boss)
    # boss's turn (110) and helper's first turn (110) break 150 as helper's
    # round of tool calls is about to run: it never runs.
    assert isinstance(error, UsageLimitExceeded)
    assert (error.limit, error.value, error.maximum, error.agent) == ("total_tokens", 220, 150, "helper")
    assert len(error.path) == 1 and error.path[0].startswith("helper:")
    assert ran == []


def test_workflow_children_count_together() -> None:
    first = _agent("first", [say("one", usage=USAGE)])
    second = _agent("second", [say("two", usage=USAGE)])
    third = _agent("third", [say("three", usage=USAGE)])
    flow = SequentialAgent("flow", "").then(first).then(second).then(third)
    error, _ = _fails(flow, config=RunConfig(usage_limits=UsageLimits(requests=2)))
    assert error == UsageLimitExceeded("requests", 3, 2, "third", ("third",))


def test_a_member_may_have_tighter_limits_of_its_own() -> None:
    specialist = _agent(
        "specialist",
        [call_tools(("ping", {"n": 1}), usage=USAGE), say("done")],
        tools=[ping],
        config=RunConfig(usage_limits=UsageLimits(requests=1)),
    )
    triage = _agent(
        "triage",
        [call_tools(("transfer_to_specialist", {}), usage=USAGE)],
        handoffs=[Handoff.to(specialist)],
        config=RunConfig(usage_limits=UsageLimits(requests=10)),
    )
    error, _ = _fails(triage)
    assert error == UsageLimitExceeded("requests", 2, 1, "specialist", ("specialist",))


def test_a_workflow_members_own_limits_count_its_children() -> None:
    # The inner workflow may make one request; its two children together
    # would make two. The root's limits are far away.
    first = _agent("first", [say("one", usage=USAGE)])
    second = _agent("second", [say("two", usage=USAGE)])
    inner = (
        SequentialAgent("inner", "", config=RunConfig(usage_limits=UsageLimits(requests=1)))
        .then(first)
        .then(second)
    )
    after = _agent("after", [say("never", usage=USAGE)])
    outer = SequentialAgent("outer", "").then(inner).then(after)
    error, events = _fails(outer, config=RunConfig(usage_limits=UsageLimits(requests=10)))
    assert error == UsageLimitExceeded("requests", 2, 1, "second", ("inner", "second"))
    # the second child's model was never called, the step after never began
    assert events[-1].usage.requests == 1
    assert not any(getattr(e, "path", ()) == ("after",) for e in events)


def test_a_workflow_members_own_token_limits_stop_a_parallel_branch() -> None:
    left = _agent("left", [call_tools(("ping", {"n": 1}), usage=USAGE), say("l", usage=USAGE)], tools=[ping])
    right = _agent("right", [say("r", usage=USAGE)])
    both = ParallelAgent("both", "", config=RunConfig(usage_limits=UsageLimits(input_tokens=150)))
    both = both.add(left).add(right)
    ran.clear()
    error, _ = _fails(SequentialAgent("outer", "").then(both))
    # left's and right's first turns spend 200 input tokens: left's round of
    # tool calls is the next spending step, and it never runs.
    assert isinstance(error, UsageLimitExceeded)
    assert (error.limit, error.value, error.maximum) == ("input_tokens", 200, 150)
    assert error.path[:2] == ("both", "left")
    assert ran == []
