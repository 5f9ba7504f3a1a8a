"""A durable run waits in the workflow for a human's approval.

With a worker posture that suspends on approval, a tool call that needs a
human (here: the handoff target's ``refund``, guarded) stops the run in the
workflow. The client sees the question (the ``helikon.pending`` query and
an ``ApprovalRequested`` event) and answers it with an update, even after
the worker that ran the run so far has gone: the next worker replays the
history to the wait and goes on from there, running nothing twice.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporal_agents import Counts, triage_desk

from helikon import AgentEvent, advance, perform, start
from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval, Terminate
from helikon.errors import StepError
from helikon.events import ApprovalRequested, RunCompleted
from helikon.governance import GuardRule
from helikon.interpreters import LiveInterpreter
from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture, replayer

pytestmark = pytest.mark.integration

QUEUE = "helikon-approvals"

#: Refunds need a human; with no handler, the run waits for one.
POSTURE = WorkerPosture(guard_rules=[GuardRule.tool("refund")], suspend_on_approval=True)


def suspended_then_resumed(decision: tuple[bool, str], run_id: str) -> list[AgentEvent]:
    """The same run with the step API: to the suspension, then resumed with the decision."""
    agent, ctx = triage_desk(Counts()), POSTURE.run_context(None)

    async def go() -> list[AgentEvent]:
        outcome = start(agent, "refund me", run_id=run_id, ctx=ctx)
        events = list(outcome.events)
        while not isinstance(outcome.effect, Terminate | AwaitApproval):
            live, result = await perform(agent, outcome.effect, ctx, run_id=run_id)
            outcome = advance(agent, outcome.state, result, ctx=ctx)
            events += [*live, *outcome.events]
        assert isinstance(outcome.effect, AwaitApproval)
        requests = outcome.effect.requests
        answer = ApprovalsGiven(tuple(ApprovalDecision(r.call_id, *decision) for r in requests))
        resumed = agent.resume(ctx, outcome.state, answer, interpreter=LiveInterpreter(run_id))
        return events + [e async for e in resumed]

    return anyio.run(go, backend="asyncio")


@pytest.mark.parametrize("approved", [True, False])
def test_an_approval_sent_after_a_worker_restart_completes_the_run(temporal: Any, approved: bool) -> None:
    counts = Counts()
    decision = (approved, "" if approved else "not today")

    async def body(env: Any) -> Any:
        # No sticky cache: the test server never hands a stopped worker's sticky queue on.
        first = TemporalAgentWorker(env.client, task_queue=QUEUE, posture=POSTURE, max_cached_workflows=0)
        serving = asyncio.create_task(first.register(triage_desk(counts)).run())
        runner = TemporalRunner(env.client, task_queue=QUEUE, poll_interval=0.05)
        run = await runner.start("triage", "refund me", run_id="run-approve")
        pending = await run.pending(wait=True)
        progress = await run.progress()
        await first.shutdown()  # the run waits with no worker at all
        await serving

        second = TemporalAgentWorker(env.client, task_queue=QUEUE, posture=POSTURE)
        async with second.register(triage_desk(counts)):
            with pytest.raises(StepError, match="no decision for pending tool call"):
                await run.approve([])  # refused, and nothing changes
            (request,) = pending
            await runner.approve("run-approve", [ApprovalDecision(request.call_id, *decision)])
            outcome = await run.outcome()
            left = await run.pending()
            history = await run.handle.fetch_history()
        runtime = env.client.service_client.config.runtime
        replayed = await replayer(runtime=runtime).replay_workflow(history, raise_on_replay_failure=False)
        return pending, progress, outcome, left, replayed.replay_failure

    pending, progress, outcome, left, failure = temporal(body)

    (request,) = pending
    assert request.tool == "refund"
    assert type(progress[-1]) is ApprovalRequested and progress[-1].call_id == request.call_id
    assert list(outcome) == suspended_then_resumed(decision, "run-approve")
    assert type(outcome[-1]) is RunCompleted
    assert left == ()
    assert failure is None
    # Nothing ran twice across the two workers; the refund ran only if approved.
    assert counts.steps == {"triage 0": 1, "triage 2": 1, "billing 0": 1, "billing 1": 1}
    assert counts.tools["refund"] == (1 if approved else 0)
    assert counts.tools["lookup"] == 1


def test_decisions_for_a_finished_run_are_refused(temporal: Any) -> None:
    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE)  # no suspension: asks are denied
        async with worker.register(triage_desk(Counts())):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            run = await runner.start("triage", "refund me", run_id="run-no-wait")
            await run.outcome()
            assert await run.pending(wait=True) == ()
            with pytest.raises(StepError, match="takes no decisions"):
                await run.approve([ApprovalDecision("call-1", True)])  # type: ignore[arg-type]

    temporal(body)
