"""Shared pieces of the server tests: a scripted model that answers any
number of runs, agents over it, and a real Hypercorn server on loopback."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from helikon import LlmAgent, ModelCapabilities, tool
from helikon.cancel import CancellationToken
from helikon.items import ToolResult, UserMessage, text_of
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk, ToolCallChunk
from helikon.server import AgentServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.loopback import free_port as free_port
from _support.loopback import serving as serving
from _support.paying import approving_context as approving_context
from _support.paying import get_weather as get_weather
from _support.paying import pay as pay


def _last_user_text(messages: tuple[Any, ...]) -> str:
    for item in reversed(messages):
        if isinstance(item, UserMessage):
            return text_of(item.content)
    return ""


class ScriptedModel:
    """Answers by rule, for any number of runs (a MockModel plays one script per call):

    - ``weather ...``: call ``get_weather`` first, then report its result;
    - ``pay N``: call the guarded ``pay`` tool, then say what it returned;
    - ``transfer``: hand off (the first ``transfer_to_*`` tool), if the agent can;
    - ``slow N``: stream N words, ``pause`` seconds apart;
    - ``history``: say how many user messages the conversation holds;
    - anything else: ``echo: <text>``.
    """

    def __init__(self, pause: float = 0.1) -> None:
        self.pause = pause
        self.calls = 0

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "scripted"

    @property
    def model_id(self) -> str:
        return "scripted-model"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        return self._answer(request, cancel)

    async def _answer(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        messages = request.messages
        text = _last_user_text(messages)
        last = messages[-1] if messages else None
        if isinstance(last, ToolResult):
            yield TextChunk(f"The tool said: {last.content}")
            yield Finish(FinishReason.STOP)
            return
        words = text.split()
        if words[:1] == ["weather"]:
            yield ToolCallChunk(0, None, "get_weather", '{"city": "Paris"}')
            yield Finish(FinishReason.TOOL_CALLS)
            return
        if words[:1] == ["transfer"] and any(t.name.startswith("transfer_to_") for t in request.tools):
            name = next(t.name for t in request.tools if t.name.startswith("transfer_to_"))
            yield ToolCallChunk(0, None, name, "{}")
            yield Finish(FinishReason.TOOL_CALLS)
            return
        if words[:1] == ["pay"] and len(words) == 2:
            yield ToolCallChunk(0, None, "pay", f'{{"amount": {int(words[1])}}}')
            yield Finish(FinishReason.TOOL_CALLS)
            return
        if words[:1] == ["slow"]:
            for index in range(int(words[1]) if len(words) > 1 else 10):
                if cancel.cancelled:
                    return
                yield TextChunk(f"w{index} ")
                with cancel.scope():
                    await anyio.sleep(self.pause)
            yield Finish(FinishReason.STOP)
            return
        if text == "history":
            seen = sum(isinstance(m, UserMessage) for m in messages)
            yield TextChunk(f"I have seen {seen} user messages")
            yield Finish(FinishReason.STOP)
            return
        for piece in ["echo: ", text]:
            yield TextChunk(piece)
        yield Finish(FinishReason.STOP)


def assistant(model: Any = None, name: str = "assistant") -> LlmAgent[Any]:
    return LlmAgent(
        name=name,
        model=model or ScriptedModel(),
        instructions="Help.",
        tools=[get_weather, pay],
        description="answers by script",
    )




def wait_for(client: httpx.Client, url: str, status: str | set[str], timeout: float = 10.0) -> dict[str, Any]:
    """Poll a run's status until it is ``status`` (one of them)."""
    wanted = {status} if isinstance(status, str) else status
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(url).json()
        if body.get("status") in wanted:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"run stayed {body.get('status')!r}, wanted {wanted}: {body}")
        time.sleep(0.02)


def server_for(*agents: Any, **options: Any) -> AgentServer:
    return AgentServer(agents=agents or (assistant(),), **options)


def paying_branches(name: str, paid: list[int]) -> Any:
    """A parallel agent ``name`` whose two branches (``small`` pays 5, ``big``
    pays 100000) reuse the call id ``c1``: only the path tells them apart.
    Every payment made is appended to ``paid``."""
    from helikon import ParallelAgent
    from helikon.testing import MockModel, call_tools, say

    @tool
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: dollars.
        """
        paid.append(amount)
        return f"paid {amount}"

    def branch(branch_name: str, amount: int) -> LlmAgent[None]:
        model = MockModel([call_tools(("c1", "pay", {"amount": amount})), say(f"{branch_name} done")])
        return LlmAgent(name=branch_name, model=model, tools=[pay])

    return ParallelAgent(name, "Both at once.").add(branch("small", 5)).add(branch("big", 100000))
