"""Durable runs against the real Temporal test server.

The Temporal interpreter gives the same events as the live one for the same
model and tool results; a worker stopped in the middle of a tool call is
replaced and the run finishes without redoing finished work; the history
replays deterministically; tool errors reach the model as data.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import anyio
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporal_agents import Counts, calculator, flaky, gated
from temporalio import workflow
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from helikon import (
    AgentAsTool,
    AgentEvent,
    LlmAgent,
    Reconciled,
    RunConfig,
    RunContext,
    RunError,
    ToolContext,
    ToolOutputItem,
    collect,
)
from helikon.errors import Cancelled, ModelError, ModelFailed, RateLimited, TimedOut
from helikon.events import RunFailed
from helikon.interpreters import LiveInterpreter
from helikon.items import ToolResult
from helikon.temporal import WORKFLOW_NAME, TemporalAgentWorker, TemporalRunner, replayer
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

QUEUE = "helikon-tests"


def runtime_of(env: Any) -> Any:
    """The test's own Temporal runtime (see conftest), for a Replayer."""
    return env.client.service_client.config.runtime


def live_events(
    agent: LlmAgent[Any], text: str, run_id: str, ctx: RunContext[Any] | None = None
) -> tuple[AgentEvent, ...]:
    """The events of the same run under the live interpreter."""

    async def go() -> tuple[AgentEvent, ...]:
        return (await collect(agent.run(ctx, text, interpreter=LiveInterpreter(run_id)))).events

    return anyio.run(go, backend="asyncio")


def test_a_multi_turn_tool_run_gives_the_live_interpreters_events(temporal: Any) -> None:
    expected = live_events(calculator(Counts()), "add them", "run-parity")
    counts = Counts()

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(calculator(counts)):
            return await TemporalRunner(env.client, task_queue=QUEUE).run(
                "calculator", "add them", run_id="run-parity"
            )

    result = temporal(body)

    assert result.events == expected
    assert result.final_output == "The sums are 3, 7 and 11; total is TOTAL."
    assert counts.turns == {1: 1, 2: 1, 3: 1}
    assert counts.tools == {"add": 3, "lookup": 1}


def test_streamed_progress_is_the_run_in_order(temporal: Any) -> None:
    async def body(env: Any) -> tuple[list[AgentEvent], tuple[AgentEvent, ...]]:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(calculator(Counts())):
            runner = TemporalRunner(env.client, task_queue=QUEUE, poll_interval=0.01)
            run = await runner.start("calculator", "add them", run_id="run-stream")
            streamed = [event async for event in run.events()]
            return streamed, await run.outcome()

    streamed, outcome = temporal(body)

    assert streamed == list(outcome)
    assert streamed == list(live_events(calculator(Counts()), "add them", "run-stream"))


def test_tool_errors_reach_the_model_as_data_and_are_not_retried(temporal: Any) -> None:
    counts = Counts()
    agent = flaky(counts)

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            return await TemporalRunner(env.client, task_queue=QUEUE).run("flaky", "pay", run_id="run-flaky")

    result = temporal(body)

    outputs = [event.item for event in result.events if type(event) is ToolOutputItem]
    assert [(o.name, o.is_error) for o in outputs] == [("charge", True), ("explode", True)]
    assert "card declined" in outputs[0].content
    assert "ValueError: boom" in outputs[1].content
    # The model's next turn was sent both errors as tool results.
    last_request = agent.model.requests[-1]  # type: ignore[attr-defined]
    sent = [item for item in last_request.messages if isinstance(item, ToolResult)]
    assert sent == outputs
    assert counts.tools == {"charge": 1, "explode": 1}  # tool errors are data: never retried
    assert result.events == live_events(flaky(Counts()), "pay", "run-flaky")


class Gate:
    """Holds the first attempt of the ``slow`` tool until the worker is stopped."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self._never = asyncio.Event()

    def started(self) -> None:
        self.entered.set()

    async def wait(self) -> None:
        await self._never.wait()


def test_a_worker_stopped_mid_tool_call_is_replaced_and_the_run_finishes(temporal: Any) -> None:
    counts = Counts()

    async def body(env: Any) -> tuple[Any, Any]:
        gate = Gate()
        # No sticky cache: the time-skipping test server never hands a stopped
        # worker's sticky queue to another worker (a real server does, after
        # the sticky schedule-to-start timeout).
        first = TemporalAgentWorker(env.client, task_queue=QUEUE, max_cached_workflows=0)
        # ``slow`` is idempotent: a lost attempt is retried with its call id.
        first.register(gated(counts, gate, idempotent=True))
        serving = asyncio.create_task(first.run())
        run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-crash")
        await asyncio.wait_for(gate.entered.wait(), timeout=20)
        assert counts.turns == {1: 1, 2: 1} and counts.tools == {"fast": 1, "slow": 1}

        await first.shutdown()  # the in-flight slow call is cancelled with the worker
        await serving

        second = TemporalAgentWorker(env.client, task_queue=QUEUE)
        async with second.register(gated(counts, None, idempotent=True)):
            result = await run.result()
        history = await run.handle.fetch_history()
        await replayer(runtime=runtime_of(env)).replay_workflow(history)  # raises on non-determinism
        return result, history

    result, history = temporal(body)

    assert result.final_output == "Done: 1 and 20."
    # Finished model turns and tools did not run again; only the call in flight did.
    assert counts.turns == {1: 1, 2: 1, 3: 1}
    assert counts.tools == {"fast": 1, "slow": 2}
    assert result.events == live_events(gated(Counts(), None, idempotent=True), "go", "run-crash")
    # The history holds one scheduled activity per effect: the retry is invisible to it.
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == [
        "describe_agent", "call_model", "call_step", "call_model", "call_step", "call_model",
    ]  # fmt: skip


def test_the_history_replays_deterministically(temporal: Any) -> None:
    async def body(env: Any) -> tuple[Any, Any]:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(calculator(Counts())):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            run = await runner.start("calculator", "add", run_id="run-replay")
            await run.result()
            history = await run.handle.fetch_history()
        replayed = await replayer(runtime=runtime_of(env)).replay_workflow(history)
        # And the check has teeth: a workflow that decides differently does not replay.
        diverging = Replayer(
            workflows=[DivergingWorkflow],
            workflow_runner=UnsandboxedWorkflowRunner(),
            runtime=runtime_of(env),
        )
        diverged = await diverging.replay_workflow(history, raise_on_replay_failure=False)
        return replayed, diverged

    replayed, diverged = temporal(body)

    assert replayed.replay_failure is None
    assert diverged.replay_failure is not None


@workflow.defn(name=WORKFLOW_NAME)
class DivergingWorkflow:
    """The agent-loop workflow's name with other decisions (for the replay check)."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        await workflow.execute_activity("call_model", {}, start_to_close_timeout=timedelta(seconds=5))
        raise ApplicationError("unreachable")


def test_a_run_past_its_timeout_fails_timed_out(temporal: Any) -> None:
    counts = Counts()
    agent = gated(counts, Gate()).with_config(RunConfig(timeout=1.0))

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start(
                "gated", "go", run_id="run-timeout"
            )
            return await run.outcome()

    events = temporal(body)

    assert type(events[-1]) is RunFailed
    assert events[-1].error == TimedOut(1.0)


def test_a_cancelled_run_ends_cancelled(temporal: Any) -> None:
    counts = Counts()

    async def body(env: Any) -> Any:
        gate = Gate()
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(gated(counts, gate)):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-cancel")
            await asyncio.wait_for(gate.entered.wait(), timeout=20)
            await run.cancel()
            with pytest.raises(RunError) as caught:
                await run.result()
            return caught.value

    error = temporal(body)

    assert error.error == Cancelled()
    assert counts.turns == {1: 1, 2: 1}


def test_a_run_can_be_attached_to_by_id(temporal: Any) -> None:
    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(calculator(Counts())):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            await runner.start("calculator", "add", run_id="run-attach")
            run = runner.attach("run-attach")
            assert isinstance(run.handle, WorkflowHandle)
            return await run.result()

    assert temporal(body).final_output.startswith("The sums are")


def test_model_errors_are_data_and_never_retried_by_temporal(temporal: Any) -> None:
    model = MockModel([[ModelError.rate_limited("slow down", retry_after_ms=500)]])
    agent: LlmAgent[Any] = LlmAgent(name="limited", model=model)

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(agent):
            run = await TemporalRunner(env.client, task_queue=QUEUE).start("limited", "hi", run_id="run-429")
            return await run.outcome()

    events = temporal(body)

    assert type(events[-1]) is RunFailed
    assert events[-1].error == ModelFailed(RateLimited("slow down", 500))
    assert model.calls == 1  # wrap the model in RetryingModel to retry; Temporal does not


def test_a_tool_with_one_attempt_is_not_rerun_after_a_lost_worker(temporal: Any) -> None:
    counts = Counts()

    async def body(env: Any) -> Any:
        gate = Gate()
        first = TemporalAgentWorker(env.client, task_queue=QUEUE, max_cached_workflows=0)
        first.register(gated(counts, gate), tool_max_attempts={"slow": 1})
        serving = asyncio.create_task(first.run())
        run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-once")
        await asyncio.wait_for(gate.entered.wait(), timeout=20)
        await first.shutdown()
        await serving
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(gated(counts, None)):
            return await run.result()

    result = temporal(body)

    slow = next(e.item for e in result.events if type(e) is ToolOutputItem and e.item.name == "slow")
    assert slow.is_error and "tool 'slow' did not complete" in slow.content
    assert counts.tools == {"fast": 1, "slow": 1}  # never run twice
    assert result.final_output == "Done: 1 and 20."  # the (scripted) model was told, and went on


@pytest.mark.parametrize("happened", [True, False])
def test_a_lost_call_of_a_tool_that_reconciles_is_reconciled(temporal: Any, happened: bool) -> None:
    counts = Counts()
    asked: list[str] = []

    def reconcile(ctx: ToolContext[Any], args: Any) -> Reconciled:
        asked.append(ctx.call_id)
        return Reconciled(True, args["n"] * 10) if happened else Reconciled(False)

    async def body(env: Any) -> Any:
        gate = Gate()
        first = TemporalAgentWorker(env.client, task_queue=QUEUE, max_cached_workflows=0)
        first.register(gated(counts, gate, reconcile=reconcile))
        serving = asyncio.create_task(first.run())
        run = await TemporalRunner(env.client, task_queue=QUEUE).start("gated", "go", run_id="run-rec")
        await asyncio.wait_for(gate.entered.wait(), timeout=20)
        await first.shutdown()
        await serving
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(
            gated(counts, None, reconcile=reconcile)
        ):
            return await run.result()

    result = temporal(body)

    slow = next(e.item for e in result.events if type(e) is ToolOutputItem and e.item.name == "slow")
    assert len(asked) == 1 and slow.content == "20" and not slow.is_error
    assert counts.tools == {"fast": 1, "slow": 1 if happened else 2}
    assert result.final_output == "Done: 1 and 20."


def test_agent_as_tool_runs_its_nested_run_inside_the_tool_activity(temporal: Any) -> None:
    helper: LlmAgent[Any] = LlmAgent(name="helper", model=MockModel([say("42")]), description="Answers.")
    boss_model = MockModel([call_tools(("helper", {"input": "the answer?"})), say("It is 42.")])
    boss: LlmAgent[Any] = LlmAgent(name="boss", model=boss_model, tools=[AgentAsTool(helper)])

    async def body(env: Any) -> Any:
        async with TemporalAgentWorker(env.client, task_queue=QUEUE).register(boss):
            return await TemporalRunner(env.client, task_queue=QUEUE).run("boss", "ask", run_id="run-nested")

    result = temporal(body)

    assert [e.item.content for e in result.events if type(e) is ToolOutputItem] == ["42"]
    assert result.final_output == "It is 42."


def test_instructions_that_keep_failing_fail_the_run(temporal: Any) -> None:
    def instructions(ctx: RunContext[Any]) -> str:
        raise LookupError("no such household")

    agent: LlmAgent[Any] = LlmAgent(name="broken", model=MockModel([say("hi")]), instructions=instructions)

    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, instructions_max_attempts=2)
        async with worker.register(agent):
            with pytest.raises(RunError) as caught:
                await TemporalRunner(env.client, task_queue=QUEUE).run("broken", "hi")
            return caught.value

    error = temporal(body)

    assert "instructions of agent 'broken'" in str(error) and "LookupError: no such household" in str(error)
    assert agent.model.calls == 0  # type: ignore[attr-defined]
