"""One invocation's run, and its two answers (JSON, SSE), on raw ASGI.

The rules (the book's "client disconnects"):

- The run is driven by a task of its own inside a shielded cancel scope:
  the HTTP side never cancels it from the outside, it only fires the run's
  cancellation token. So a run always ends by its own rules: its tools see
  the cancellation, its open tool calls are closed, and ``agent.run``
  writes the turn to the session before the invocation finishes.
- A client that goes away (``http.disconnect``, or a failed send) fires
  the token: a disconnected client stops burning model tokens, and the
  session keeps the partial turn.
- The server being stopped does the same. A run that ignores its token for
  :data:`WIND_DOWN_S` seconds is cut off (its session write is shielded
  by ``agent.run`` itself).
- A run that raises instead of ending with ``RunFailed`` (an unreadable
  session, a broken agent) is reported as a synthetic ``RunFailed``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any, Final, final

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from helikon.config import RunConfig
from helikon.context import RunContext
from helikon.errors import OtherError, describe
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed
from helikon.items import AgentInput, text_of
from helikon.server._agentcore_protocol import SSE_KEEPALIVE, error_body, json_answer, sse_message

#: Seconds a run gets to end by itself after its token fired, before it is cut off.
WIND_DOWN_S: Final = 5.0
#: Seconds of silence after which an SSE stream gets a keep-alive comment.
SSE_KEEPALIVE_S: Final = 15.0

Send = Any
Receive = Any


@final
class InvocationRun:
    """A run of ``agent`` on ``input``, fed to one HTTP answer."""

    def __init__(self, agent: Any, ctx: RunContext[Any], input: AgentInput, config: RunConfig | None):
        self.agent = agent
        self.ctx = ctx
        self.input = input
        self.config = config
        self.done = anyio.Event()
        self.scope = anyio.CancelScope(shield=True)
        self._send: MemoryObjectSendStream[AgentEvent]
        self._events: MemoryObjectReceiveStream[AgentEvent]
        # Unbounded: the run never waits for a slow (or gone) client.
        self._send, self._events = anyio.create_memory_object_stream[AgentEvent](math.inf)

    async def answer(self, json_mode: bool, receive: Receive, send: Send) -> None:
        """Run, answering on ``send``; returns once the run has ended (its turn written)."""
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._drive)
                try:
                    if json_mode:
                        await _answer_json(self._events, receive, send)
                    else:
                        await _answer_sse(self._events, receive, send)
                except _Disconnected:
                    self.ctx.cancel.cancel()
                    await self._wind_down()
                except BaseException:
                    # Cancelled from outside (the server stopping): stop the run, let it write its turn.
                    self.ctx.cancel.cancel()
                    with anyio.CancelScope(shield=True):
                        await self._wind_down()
                    raise
        finally:
            self._events.close()

    async def _wind_down(self) -> None:
        with anyio.move_on_after(WIND_DOWN_S):
            await self.done.wait()
        self.scope.cancel()

    async def _drive(self) -> None:
        try:
            with self.scope:
                stream = self.agent.run(self.ctx, self.input, config=self.config)
                try:
                    async for event in stream:
                        self._put(event)
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
        except Exception as exc:
            self._put(RunFailed(OtherError(f"the run failed to execute: {type(exc).__name__}: {exc}")))
        finally:
            self._send.close()
            self.done.set()

    def _put(self, event: AgentEvent) -> None:
        # Nobody listening any more is fine: the run goes on to its end.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._send.send_nowait(event)


class _Disconnected(Exception):
    """The client went away."""


@final
class _Client:
    """The connection's two halves, and whether the client is gone."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self.receive = receive
        self.send = send
        self.gone = False

    async def watch(self, group: anyio.abc.TaskGroup) -> None:
        """Wait for ``http.disconnect`` (the body is already read), then stop ``group``."""
        while True:
            message = await self.receive()
            if message.get("type") == "http.disconnect":
                self.gone = True
                group.cancel_scope.cancel()
                return

    async def put(self, message: dict[str, Any], group: anyio.abc.TaskGroup | None = None) -> None:
        """Send ``message``; a connection that fails is a client gone (``group`` stops)."""
        if self.gone:
            return
        try:
            await self.send(message)
        except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.gone = True
            if group is not None:
                group.cancel_scope.cancel()


async def _answer_json(events: AsyncIterator[AgentEvent], receive: Receive, send: Send) -> None:
    client = _Client(receive, send)
    final = ""
    last: AgentEvent | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(client.watch, group)
        async for event in events:
            last = event
            if type(event) is MessageOutput:
                final = text_of(event.item.content)
        group.cancel_scope.cancel()
    if client.gone:
        raise _Disconnected
    match last:
        case RunCompleted(usage=usage):
            status, body = 200, json_answer(final, usage)
        case RunFailed(error=error):
            status, body = 500, error_body("run_failed", f"the run failed: {describe(error)}")
        case _:
            status, body = 500, error_body("run_failed", "the run ended without a terminal event")
    await client.put(_start(status, b"application/json"))
    await client.put({"type": "http.response.body", "body": body, "more_body": False})


async def _answer_sse(events: AsyncIterator[AgentEvent], receive: Receive, send: Send) -> None:
    client = _Client(receive, send)
    await client.put(_start(200, b"text/event-stream", (b"cache-control", b"no-cache")))
    async with anyio.create_task_group() as group:
        group.start_soon(client.watch, group)
        terminal = False
        iterator = events.__aiter__()
        while not client.gone:
            with anyio.move_on_after(SSE_KEEPALIVE_S) as quiet:
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    break
            if quiet.cancelled_caught:
                await client.put(_chunk(SSE_KEEPALIVE), group)
                continue
            terminal = type(event) in (RunCompleted, RunFailed)
            await client.put(_chunk(sse_message(event)), group)
        if not terminal:
            failed = RunFailed(OtherError("the run ended without a terminal event"))
            await client.put(_chunk(sse_message(failed)), group)
        group.cancel_scope.cancel()
    if client.gone:
        raise _Disconnected
    await client.put({"type": "http.response.body", "body": b"", "more_body": False})


def _start(status: int, content_type: bytes, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", content_type), *headers],
    }


def _chunk(data: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": True}


__all__ = ["SSE_KEEPALIVE_S", "WIND_DOWN_S", "InvocationRun"]
