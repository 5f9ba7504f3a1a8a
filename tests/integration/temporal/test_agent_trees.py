"""Agent trees run durably: hooks, guardrails, handoffs and workflow agents.

The workflow drives the agent tree (the same pure machine as every
interpreter) and each sub-machine's effects run as activities addressed to
its path, so a governed run with a handoff, a ParallelAgent of two LLM
agents or a sequential pipeline gives, event for event, what the live
interpreter gives; and the history replays deterministically.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import attrs
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from collections.abc import AsyncIterator

from temporal_agents import (
    Counts,
    StepModel,
    billing_agent,
    gated,
    notes_agent,
    parallel_desk,
    pipeline,
    triage_desk,
)

from helikon import (
    AgentAsTool,
    AgentEvent,
    AgentInput,
    GraphAgent,
    Handoff,
    LlmAgent,
    LoopAgent,
    RunConfig,
    RunContext,
    RunError,
    SequentialAgent,
    SwarmAgent,
    ToolContext,
    ToolOutputItem,
    collect,
    tool,
)
from helikon.errors import Cancelled, GuardrailTripped, TimedOut
from helikon.interpreters import LiveInterpreter
from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture, replayer
from helikon.testing import call_tools, say

pytestmark = pytest.mark.integration

QUEUE = "helikon-trees"


def live_events(agent: Any, text: str, run_id: str) -> tuple[AgentEvent, ...]:
    """The events of the same run under the live interpreter."""

    async def go() -> tuple[AgentEvent, ...]:
        # Lock-step, as the Temporal workflow performs a wave: the same
        # answers in the same order give the same events.
        live = LiveInterpreter(run_id, lock_step=True)
        events = [e async for e in agent.run(None, text, interpreter=live)]
        return tuple(events)

    return anyio.run(go, backend="asyncio")


def durable(temporal: Any, agent: Any, text: str, run_id: str, *, replay: bool = False) -> Any:
    """Serve ``agent`` and run it once: its events (and the replay's failure, if asked)."""

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start(agent.name, text, run_id=run_id)
            events = await run.outcome()
            if not replay:
                return events
            runtime = env.client.service_client.config.runtime
            history = await run.handle.fetch_history()
            replayed = await replayer(runtime=runtime).replay_workflow(history, raise_on_replay_failure=False)
            return events, replayed.replay_failure

    return temporal(body)


def kinds(events: Any) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_governed_run_with_a_handoff_gives_the_live_events(temporal: Any) -> None:
    counts = Counts()

    events, failure = durable(temporal, triage_desk(counts), "refund me", "run-triage", replay=True)

    expected = live_events(triage_desk(Counts()), "refund me", "run-triage")
    assert kinds(events) == kinds(expected)
    assert events == expected
    assert failure is None
    assert "HandoffItem" in kinds(events) and kinds(events)[-1] == "RunCompleted"
    # The hook ran on the worker for every event it observes, and denied the secret lookup.
    assert counts.tools == {
        "hook:OnRunStart": 1,
        "hook:OnTurnStart": 2,
        "hook:PreToolUse": 2,
        "hook:PostToolUse": 1,
        "hook:OnHandoff": 1,
        "hook:OnSubagentStop": 1,
        "hook:OnRunComplete": 1,
        "lookup": 1,
        "refund": 1,
    }
    assert counts.steps == {"triage 0": 1, "triage 2": 1, "billing 0": 1, "billing 1": 1}


def test_a_tripped_input_guardrail_fails_the_run_as_live(temporal: Any) -> None:
    counts = Counts()

    events = durable(temporal, triage_desk(counts), "hack the bank", "run-hack")

    assert events == live_events(triage_desk(Counts()), "hack the bank", "run-hack")
    assert events[-1].error == GuardrailTripped("input_policy", "hacking")
    assert counts.steps == {}  # no model call before the guardrail said no


def test_a_parallel_agent_of_two_llm_agents_gives_the_live_events(temporal: Any) -> None:
    counts = Counts()

    events, failure = durable(temporal, parallel_desk(counts), "refund me", "run-parallel", replay=True)

    expected = live_events(parallel_desk(Counts()), "refund me", "run-parallel")
    assert kinds(events) == kinds(expected)
    assert events == expected
    assert failure is None
    assert counts.steps == {"notes 0": 1, "billing 0": 1, "billing 1": 1}
    assert counts.tools == {"refund": 1}


def test_a_sequential_child_reads_the_earlier_childs_output_from_the_run_state(temporal: Any) -> None:
    counts = Counts()
    agent = pipeline(counts, None)

    events = durable(temporal, agent, "go", "run-pipeline")

    assert events == live_events(pipeline(Counts(), None), "go", "run-pipeline")
    second = agent.children[1][1]
    assert second.model.requests[0].instructions == "Build on: One."


def test_a_failed_tree_raises_like_collect(temporal: Any) -> None:
    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(triage_desk(Counts())):
            with pytest.raises(RunError) as caught:
                await TemporalRunner(env.client, task_queue=QUEUE).run("triage", "hack it")
            return caught.value

    async def live() -> Any:
        with pytest.raises(RunError) as caught:
            await collect(triage_desk(Counts()).run(None, "hack it"))
        return caught.value

    assert temporal(body).error == anyio.run(live, backend="asyncio").error


class Wrapped:
    """An agent of one's own: ``run`` but no ``make_env``, so a tree runs it whole."""

    def __init__(self, inner: LlmAgent[Any]) -> None:
        self.inner = inner
        self.name = "wrapped"
        self.description = "Not a helikon machine."

    def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
        return self.inner.run(ctx, input)


def other_kinds(kind: str, counts: Counts) -> Any:
    if kind == "swarm":
        budgeting = LlmAgent(
            name="budgeting",
            description="Budgets.",
            model=StepModel("budgeting", [call_tools(("transfer_to_investing", {}))], counts),
        )
        investing = LlmAgent(
            name="investing",
            description="Invests.",
            model=StepModel("investing", [say("Index funds.")], counts),
        )
        swarm = SwarmAgent.builder().name("finance").member(budgeting).member(investing)
        return swarm.max_handoffs(2).build()
    if kind == "graph":
        builder = GraphAgent.builder().name("report").node("notes", notes_agent(counts))
        return builder.node("billing", billing_agent(counts)).edge("notes", "billing").build()
    if kind == "loop":

        @tool
        async def enough(ctx: ToolContext[Any]) -> str:
            """Stop the loop."""
            ctx.actions.escalate()
            return "stopping"

        steps = [call_tools(("enough", {})), say("Enough.")]
        worker = LlmAgent(name="worker", model=StepModel("worker", steps, counts, "enough"), tools=[enough])
        return LoopAgent("again", "Until enough.", 3, children=(("worker", worker),))
    if kind == "opaque":
        inner = LlmAgent(name="inner", model=StepModel("inner", [say("Mine.")], counts))
        mixed = SequentialAgent("mixed", "Own agent, then notes.")
        return mixed.then(Wrapped(inner)).then(notes_agent(counts))
    assert kind == "agent-as-tool"
    helper = AgentAsTool(billing_agent(counts))
    boss_steps = [call_tools(("billing", {"input": "refund"})), say("Done.")]
    boss = LlmAgent(name="boss", model=StepModel("boss", boss_steps, counts, "billing"), tools=[helper])
    return SequentialAgent("office", "The boss delegates.").then(boss)


@pytest.mark.parametrize("kind", ["swarm", "graph", "loop", "opaque", "agent-as-tool"])
def test_every_agent_kind_gives_the_live_events(temporal: Any, kind: str) -> None:
    counts = Counts()

    events, failure = durable(temporal, other_kinds(kind, counts), "go", f"run-{kind}", replay=True)

    assert events == live_events(other_kinds(kind, Counts()), "go", f"run-{kind}")
    assert failure is None
    assert kinds(events)[-1] == "RunCompleted"
    assert all(n == 1 for n in counts.steps.values())  # every model turn ran once


def test_no_agent_of_the_tree_puts_a_secret_in_the_history(temporal: Any) -> None:
    secret = "pk-tenant-abcdefgh"

    @tool
    async def read_env() -> str:
        """Print the environment."""
        return f"using key {secret}"

    leaky = LlmAgent(
        name="leaky",
        description="Reads the environment.",
        model=StepModel("leaky", [call_tools(("read_env", {})), say("done")], Counts(), "read_env"),
        tools=[read_env],
    )
    front = LlmAgent(
        name="front",
        model=StepModel("front", [call_tools(("transfer_to_leaky", {}))], Counts()),
        handoffs=[Handoff.to(leaky)],
    )

    async def body(env: Any) -> Any:
        posture = WorkerPosture(extra_secrets=[secret])
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, posture=posture)
        async with worker.register(front):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("front", "go", run_id="run-secret")
            return await run.outcome(), await run.handle.fetch_history()

    events, history = temporal(body)

    output = next(e.item for e in events if type(e) is ToolOutputItem and e.item.name == "read_env")
    assert output.content == "using key ***"
    recorded = b"".join(event.SerializeToString() for event in history.events)
    assert b'"members"' in recorded  # the tree (every member's spec) is in the history...
    assert secret.encode() not in recorded  # ...but no member's secrets are


class Gate:
    """Holds the first attempt of the ``slow`` tool (forever)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    def started(self) -> None:
        self.entered.set()

    async def wait(self) -> None:
        await asyncio.Event().wait()


def test_a_cancelled_run_with_hooks_ends_cancelled_and_its_hooks_hear_the_end(temporal: Any) -> None:
    counts = Counts()
    heard: list[str] = []

    def hook(ctx: Any, event: Any) -> None:
        heard.append(type(event).__name__)

    agent = gated(counts, Gate())
    agent = attrs.evolve(agent, hooks=[hook])

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-stop")
            while counts.tools["slow"] == 0:
                await asyncio.sleep(0.02)
            await run.cancel()
            return await run.outcome()

    events = temporal(body)

    assert events[-1].error == Cancelled()
    assert heard[-1] == "OnRunComplete"  # best effort, after the run's last event


def test_a_timed_out_run_with_hooks_fails_timed_out(temporal: Any) -> None:
    agent = attrs.evolve(gated(Counts(), Gate()), hooks=[lambda ctx, e: None], config=RunConfig(timeout=1.0))

    events = durable(temporal, agent, "go", "run-late")

    assert events[-1].error == TimedOut(1.0)


def test_a_childs_own_timeout_ends_that_child_as_live(temporal: Any) -> None:
    def with_timeout(agent: Any) -> Any:
        children = tuple(
            (key, child.with_config(RunConfig(timeout=1.0)) if key == "second" else child)
            for key, child in agent.children
        )
        return attrs.evolve(agent, children=children)

    events = durable(temporal, with_timeout(pipeline(Counts(), Gate())), "go", "run-child-late")

    assert events == live_events(with_timeout(pipeline(Counts(), Gate())), "go", "run-child-late")
    assert events[-1].error == TimedOut(1.0)  # the child's own timeout; the pipeline has none
