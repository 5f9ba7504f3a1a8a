"""Tool sources: an agent's tools that arrive when it is resolved.

``LlmAgent(tool_sources=[...])`` (or the book's ``mcp_servers=[...]``) keeps
the sources; ``await agent.resolved()`` (or the start of ``agent.run``) asks
each for its tools, in order, and merges them after the agent's own. A name
used twice anywhere is a ConfigError that names both places it came from.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import attrs
import pytest

from helikon import (
    ConfigError,
    LlmAgent,
    ToolOutputItem,
    ToolSource,
    advance,
    collect,
    dump_state,
    load_state,
    perform,
    start,
    tool,
)
from helikon.effects import ExecuteTools
from helikon.protocols import Tool
from helikon.testing import MockModel, call_tools, say


@tool
def balance() -> str:
    """The account balance."""
    return "$1,200"


@tool(idempotent=True)  # resumed with its call started: run again, not reconciled
def spending(month: str) -> str:
    """Spending in a month.

    Args:
        month: The month's name.
    """
    return f"$300 in {month}"


@tool(name="balance")
def other_balance() -> str:
    """Another balance."""
    return "$0"


@attrs.define
class ListSource:
    """A tool source handing out a fixed list, counting how often it is asked."""

    name: str
    items: Sequence[object]
    asked: int = 0

    async def resolve_tools(self) -> Sequence[Tool]:
        self.asked += 1
        await anyio.sleep(0)
        return self.items  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"ListSource({self.name})"


def resolve(agent: LlmAgent[None]) -> LlmAgent[None]:
    return anyio.run(agent.resolved)


def test_a_tool_source_is_a_protocol_any_object_with_resolve_tools_fits() -> None:
    assert isinstance(ListSource("s", []), ToolSource)
    assert not isinstance(object(), ToolSource)


def test_resolving_merges_the_sources_tools_after_the_agents_own_in_order() -> None:
    first, second = ListSource("first", [spending]), ListSource("second", [balance])
    agent = LlmAgent(name="budget", model=MockModel(), tools=[], tool_sources=[first], mcp_servers=[second])
    assert agent.tool_map == {} and agent.spec.tools == ()
    resolved = resolve(agent)
    assert [t.name for t in resolved.tools] == ["spending", "balance"]
    assert [t.name for t in resolved.spec.tools] == ["spending", "balance"]
    assert resolved.tool_sources == () and resolved.mcp_servers == ()
    assert (first.asked, second.asked) == (1, 1)
    assert resolve(resolved).tools == resolved.tools and (first.asked, second.asked) == (1, 1)  # nothing left


def test_a_name_clash_with_the_agents_own_tools_names_both_sides() -> None:
    agent = LlmAgent(
        name="budget",
        model=MockModel(),
        tools=[balance],
        tool_sources=[ListSource("remote", [other_balance])],
    )
    with pytest.raises(ConfigError) as clash:
        resolve(agent)
    assert str(clash.value) == (
        "agent 'budget': two tools are named 'balance' (from the agent's own tools and from "
        "ListSource(remote)); give an MCP server a tool_prefix to keep them apart"
    )


def test_a_name_clash_between_sources_or_within_one_is_a_config_error() -> None:
    across = LlmAgent(
        name="budget",
        model=MockModel(),
        tool_sources=[ListSource("a", [balance])],
        mcp_servers=[ListSource("b", [other_balance])],
    )
    with pytest.raises(ConfigError, match=r"'balance' \(from ListSource\(a\) and from ListSource\(b\)\)"):
        resolve(across)
    within = LlmAgent(
        name="budget", model=MockModel(), tool_sources=[ListSource("a", [balance, other_balance])]
    )
    with pytest.raises(ConfigError, match=r"from ListSource\(a\) and from ListSource\(a\)"):
        resolve(within)


def test_a_source_must_give_tools_and_be_a_source() -> None:
    with pytest.raises(ConfigError, match="which is not a tool"):
        resolve(LlmAgent(name="budget", model=MockModel(), tool_sources=[ListSource("a", ["not a tool"])]))
    with pytest.raises(ConfigError, match="is not a tool source"):
        LlmAgent(name="budget", model=MockModel(), tool_sources=[balance])  # a tool, not a source


def test_run_resolves_first_so_the_model_can_call_source_tools() -> None:
    source = ListSource("remote", [spending])
    model = MockModel([call_tools(("spending", {"month": "May"})), say("You spent $300 in May.")])
    agent = LlmAgent(name="budget", model=model, mcp_servers=[source])

    async def main() -> tuple[str, list[object]]:
        result = await collect(agent.run(None, "What did I spend in May?"))
        return result.final_output, [e.item.content for e in result.events if isinstance(e, ToolOutputItem)]

    final, outputs = anyio.run(main)
    assert final == "You spent $300 in May." and outputs == ["$300 in May"]
    assert [t.name for t in model.requests[0].tools] == ["spending"]
    assert source.asked == 1


def test_an_unresolved_agent_cannot_be_driven_directly() -> None:
    agent = LlmAgent(name="budget", model=MockModel(), tool_sources=[ListSource("remote", [spending])])
    with pytest.raises(ConfigError, match=r"unresolved tool sources \(`await agent.resolved\(\)`\)"):
        agent.make_env(None, None)  # type: ignore[arg-type]


def test_with_tool_sources_replaces_the_sources() -> None:
    agent = LlmAgent(name="budget", model=MockModel()).with_tool_sources(ListSource("x", [balance]))
    assert [repr(s) for s in agent.tool_sources] == ["ListSource(x)"]
    assert [t.name for t in resolve(agent).tools] == ["balance"]


def test_resume_resolves_the_sources_first() -> None:
    def agent() -> LlmAgent[None]:
        model = MockModel([call_tools(("spending", {"month": "May"})), say("done")])
        return LlmAgent(name="a", model=model, tool_sources=[ListSource("s", [spending])])

    async def go() -> list[object]:
        first = await agent().resolved()
        outcome = start(first, "May?", run_id="r")
        while not isinstance(outcome.effect, ExecuteTools):
            _, result = await perform(first, outcome.effect, run_id="r")
            outcome = advance(first, outcome.state, result)
        state = load_state(dump_state(outcome.state))
        later = agent()  # a fresh process: the sources are not resolved yet
        return [event async for event in later.resume(None, state)]

    events = anyio.run(go)
    assert [e.item.content for e in events if isinstance(e, ToolOutputItem)] == ["$300 in May"]
