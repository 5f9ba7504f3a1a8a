"""An agent run on a job queue: one effect per job, the run's state stored between jobs.

This is what a team running helikon on Celery, Dramatiq or RQ writes: a
custom interpreter whose unit of work is *one effect*. Each job is handled
as a fresh worker would handle it — a new agent object, a new run context,
nothing kept in memory — and only the run's snapshot (``dump_state``) goes
from one job to the next, through a store. The queue here is an in-process
``collections.deque`` and the store a directory, so the example runs
anywhere; swap them for your broker and your database.

The agent is a small tree: a researcher, then a writer whose dynamic
instructions read the researcher's output from ``ctx.state`` — which the
run's state carries, so the writer sees it in whichever job it runs. The
output and the events equal those of ``agent.run`` in one process.
"""

from __future__ import annotations

import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import trio

from helikon import (
    AgentEvent,
    LlmAgent,
    RunContext,
    SequentialAgent,
    advance,
    collect,
    dump_state,
    load_state,
    pending,
    perform,
    start,
)
from helikon.effects import Terminate
from helikon.events import RunCompleted
from helikon.interpreters import LiveInterpreter
from helikon.items import text_of
from helikon.model import ModelRequest
from helikon.testing import FunctionModel, MockModel, say

RUN_ID = "job-run-1"


def build_agent() -> Any:
    """What every worker process builds at start-up: the agent definition."""

    def writer_instructions(ctx: RunContext[None]) -> str:
        return f"Write one sentence from these notes: {ctx.state.get('researcher') or '<none>'}"

    researcher = LlmAgent(name="researcher", model=MockModel([say("Bees dance to share where food is.")]))

    def writer_model(request: ModelRequest) -> str:
        # Answers from its instructions: what it was told the notes are.
        system = request.instructions or ""
        return "Report: " + system.split(": ", 1)[1]

    writer = LlmAgent(name="writer", model=FunctionModel(writer_model), instructions=writer_instructions)
    return SequentialAgent("report").then(researcher).then(writer)


class Store:
    """Where snapshots live between jobs (a directory; a table in production)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, run_id: str, state: Any) -> None:
        (self.root / f"{run_id}.state").write_bytes(dump_state(state))

    def load(self, run_id: str) -> Any:
        return load_state((self.root / f"{run_id}.state").read_bytes())


def job(store: Store, run_id: str) -> tuple[list[AgentEvent], bool]:
    """One job: load the run, perform its pending effect, store the next state.

    Returns the events this job produced and whether the run goes on.
    """
    agent, ctx = build_agent(), RunContext.ephemeral(None)  # a fresh worker
    state = store.load(run_id)
    effect = pending(agent, state, ctx=ctx)
    live, result = trio.run(lambda: perform(agent, effect, ctx, run_id=run_id))
    outcome = advance(agent, state, result, ctx=ctx)
    store.save(run_id, outcome.state)
    return [*live, *outcome.events], not isinstance(outcome.effect, Terminate)


def run_on_queue(store: Store, question: str) -> list[AgentEvent]:
    outcome = start(build_agent(), question, run_id=RUN_ID)
    store.save(RUN_ID, outcome.state)
    events = list(outcome.events)
    queue: deque[str] = deque([RUN_ID])
    jobs = 0
    while queue:
        run_id = queue.popleft()
        produced, more = job(store, run_id)
        events += produced
        jobs += 1
        if more:
            queue.append(run_id)  # the next effect is the next job
    print(f"{jobs} jobs")
    return events


def final_output(events: list[AgentEvent]) -> str:
    from helikon.events import MessageOutput

    texts = [text_of(e.item.content) for e in events if isinstance(e, MessageOutput)]
    return texts[-1] if texts else ""


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        events = run_on_queue(Store(Path(directory)), "Tell me about bees.")
    print("queue output:", final_output(events))
    assert isinstance(events[-1], RunCompleted)

    async def in_process() -> list[AgentEvent]:
        ran = await collect(
            build_agent().run(None, "Tell me about bees.", interpreter=LiveInterpreter(RUN_ID))
        )
        return list(ran.events)

    reference = trio.run(in_process)
    print("same output as agent.run:", final_output(events) == final_output(reference))
    print("same events as agent.run:", events == reference)


if __name__ == "__main__":
    main()
