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
