"""The composites' constructors: the book's positional forms, and bad arguments refused early.

Every constructor in :mod:`helikon.workflows` checks what it is given and
raises :class:`~helikon.ConfigError` naming the field, at construction, not a
``TypeError`` from deep inside the first run.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from helikon import (
    AgentAsTool,
    ConfigError,
    GraphAgent,
    Handoff,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    RunConfig,
    RunError,
    SequentialAgent,
    SwarmAgent,
    ToolEffect,
    collect,
)
from helikon.errors import MaxIterationsExceeded
from helikon.testing import MockModel, say


def agent(name: str, *texts: str) -> LlmAgent[Any]:
    return LlmAgent(name=name, model=MockModel([say(t) for t in texts]), description=f"The {name} agent.")


# -- the positional forms ---------------------------------------------------------------


def test_loop_agent_takes_name_description_and_max_iterations_positionally() -> None:
    refine = LoopAgent("draft-and-critique", "Iterate until the critic is satisfied.", 2)

    assert refine.max_iterations == 2 and refine.spec.max_iterations == 2
    assert refine.description == "Iterate until the critic is satisfied."


def test_a_positional_loop_runs_that_many_passes() -> None:
    drafter = agent("drafter", "draft 1", "draft 2", "draft 3")
    refine = LoopAgent("refine", "", 2).then(drafter)

    with pytest.raises(RunError) as caught:
        anyio.run(lambda: collect(refine.run(None, "go")))

    assert caught.value.error == MaxIterationsExceeded(2)
    assert isinstance(drafter.model, MockModel) and drafter.model.calls == 2


def test_children_and_config_are_keywords_so_each_workflow_keeps_its_own_order() -> None:
    pipeline = SequentialAgent("p", "d", children=[("a", agent("a"))], config=RunConfig(max_turns=3))

    assert [key for key, _ in pipeline.children] == ["a"] and isinstance(pipeline.children, tuple)
    assert pipeline.config.max_turns == 3
    assert GraphAgent("g", "", (("a", "b"),), children=(("a", agent("a")), ("b", agent("b")))).edges == (
        ("a", "b"),
    )


# -- each field refused by name --------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: LoopAgent("l", "d", "3"), r"LoopAgent 'l': max_iterations must be an integer, not str"),
        (lambda: LoopAgent("l", "d", 2.0), r"max_iterations must be an integer, not float"),
        (lambda: LoopAgent("l", "d", True), r"max_iterations must be an integer, not bool"),
        (lambda: LoopAgent("l", "d", 0), r"max_iterations must be >= 1, got 0"),
        (lambda: LoopAgent(3, "d"), r"LoopAgent: name must be a non-empty string, not int"),
        (lambda: SequentialAgent("", "d"), r"SequentialAgent: name must be a non-empty string"),
        (lambda: SequentialAgent("s", None), r"'s': description must be a string, not NoneType"),
        (lambda: SequentialAgent("s", "d", children=5), r"'s': children must be a tuple of pairs, not int"),
        (lambda: SequentialAgent("s", "d", children=["ab"]), r"children must be a tuple of pairs"),
        (lambda: ParallelAgent("p", "d", children=[(1, agent("a"))]), r"child key must be a non-empty"),
        (lambda: ParallelAgent("p", "d", children=[("a", "agent")]), r"child 'a' must be an agent"),
        (lambda: ParallelAgent("p", "d", config={"max_turns": 3}), r"config must be a RunConfig, not dict"),
        (lambda: GraphAgent("g", "d", "a->b"), r"GraphAgent 'g': edges must be a tuple of pairs, not str"),
        (lambda: GraphAgent("g", "d", (("a", 2),)), r"an edge's target must be a non-empty string, not int"),
        (lambda: Handoff.to("billing"), r"Handoff.to: agent must be an agent .*not str"),
        (lambda: Handoff(7, "d", agent("a")), r"Handoff: target_name must be a non-empty string, not int"),
        (lambda: Handoff("x", "d"), r"give exactly one of agent .* or registry"),
        (lambda: Handoff("x", "d", None, ["x"]), r"registry must be a mapping of names to agents, not list"),
        (lambda: AgentAsTool(object()), r"AgentAsTool: agent must be an agent"),
        (lambda: AgentAsTool(agent("a"), name=""), r"AgentAsTool: name must be a non-empty string"),
        (lambda: AgentAsTool(agent("a"), description=3), r"'a': description must be a string, not int"),
        (lambda: AgentAsTool(agent("a"), effect="read_only"), r"effect must be a ToolEffect, not str"),
    ],
)
def test_a_bad_argument_is_a_config_error_naming_the_field(build: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_swarm_agent_checks_members_entry_and_budget() -> None:
    member = agent("a", "hi")
    with pytest.raises(ConfigError, match=r"members must be a non-empty mapping"):
        SwarmAgent("s", "d", [member], "a")
    with pytest.raises(ConfigError, match=r"member 'a' must be an LlmAgent, not str"):
        SwarmAgent("s", "d", {"a": "agent"}, "a")
    with pytest.raises(ConfigError, match=r"entry 'b' is not a member \(a\)"):
        SwarmAgent("s", "d", {"a": member}, "b")
    with pytest.raises(ConfigError, match=r"max_handoffs must be an integer or None, not str"):
        SwarmAgent("s", "d", {"a": member}, "a", "2")
    with pytest.raises(ConfigError, match=r"max_handoffs must be >= 0, got -1"):
        SwarmAgent("s", "d", {"a": member}, "a", -1)
    assert SwarmAgent("s", "d", {"a": member}, "a", 2).max_handoffs == 2


def test_good_arguments_still_build() -> None:
    helper = agent("helper", "ok")

    assert AgentAsTool(helper, effect=ToolEffect.READ_ONLY).name == "helper"
    assert Handoff.to(helper).resolve() is helper
    assert Handoff.lazy("helper", "", {"helper": helper}).resolve() is helper
    assert ParallelAgent("p", "").add(helper).children == (("helper", helper),)


def test_the_design_s_session_names_import_from_the_facade() -> None:
    from helikon import CompactingSession, MemorySession
    from helikon.sessions import CompactingSession as Compacting
    from helikon.sessions import MemorySession as Memory

    assert MemorySession is Memory and CompactingSession is Compacting
