"""Agents, models and tools the Temporal tests (and their worker process) share.

Models live on the worker, and a worker restarted mid-run starts with fresh
objects, so the scripted model here picks its answer by the conversation it
is sent (the number of model turns already in it), not by how often it was
called. Every invocation is counted in a :class:`Counts`, shared by the
workers of one test (and, through its log file, by worker processes).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from helikon import LlmAgent, ModelCapabilities, ModelRequest, ToolContext, ToolError, tool
from helikon.cancel import CancellationToken
from helikon.config import RunConfig
from helikon.items import AssistantMessage, ToolCall
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
        self.log = log

    def turn(self, n: int) -> None:
        self.turns[n] += 1
        self._write(f"turn {n}")

    def tool(self, name: str) -> int:
        """Count a call of ``name``; returns its number in this process."""
        self.tools[name] += 1
        self._write(f"tool {name}")
        return self.tools[name]

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
            else:
                tools[what] += 1
        return turns, tools


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


def gated(counts: Counts, gate: Any | None) -> LlmAgent[Any]:
    """Three turns, one tool each; ``slow`` waits on ``gate`` the first time.

    ``gate`` has ``started()`` (called when ``slow`` starts its first
    attempt) and an awaitable ``wait()``; with ``None`` nothing blocks.
    """

    @tool
    async def fast(n: int) -> int:
        """Return n.

        Args:
            n: a number.
        """
        counts.tool("fast")
        return n

    @tool
    async def slow(ctx: ToolContext[Any], n: int) -> int:
        """Return n, slowly.

        Args:
            n: a number.
        """
        if counts.tool("slow") == 1 and gate is not None:
            gate.started()
            await gate.wait()
        return n * 10

    scripts = [
        call_tools(("fast", {"n": 1})),
        call_tools(("slow", {"n": 2})),
        say("Done: 1 and 20."),
    ]
    return LlmAgent(name="gated", model=ByTurnModel(scripts, counts), tools=[fast, slow])
