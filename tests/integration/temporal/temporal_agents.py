"""Agents, models and tools the Temporal tests (and their worker process) share.

Models live on the worker, and a worker restarted mid-run starts with fresh
objects, so the scripted models here pick their answer by the conversation
they are sent (the number of model turns, or of their own tool results,
already in it), not by how often they were called. Every invocation is
counted in a :class:`Counts`, shared by the workers of one test (and,
through its log file, by worker processes).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from helikon import (
    Handoff,
    LlmAgent,
    ModelCapabilities,
    ModelRequest,
    ParallelAgent,
    RunContext,
    SequentialAgent,
    ToolContext,
    ToolError,
    tool,
)
from helikon.cancel import CancellationToken
from helikon.config import RunConfig
from helikon.governance import Allow, Deny, InputPolicy, Pass, PreToolUse, Tripwire, UserText
from helikon.items import AssistantMessage, ToolCall, ToolResult
from helikon.model import ModelEvent
from helikon.testing import ScriptItem, call_tools, say


class Counts:
    """How often each model turn and each tool call ran.

    With ``log``, every invocation is also appended to that file, one line
    each, so a test can count what a worker process did before it died.
    """

    def __init__(self, log: Path | None = None) -> None:
        self.turns: Counter[int] = Counter()
        self.tools: Counter[str] = Counter()
        self.steps: Counter[str] = Counter()
        self.log = log

    def turn(self, n: int) -> None:
        self.turns[n] += 1
        self._write(f"turn {n}")

    def tool(self, name: str) -> int:
        """Count a call of ``name``; returns its number in this process."""
        self.tools[name] += 1
        self._write(f"tool {name}")
        return self.tools[name]

    def step(self, label: str) -> None:
        """Count a model turn of a tree's agent (``"<agent> <n>"``)."""
        self.steps[label] += 1
        self._write(f"step {label}")

    def _write(self, line: str) -> None:
        if self.log is not None:
            with self.log.open("a") as out:
                out.write(line + "\n")

    @staticmethod
    def read(log: Path) -> tuple[Counter[int], Counter[str]]:
        """The turns and tool calls a log holds (from every process)."""
        turns: Counter[int] = Counter()
        tools: Counter[str] = Counter()
        for line in log.read_text().splitlines():
            kind, what = line.split(" ", 1)
            if kind == "turn":
                turns[int(what)] += 1
            elif kind == "tool":
                tools[what] += 1
        return turns, tools

    @staticmethod
    def read_steps(log: Path) -> Counter[str]:
        """The model turns of tree agents a log holds (from every process)."""
        lines = (line.split(" ", 1) for line in log.read_text().splitlines())
        return Counter(what for kind, what in lines if kind == "step")


def turns_taken(request: ModelRequest) -> int:
    """How many model turns the conversation already holds."""
    turns = 0
    previous_was_model = False
    for item in request.messages:
        is_model = isinstance(item, AssistantMessage | ToolCall)
        if is_model and not previous_was_model:
            turns += 1
        previous_was_model = is_model
    return turns


class ByTurnModel:
    """Answers turn ``n`` of a run with ``scripts[n - 1]``, whoever calls it."""

    def __init__(self, scripts: Sequence[Sequence[ScriptItem]], counts: Counts) -> None:
        self.scripts = list(scripts)
        self.counts = counts
        self.requests: list[ModelRequest] = []

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "mock"

    @property
    def model_id(self) -> str:
        return "by-turn"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        turn = turns_taken(request) + 1
        self.counts.turn(turn)
        self.requests.append(request)
        return _play(self.scripts[turn - 1])


async def _play(script: Sequence[ScriptItem]) -> AsyncIterator[ModelEvent]:
    for item in script:
        yield item  # type: ignore[misc]


def calculator(counts: Counts) -> LlmAgent[Any]:
    """Three turns: two parallel additions, a lookup, then the answer."""

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        """
        counts.tool("add")
        await asyncio.sleep(0)
        return a + b

    @tool
    async def lookup(key: str) -> dict[str, str]:
        """Look a key up.

        Args:
            key: what to look up.
        """
        counts.tool("lookup")
        return {"key": key, "value": key.upper()}

    scripts = [
        call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}), ("add", {"a": 5, "b": 6})),
        call_tools(("lookup", {"key": "total"}), text="Let me check."),
        say("The sums are 3, 7 and 11; total is TOTAL."),
    ]
    return LlmAgent(
        name="calculator",
        model=ByTurnModel(scripts, counts),
        instructions="You add numbers.",
        tools=[add, lookup],
        config=RunConfig(parallel_tool_call_limit=2),
    )


def flaky(counts: Counts) -> LlmAgent[Any]:
    """A tool that fails with ToolError, one that crashes; the model sees both."""

    @tool
    async def charge(amount: int) -> str:
        """Charge an amount.

        Args:
            amount: how much.
        """
        counts.tool("charge")
        raise ToolError("card declined")

    @tool
    async def explode() -> str:
        """Always crashes."""
        counts.tool("explode")
        raise ValueError("boom")

    scripts = [
        call_tools(("charge", {"amount": 5}), ("explode", {})),
        say("The card was declined and the other tool broke."),
    ]
    return LlmAgent(name="flaky", model=ByTurnModel(scripts, counts), tools=[charge, explode])


def gated_tools(
    counts: Counts, gate: Any | None, *, idempotent: bool = False, reconcile: Any = None
) -> tuple[Any, Any]:
    """``fast`` and ``slow``; ``slow`` waits on ``gate`` the first time.

    ``gate`` has ``started()`` (called when ``slow`` starts its first
    attempt) and an awaitable ``wait()``; with ``None`` nothing blocks.
    ``slow`` is declared idempotent, or given a reconcile callback, as asked.
    """

    @tool
    async def fast(n: int) -> int:
        """Return n.

        Args:
            n: a number.
        """
        counts.tool("fast")
        return n

    @tool(idempotent=idempotent, reconcile=reconcile)
    async def slow(ctx: ToolContext[Any], n: int) -> int:
        """Return n, slowly.

        Args:
            n: a number.
        """
        if counts.tool("slow") == 1 and gate is not None:
            gate.started()
            await gate.wait()
        return n * 10

    return fast, slow


def gated(counts: Counts, gate: Any | None, **options: Any) -> LlmAgent[Any]:
    """Three turns, one tool each; ``slow`` waits on ``gate`` the first time (see :func:`gated_tools`)."""
    fast, slow = gated_tools(counts, gate, **options)
    scripts = [
        call_tools(("fast", {"n": 1})),
        call_tools(("slow", {"n": 2})),
        say("Done: 1 and 20."),
    ]
    return LlmAgent(name="gated", model=ByTurnModel(scripts, counts), tools=[fast, slow])


# -- agent trees ------------------------------------------------------------------------------


class StepModel:
    """A stateless model for an agent of a tree: ``steps[n]`` answers the
    request that holds ``n`` results of the agent's own ``tools`` (other
    agents' tool results and handoffs aside)."""

    def __init__(self, name: str, steps: Sequence[Sequence[ScriptItem]], counts: Counts, *tools: str) -> None:
        self.name = name
        self.steps = list(steps)
        self.counts = counts
        self.tools = frozenset(tools)
        self.requests: list[ModelRequest] = []

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "mock"

    @property
    def model_id(self) -> str:
        return f"step-{self.name}"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        done = sum(1 for m in request.messages if isinstance(m, ToolResult) and m.name in self.tools)
        self.counts.step(f"{self.name} {done}")
        self.requests.append(request)
        return _play(self.steps[min(done, len(self.steps) - 1)])


def refund_tool(counts: Counts) -> Any:
    @tool
    async def refund(amount: int) -> str:
        """Refund money.

        Args:
            amount: dollars.
        """
        counts.tool("refund")
        return f"refunded ${amount}"

    return refund


def billing_agent(counts: Counts) -> LlmAgent[Any]:
    """Refunds $5 with its tool, then says so."""
    steps = [call_tools(("refund", {"amount": 5})), say("Refunded $5.")]
    return LlmAgent(
        name="billing",
        description="Refunds.",
        model=StepModel("billing", steps, counts, "refund"),
        tools=[refund_tool(counts)],
    )


def triage_desk(counts: Counts) -> LlmAgent[Any]:
    """Triage, governed: a PreToolUse hook (it denies looking up secrets), an
    input guardrail (it trips on "hack"), two lookups, then a handoff to
    billing. The hook logs every event it sees as a tool call ``hook:<event>``."""

    @tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up.
        """
        counts.tool("lookup")
        return f"{key}: 12"

    def watch(ctx: RunContext[Any], event: Any) -> Any:
        counts.tool(f"hook:{type(event).__name__}")
        args = event.args if isinstance(event, PreToolUse) else None
        if isinstance(args, dict) and args.get("key") == "secret":
            return Deny("secrets stay secret")
        return Allow()

    def no_hacking(ctx: RunContext[Any], text: UserText) -> Any:
        return Tripwire(InputPolicy(), "hacking") if "hack" in text.text else Pass()

    steps = [
        call_tools(("lookup", {"key": "balance"}), ("lookup", {"key": "secret"})),
        call_tools(("transfer_to_billing", {})),
    ]
    return LlmAgent(
        name="triage",
        model=StepModel("triage", steps, counts, "lookup"),
        tools=[lookup],
        handoffs=[Handoff.to(billing_agent(counts))],
        hooks=[watch],
        input_guardrails=[no_hacking],
    )


def notes_agent(counts: Counts) -> LlmAgent[Any]:
    return LlmAgent(name="notes", description="Notes.", model=StepModel("notes", [say("Noted.")], counts))


def parallel_desk(counts: Counts) -> ParallelAgent:
    """Two LLM agents at once: notes answers, billing refunds first."""
    return ParallelAgent("desk", "Both at once.").add(notes_agent(counts)).add(billing_agent(counts))


def pipeline(counts: Counts, gate: Any | None, **options: Any) -> SequentialAgent:
    """Two children in turn, one tool each; the second's ``slow`` waits on
    ``gate`` the first time, and its instructions read the first's output
    from the run-scoped state."""
    fast, slow = gated_tools(counts, gate, **options)
    first = LlmAgent(
        name="first",
        model=StepModel("first", [call_tools(("fast", {"n": 1})), say("One.")], counts, "fast"),
        tools=[fast],
    )

    def build_on(ctx: RunContext[Any]) -> str:
        return f"Build on: {ctx.state.get('first')}"

    second = LlmAgent(
        name="second",
        model=StepModel("second", [call_tools(("slow", {"n": 2})), say("Twenty.")], counts, "slow"),
        instructions=build_on,
        tools=[slow],
    )
    return SequentialAgent("pipeline", "First, then second.").then(first).then(second)
