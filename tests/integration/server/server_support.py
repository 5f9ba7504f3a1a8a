"""Shared pieces of the server tests: a scripted model that answers any
number of runs, agents over it, and a real Hypercorn server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
from hypercorn.config import Config

from helikon import LlmAgent, ModelCapabilities, RunContext, tool
from helikon.cancel import CancellationToken
from helikon.governance import GuardRule
from helikon.items import ToolResult, UserMessage, text_of
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk, ToolCallChunk
from helikon.server import AgentServer, serve_app


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


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def assistant(model: Any = None, name: str = "assistant") -> LlmAgent[Any]:
    return LlmAgent(
        name=name,
        model=model or ScriptedModel(),
        instructions="Help.",
        tools=[get_weather, pay],
        description="answers by script",
    )


def approving_context() -> RunContext[Any]:
    """Payments need a human: with no handler, the server waits for the approvals route."""
    return RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay")]).with_suspend_on_approval()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: Any, backend: str = "asyncio") -> Iterator[str]:
    """Serve ``app`` with Hypercorn on a loopback port (under trio or asyncio,
    in a thread); the base URL."""
    port = free_port()
    stop = threading.Event()
    failure: list[BaseException] = []

    async def until_stopped() -> None:
        while not stop.is_set():
            await anyio.sleep(0.02)

    async def main() -> None:
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        await serve_app(app, config, until_stopped)

    def run() -> None:
        try:
            anyio.run(main, backend=backend)
        except BaseException as exc:  # surfaced to the test
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(f"{base}/openapi.json", timeout=1)
            break
        except httpx.TransportError:
            if failure or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {failure}") from None
            time.sleep(0.05)
    try:
        yield base
    finally:
        stop.set()
        thread.join(timeout=10)
    if failure:
        raise failure[0]


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
