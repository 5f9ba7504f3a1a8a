"""A round of one function-tool call answers as the general tool round does.

The live interpreter awaits a function tool's own coroutine in the round's
cancel scope (``_call_scoped``) rather than through the round's plan, call
record and answer (``_interruptible(run_tool_round(...))``). Each scenario
here runs both ways, under trio and asyncio, and the results must be equal:
a value, a raise, an escalation, a value with no JSON form, a thread tool, a
tool that fires the run's token itself, the token fired by another task while
the tool waits, and a deadline that passes while it waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from helikon import RunContext, ToolContext, tool
from helikon.effects import EffectResult, InvokeTool, RunInterrupted, ToolsExecuted
from helikon.errors import Cancelled, TimedOut
from helikon.ids import RunId
from helikon.interpreters._env import RunEnv, build_env
from helikon.interpreters._live import _call_scoped, _interruptible
from helikon.interpreters._perform import run_tool_round
from helikon.interpreters._steps import callbacks_of
from helikon.loop import AgentSpec
from helikon.testing import MockModel
from helikon.tools._decorator import FunctionTool

Limit = tuple[float, float] | None


@tool
async def waits(n: int) -> dict[str, Any]:
    """Answer after a checkpoint.

    Args:
        n: a number.
    """
    await anyio.sleep(0)
    return {"b": n, "a": [n, "x"]}


@tool
async def raises(n: int) -> int:
    """Raise after a checkpoint.

    Args:
        n: a number.
    """
    await anyio.sleep(0)
    raise ValueError(f"no {n}")


@tool
async def escalates(ctx: ToolContext[None], n: int) -> str:
    """Escalate after a checkpoint.

    Args:
        n: a number.
    """
    await anyio.sleep(0)
    ctx.actions.escalate()
    return f"{ctx.call_id}:{n}"


@tool
async def shapeless(n: int) -> Any:
    """Return a value with no JSON form.

    Args:
        n: a number.
    """
    await anyio.sleep(0)
    return {n, n + 1}  # a set


@tool
def threaded(n: int) -> int:
    """A plain def, run in a worker thread.

    Args:
        n: a number.
    """
    return n * 2


@tool
async def stops(ctx: ToolContext[None], n: int) -> int:
    """Fire the run's token, then answer.

    Args:
        n: a number.
    """
    await anyio.sleep(0)
    ctx.cancel.cancel()
    return n


@tool
async def sleeps(n: int) -> int:
    """Wait a long time.

    Args:
        n: a number.
    """
    await anyio.sleep(30)
    return n


Round = Callable[[InvokeTool, FunctionTool[..., Any], RunEnv, Limit], Awaitable[EffectResult]]


async def _general(
    step: InvokeTool, implementation: FunctionTool[..., Any], env: RunEnv, limit: Limit
) -> EffectResult:
    return await _interruptible(run_tool_round((step,), callbacks_of(env)), env, limit)


def _env(implementation: FunctionTool[..., Any]) -> RunEnv:
    ctx = RunContext.ephemeral(None)
    return build_env(
        AgentSpec("a"),
        ctx,
        run_id=RunId("r"),
        model=MockModel([]),
        tools={implementation.name: implementation},
    )


def _perform(
    backend: str, way: Round, implementation: FunctionTool[..., Any], what: str
) -> tuple[EffectResult, float]:
    """The round's result, and how long it took (event-loop seconds)."""
    step = InvokeTool("call_1", implementation.name, {"n": 3})

    async def main() -> tuple[EffectResult, float]:
        env = _env(implementation)
        began = anyio.current_time()
        limit: Limit = None
        if what == "deadline":
            limit = (began + 0.05, 0.05)
        if what != "cancelled":
            return await way(step, implementation, env, limit), anyio.current_time() - began
        answered: list[EffectResult] = []

        async def perform() -> None:
            answered.append(await way(step, implementation, env, limit))

        async with anyio.create_task_group() as group:
            group.start_soon(perform)
            await anyio.sleep(0.02)
            env.ctx.cancel.cancel()
        return answered[0], anyio.current_time() - began

    return anyio.run(main, backend=backend)


SCENARIOS = {
    "value": (waits, "plain"),
    "raise": (raises, "plain"),
    "escalation": (escalates, "plain"),
    "no JSON form": (shapeless, "plain"),
    "thread": (threaded, "plain"),
    "token fired by the tool": (stops, "plain"),
    "token fired while it waits": (sleeps, "cancelled"),
    "deadline while it waits": (sleeps, "deadline"),
}


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_round_of_one_function_tool_call_answers_as_the_general_round(backend: str, scenario: str) -> None:
    implementation, what = SCENARIOS[scenario]

    scoped, took = _perform(backend, _call_scoped, implementation, what)
    general, _ = _perform(backend, _general, implementation, what)

    assert scoped == general
    # an interrupted tool is interrupted while it waits, not after its 30 s
    # (a scope the token or the deadline does not reach answers the same, late)
    assert took < 5, took
    # and each scenario reaches the answer it is about (the two ways cannot agree on nothing)
    match what:
        case "cancelled":
            assert scoped == RunInterrupted(Cancelled())
        case "deadline":
            assert scoped == RunInterrupted(TimedOut(0.05))
        case _ if scenario == "token fired by the tool":
            assert scoped == RunInterrupted(Cancelled())
        case _:
            assert type(scoped) is ToolsExecuted and len(scoped.results) == 1
            assert scoped.escalated == (scenario == "escalation")
