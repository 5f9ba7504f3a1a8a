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

from helikon import (
    AgentAsTool,
    LlmAgent,
    ParallelAgent,
    RunConfig,
    RunContext,
    advance,
    collect,
    perform,
    start,
    tool,
)
from helikon.cancel import CancellationToken
from helikon.effects import (
    AllPerformed,
    ExecuteTools,
    HooksRan,
    PathResult,
    PerformAll,
    Terminate,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import Cancelled, StepError
from helikon.events import MessageOutput, RunFailed, ToolCallItem, ToolOutputItem
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


BACKENDS = ["trio", "asyncio"]


def _tasks(backend: str) -> int:
    """How many tasks the event loop has now (trio's system tasks, where a
    wave's parts are hosted, included)."""
    if backend == "trio":

        def count(task: trio.lowlevel.Task) -> int:
            return 1 + sum(count(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

        return count(trio.lowlevel.current_root_task())
    import asyncio

    return len(asyncio.all_tasks())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fast_parts_events_arrive_before_a_slow_part_ends(backend: str) -> None:
    """The slow branch's tool waits until the consumer has seen the fast
    branch's last message: the wave streams each part's events as they
    happen (when a wave's events were held until it was over, the tool
    gave up waiting, and the message came after its output)."""
    seen = anyio.Event()

    @tool
    async def waits() -> str:
        """Waits for the other branch's message to reach the consumer."""
        with anyio.move_on_after(4 * STEP):
            await seen.wait()
            return "on time"
        return "late"

    left = LlmAgent(
        name="left", model=MockModel([call_tools(("quick_a", {"n": 1})), say("left done")]), tools=[quick_a]
    )
    right = LlmAgent(
        name="right", model=MockModel([call_tools(("waits", {})), say("right done")]), tools=[waits]
    )
    desk = ParallelAgent("desk", "both").add(left).add(right)

    async def go() -> list[object]:
        events: list[object] = []
        async for event in desk.run(RunContext.ephemeral(None), "go"):
            events.append(event)
            if isinstance(event, MessageOutput) and event.path == ("left",):
                seen.set()
        return events

    events = anyio.run(go, backend=backend)
    said = [(e.path, e.item.content) for e in events if isinstance(e, ToolOutputItem)]
    assert ((("right",), "on time")) in said, said
    order = [e for e in events if isinstance(e, MessageOutput | ToolOutputItem)]
    left_said = next(i for i, e in enumerate(order) if isinstance(e, MessageOutput) and e.path == ("left",))
    waited = next(i for i, e in enumerate(order) if isinstance(e, ToolOutputItem) and e.path == ("right",))
    assert left_said < waited  # in the order they happened, each with its path


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_stopped_mid_wave_cancels_every_part_and_leaks_no_task(backend: str) -> None:
    """Cancelled from outside (the consumer's scope) or closed early (the
    consumer stops iterating): every part still running is cancelled before
    control comes back, and no task is left behind."""
    ended: list[str] = []

    @tool
    async def sleepy(n: int) -> str:
        """Sleeps long.

        Args:
            n: which one.
        """
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            ended.append(f"cancelled {n}")
            raise
        return "woke"

    def agent() -> ParallelAgent:
        calls = [("sleepy", {"n": n}) for n in range(3)]
        sleepers = LlmAgent(
            name="sleepers", model=MockModel([call_tools(*calls), say("done")]), tools=[sleepy]
        )
        quick = LlmAgent(
            name="quick",
            model=MockModel([call_tools(("quick_a", {"n": 1})), say("quick done")]),
            tools=[quick_a],
        )
        return ParallelAgent("desk", "both").add(sleepers).add(quick)

    async def go() -> tuple[int, int, int, int]:
        before = _tasks(backend)
        with anyio.move_on_after(STEP / 2):  # cancelled from outside, mid-wave (quick_a still sleeps)
            async for _ in agent().run(RunContext.ephemeral(None), "go"):
                pass
        cancelled = len(ended)
        await anyio.sleep(0)
        after_cancel = _tasks(backend)
        ended.clear()
        stream = agent().run(RunContext.ephemeral(None), "go")
        async for event in stream:  # closed early, mid-wave
            if isinstance(event, MessageOutput) and event.path == ("quick",):
                break  # mid-wave: the sleepers' tools are running
        await stream.aclose()  # type: ignore[attr-defined]
        closed = len(ended)
        await anyio.sleep(0)
        left = _tasks(backend)
        ended.clear()
        token = CancellationToken()
        events: list[object] = []
        async for event in agent().run(RunContext.ephemeral(None).with_cancel(token), "go"):
            events.append(event)
            if isinstance(event, MessageOutput) and event.path == ("quick",):
                token.cancel()  # the run's own token, mid-wave: it ends, Cancelled
        last = events[-1]
        assert isinstance(last, RunFailed), last  # the branch still running was cancelled:
        assert [(f.key, type(f.error)) for f in last.error.failed] == [("sleepers", Cancelled)]  # type: ignore[union-attr]
        assert len(ended) == 3
        await anyio.sleep(0)
        assert _tasks(backend) == before
        return before, after_cancel, closed * 10 + cancelled, left

    before, after_cancel, both, last = anyio.run(go, backend=backend)
    assert (after_cancel, last) == (before, before)
    assert both == 33  # three parts cancelled each time, nothing left running


def test_the_machine_takes_a_root_steps_answer_in_either_shape() -> None:
    """The root's tool step of a wave beside an agent used as a tool is
    performed on its own; by the time it answers, the pending effect may be
    a ``PerformAll`` (its sibling still runs) or the bare ``ExecuteTools``
    (its sibling ended). The machine takes the bare result and the one
    addressed to the path ``()`` alike, whichever is pending: the
    interpreter does not reshape answers."""

    @tool
    async def plain() -> str:
        """Plain."""
        return "plain"

    def outer() -> LlmAgent[None]:
        inner = LlmAgent(name="inner", model=MockModel([say("inner said")]))
        calls = call_tools(("c1", "inner", {"input": "x"}), ("c2", "plain", {}))
        return LlmAgent(
            name="outer", model=MockModel([calls, say("done")]), tools=[AgentAsTool(inner), plain]
        )

    async def go() -> None:
        agent = outer()
        first = start(agent, "go", run_id="shapes")
        _, answered = await perform(agent, first.effect, run_id="shapes")
        wave = advance(agent, first.state, answered)
        assert type(wave.effect) is PerformAll
        (root_part,) = [p for (path, call), p in parts(wave.effect) if path == () and call == "c2"]
        _, addressed = await perform(agent, root_part, run_id="shapes")
        assert type(addressed) is AllPerformed
        (only,) = addressed.results
        bare = only.result
        assert type(bare) is ToolsExecuted
        # pending PerformAll: bare and addressed answers lead to the same state
        assert advance(agent, wave.state, bare).state == advance(agent, wave.state, addressed).state
        # the sibling ended first: the bare ExecuteTools is pending; both shapes again
        (inner_part,) = [p for (path, _), p in parts(wave.effect) if path != ()]
        _, inner_answer = await perform(agent, inner_part, run_id="shapes")
        alone = advance(agent, wave.state, inner_answer)
        while type(alone.effect) is PerformAll and all(at.path != () for at in alone.effect.effects):
            _, more = await perform(agent, alone.effect, run_id="shapes")
            alone = advance(agent, alone.state, more)
        assert type(alone.effect) is ExecuteTools
        assert advance(agent, alone.state, addressed).state == advance(agent, alone.state, bare).state
        with pytest.raises(StepError, match="does not accept AllPerformed"):  # another path's: refused
            advance(agent, alone.state, AllPerformed((PathResult(("x",), bare),)))

    trio.run(go)
