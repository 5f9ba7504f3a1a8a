"""Waves are not lock-step (issue 27, defect 9).

Parallel branches, and the tool-call pipelines of one turn, each move on as
soon as their own step is answered: a branch never waits for the slowest
step of its siblings. The machine accepts a wave's answers in any order and
decides the same final output and conversation order whatever that order.
"""

from __future__ import annotations

import time

import anyio
import pytest
import trio

from helikon import LlmAgent, ParallelAgent, RunConfig, RunContext, advance, collect, perform, start, tool
from helikon.effects import (
    AllPerformed,
    HooksRan,
    PathResult,
    PerformAll,
    Terminate,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import StepError
from helikon.events import MessageOutput, ToolCallItem, ToolOutputItem
from helikon.governance import PreToolUse
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.interpreters._waves import parts
from helikon.items import AgentInput, ToolResult
from helikon.testing import MockModel, call_tools, say

STEP = 0.6  # seconds; the bigger, the more room for a loaded machine's overhead


@tool
async def quick_a(n: int) -> str:
    """A one-STEP step.

    Args:
        n: which one.
    """
    await anyio.sleep(STEP)
    return f"a{n}"


@tool
async def slow_b() -> str:
    """A two-STEP step."""
    await anyio.sleep(2 * STEP)
    return "b"


def _desk() -> ParallelAgent:
    left = LlmAgent(
        name="left",
        model=MockModel(
            [call_tools(("quick_a", {"n": 1})), call_tools(("quick_a", {"n": 2})), say("left done")]
        ),
        tools=[quick_a],
    )
    right = LlmAgent(
        name="right", model=MockModel([call_tools(("slow_b", {})), say("right done")]), tools=[slow_b]
    )
    return ParallelAgent("desk", "both").add(left).add(right)


def _order(events: list[object]) -> list[str]:
    """The tool steps as the stream tells them: calls asked, outputs back."""
    found: list[str] = []
    for event in events:
        if isinstance(event, ToolCallItem):
            found.append(f"call {event.item.name}")
        elif isinstance(event, ToolOutputItem):
            found.append(f"output {event.item.content}")
    return found


def test_a_branch_moves_on_without_waiting_for_its_sibling() -> None:
    async def go(interpreter: object) -> tuple[float, list[object], str]:
        begun = time.monotonic()
        ctx = RunContext.ephemeral(None)
        result = await collect(_desk().run(ctx, AgentInput.from_user_text("go"), interpreter=interpreter))
        return time.monotonic() - begun, list(result.events), result.final_output

    _, events, output = trio.run(go, LiveInterpreter())
    # Deterministic: the left branch's second step is asked for (and done)
    # before the right branch's one long step comes back. In lock-step, the
    # second call waited for the wave holding the 2 x STEP step.
    order = _order(events)
    second_call = [i for i, step in enumerate(order) if step == "call quick_a"][1]
    assert order.index("output a1") < second_call < order.index("output b"), order
    assert "left done" in output and "right done" in output
    # 2 x STEP of sleeping on each branch; lock-step needs 3 x STEP (the left
    # branch's second step waits for the wave holding the right branch's
    # 2 x STEP step). Timed again, warmed up, beside a lock-step run on the
    # same (maybe loaded) machine, so both carry the same overhead.
    took, _, _ = trio.run(go, LiveInterpreter())
    locked, _, same = trio.run(go, LiveInterpreter(lock_step=True))
    assert same == output
    assert locked >= 3 * STEP
    assert took < locked - STEP / 2, (took, locked)


def test_the_recording_of_an_unlocked_wave_replays_strictly() -> None:
    async def record() -> RecordingInterpreter:
        recorder = RecordingInterpreter()
        await collect(_desk().run(RunContext.ephemeral(None), "go", interpreter=recorder))
        return recorder

    recorder = trio.run(record)
    trace = recorder.trace
    partial = [
        s
        for s in trace.steps
        if type(s.effect) is PerformAll
        and type(s.result) is AllPerformed
        and len(s.result.results) == 1
        and len(s.effect.effects) > 1
    ]
    assert partial, "each branch's answer is a step of its own"

    async def replay() -> list[object]:
        result = await collect(
            _desk().run(RunContext.ephemeral(None), "go", interpreter=ReplayInterpreter(trace))
        )
        return list(result.events)

    assert tuple(trio.run(replay)) == trace.events


def test_one_turns_calls_each_move_on_at_their_own_pace() -> None:
    """A slow PreToolUse hook holds back its own call only: the other call's
    tool runs as soon as its own hook answered (in lock-step it waited for
    the slow hook's wave), and both results join the conversation in call order."""
    seen: list[str] = []

    async def hook(ctx: object, event: object) -> None:
        if isinstance(event, PreToolUse) and event.tool == "slow_b":
            await anyio.sleep(2 * STEP)
            seen.append("slow hook answered")

    @tool
    async def noted() -> str:
        """Noted."""
        seen.append("noted ran")
        return "ok"

    model = MockModel([call_tools(("noted", {}), ("slow_b", {})), say("done")])
    agent: LlmAgent[None] = LlmAgent(name="one", model=model, tools=[noted, slow_b], hooks=[hook])

    async def go() -> list[object]:
        result = await collect(agent.run(RunContext.ephemeral(None), "go"))
        return list(result.events)

    events = trio.run(go)
    assert seen == ["noted ran", "slow hook answered"]
    outputs = [e.item.content for e in events if isinstance(e, ToolOutputItem)]
    assert outputs == ["ok", "b"]  # call order, whatever order they finished in
    tool_results = [m for m in model.requests[1].messages if isinstance(m, ToolResult)]
    assert [m.content for m in tool_results] == ["ok", "b"]


def _drive_by_hand(agent: object, run_id: str, pick: int) -> tuple[str, tuple[object, ...]]:
    """Run ``agent`` through the step API, answering each wave one part at a
    time: the part at index ``pick`` of the pending ones (as a scheduler
    feeding each answer as it comes would)."""

    async def go() -> tuple[str, tuple[object, ...]]:
        outcome = start(agent, "go", run_id=run_id)
        conversation: tuple[object, ...] = ()
        for _ in range(200):
            effect = outcome.effect
            if type(effect) is Terminate:
                break
            units = parts(effect)
            _, part = units[pick % len(units)] if len(units) > 1 else units[0]
            _, result = await perform(agent, part, run_id=run_id)
            outcome = advance(agent, outcome.state, result)
            for event in outcome.events:
                if isinstance(event, MessageOutput | ToolOutputItem):
                    conversation += (event.item,)
        root = outcome.state.root.state
        return root.phase.output, conversation

    return trio.run(go)


def test_a_wave_answered_part_by_part_in_any_order_ends_the_same() -> None:
    first = _drive_by_hand(_desk(), "by-hand-0", 0)
    last = _drive_by_hand(_desk(), "by-hand-1", -1)
    assert first[0] == last[0]
    assert "left done" in first[0] and "right done" in first[0]
    # Each branch's own items come in its own order, whichever branch went first.
    for branch in ("left", "right"):
        mine = [i for i in first[1] if getattr(i, "agent", branch) == branch]
        theirs = [i for i in last[1] if getattr(i, "agent", branch) == branch]
        assert len(mine) == len(theirs)


def test_a_stray_or_repeated_answer_is_refused() -> None:
    desk = _desk()
    outcome = start(desk, "go", run_id="stray")
    effect = outcome.effect
    assert type(effect) is PerformAll
    bogus = AllPerformed((PathResult(("nobody",), ToolsExecuted((ToolReturned("x", "y"),))),))
    with pytest.raises(StepError, match="no effect is pending"):
        advance(desk, outcome.state, bogus)
    at = effect.effects[0]
    twice = AllPerformed((PathResult(at.path, HooksRan()), PathResult(at.path, HooksRan())))
    with pytest.raises(StepError, match="two results"):
        advance(desk, outcome.state, twice)


def test_a_rounds_steps_fed_one_by_one_stay_under_the_parallel_limit() -> None:
    running: list[int] = []
    most: list[int] = [0]

    @tool
    async def busy(n: int) -> str:
        """Busy.

        Args:
            n: which one.
        """
        running.append(n)
        most[0] = max(most[0], len(running))
        await anyio.sleep(0.02)
        running.remove(n)
        return f"busy {n}"

    def agent() -> LlmAgent[None]:
        calls = [("busy", {"n": n}) for n in range(4)]
        return LlmAgent(name="one", model=MockModel([call_tools(*calls), say("done")]), tools=[busy])

    async def go(limit: int | None) -> list[object]:
        config = RunConfig(parallel_tool_call_limit=limit)
        result = await collect(agent().run(RunContext.ephemeral(None), "go", config=config))
        return [e.item.content for e in result.events if isinstance(e, ToolOutputItem)]

    assert trio.run(go, 2) == [f"busy {n}" for n in range(4)]
    assert most[0] == 2
    most[0] = 0
    assert trio.run(go, None) == [f"busy {n}" for n in range(4)]
    assert most[0] == 4
