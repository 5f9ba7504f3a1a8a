"""Everything a tree run needs to continue is in its state (issue 27, defect 5).

A workflow child's output written to ``ctx.state`` is part of the tree
state: a job queue that performs each effect with a fresh context, storing
the state in between, sees what one process sees.
"""

from __future__ import annotations

from typing import Any

import trio

from helikon import (
    LlmAgent,
    RunContext,
    SequentialAgent,
    advance,
    collect,
    dump_state,
    load_state,
    perform,
    start,
)
from helikon.effects import Terminate
from helikon.items import SystemMessage, text_of
from helikon.testing import MockModel, say


def build() -> tuple[Any, MockModel]:
    def instructions(ctx: RunContext[None]) -> str:
        return f"Research: {ctx.state.get('researcher') or '<none>'}"

    writer_model = MockModel([say("ESSAY")])
    researcher = LlmAgent(name="researcher", model=MockModel([say("FACTS")]))
    writer = LlmAgent(name="writer", model=writer_model, instructions=instructions)
    return SequentialAgent("pipeline").then(researcher).then(writer), writer_model


def system_of(model: MockModel) -> list[str]:
    request = model.requests[0]
    texts = [text_of(m.content) for m in request.messages if isinstance(m, SystemMessage)]
    return texts if request.instructions is None else [request.instructions, *texts]


def test_a_fresh_context_per_effect_reads_what_the_run_stored() -> None:
    agent, _ = build()
    outcome = start(agent, "go", run_id="r")
    stored = dump_state(outcome.state)
    effect = outcome.effect
    seen: list[str] = []
    while not isinstance(effect, Terminate):
        # A job: a fresh process (agent, context) performs one effect and stores the state.
        agent, model = build()
        _, result = trio.run(lambda a=agent, e=effect: perform(a, e, RunContext.ephemeral(None), run_id="r"))
        outcome = advance(agent, load_state(stored), result)
        stored, effect = dump_state(outcome.state), outcome.effect
        if model.requests:
            seen = system_of(model)
    assert seen == ["Research: FACTS"]

    # The same as one in-process run.
    agent, model = build()
    trio.run(lambda: collect(agent.run(RunContext.ephemeral(None), "go")))
    assert system_of(model) == seen


def test_an_interruption_reports_what_every_branch_spent() -> None:
    from helikon import ParallelAgent, Usage, tool
    from helikon.effects import RunInterrupted
    from helikon.errors import Cancelled
    from helikon.events import RunFailed
    from helikon.testing import call_tools

    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    def branch(name: str) -> LlmAgent[Any]:
        spent = Usage(1000, 100)
        return LlmAgent(
            name=name, model=MockModel([call_tools(("noop", {}), usage=spent), say("x")]), tools=[noop]
        )

    agent = ParallelAgent("desk", "both").add(branch("left")).add(branch("right"))
    outcome = start(agent, "go", run_id="r")
    while not any(type(e).__name__ == "ToolCallItem" for e in outcome.events):
        _, result = trio.run(lambda e=outcome.effect: perform(agent, e, None, run_id="r"))
        outcome = advance(agent, outcome.state, result)
    ended = advance(agent, outcome.state, RunInterrupted(Cancelled()))
    (failed,) = [e for e in ended.events if isinstance(e, RunFailed)]
    assert failed.usage == Usage(2000, 200)


def test_a_nested_workflow_announces_its_children_at_start() -> None:
    from helikon.events import AgentUpdated, TurnStarted

    inner = SequentialAgent("inner").then(LlmAgent(name="a", model=MockModel([say("A")])))
    outer = SequentialAgent("outer").then(inner)
    result = trio.run(lambda: collect(outer.run(RunContext.ephemeral(None), "go")))
    started = [e for e in result.events if isinstance(e, AgentUpdated | TurnStarted)]
    # Each event names the member that emitted it: the outer sequence
    # announces "inner", which announces "a", whose turn begins.
    assert started == [
        AgentUpdated("inner"),
        AgentUpdated("a", path=("inner",)),
        TurnStarted(1, path=("inner", "a")),
    ]
