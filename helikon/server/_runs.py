"""Runs as replayable event logs: the pieces every agent server shares.

A run's events drain into a :class:`RunLog` of JSON frames (the tagged
shape of :mod:`helikon.codec`, plus ``seq``). Any number of readers replay
the frames emitted so far and then tail the live ones, so a client that
reconnects misses nothing. :func:`drive` runs an agent into a log,
:func:`frames` and :func:`sse` read one, and :func:`terminal_frame` is the
synthetic ``RunFailed`` a stream ends with when its run ended without a
terminal event. These work under trio and asyncio alike (anyio).
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, final

import anyio
import anyio.lowlevel
import msgspec

from helikon.codec import unstructure
from helikon.errors import OtherError
from helikon.events import AgentEvent, RunFailed

#: One JSON-ready event: ``{"type": "TokenDelta", ..., "seq": 3}``.
Frame = dict[str, Any]

_TERMINAL = frozenset({"RunCompleted", "RunFailed"})


class RunStatus(enum.Enum):
    """Where a run stands."""

    QUEUED = "queued"  # waiting for its session's previous run, or for an execution slot
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"  # suspended until a human decides
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # cancelled (a client, the cancel route, a drain): keeps what it produced

    @property
    def finished(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


def status_of(frames: list[Frame], cancelled: bool = False) -> RunStatus:
    """How a run whose log is closed ended: completed, cancelled (its
    terminal event says so, or its token fired before it completed), or failed."""
    terminal = frames[-1] if frames and is_terminal(frames[-1]) else None
    if terminal is not None and terminal["type"] == "RunCompleted":
        return RunStatus.COMPLETED
    error = terminal.get("error") if terminal is not None else None
    if cancelled or (isinstance(error, dict) and error.get("type") == "Cancelled"):
        return RunStatus.CANCELLED
    return RunStatus.FAILED


def event_frame(event: AgentEvent) -> Frame:
    """An event as JSON-ready data (tagged by class name, as in traces)."""
    data: Frame = unstructure(event, AgentEvent)
    return data


def is_terminal(frame: Frame) -> bool:
    return frame.get("type") in _TERMINAL


def terminal_frame(message: str) -> Frame:
    """The synthetic ``RunFailed`` frame of a run that ended without a terminal event."""
    frame = event_frame(RunFailed(OtherError(message)))
    frame["synthetic"] = True
    return frame


@final
class RunLog:
    """The append-only frames of one run, with replay-then-tail readers."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.closed = False
        self._changed = anyio.Event()

    def append(self, frame: Frame) -> None:
        if self.closed:
            return
        frame["seq"] = len(self.frames)
        self.frames.append(frame)
        if is_terminal(frame):
            self.closed = True
        self._wake()

    def close(self, reason: str) -> None:
        """End the log; without a terminal frame yet, add the synthetic one."""
        if not self.closed:
            self.append(terminal_frame(reason))
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def changed(self) -> None:
        """Wait for the next frame (or the close)."""
        await self._changed.wait()

    async def wait_closed(self) -> None:
        while not self.closed:
            await self._changed.wait()

    async def tail(self, since: int = 0) -> AsyncIterator[Frame]:
        """Every frame from index ``since``: the stored ones, then live ones
        as they come, until the log closes."""
        index = max(since, 0)
        while True:
            while index < len(self.frames):
                yield self.frames[index]
                index += 1
            if self.closed:
                return
            await self._changed.wait()

    @property
    def terminal(self) -> Frame | None:
        last = self.frames[-1] if self.frames else None
        return last if last is not None and is_terminal(last) else None


async def drive(
    stream: AsyncIterator[AgentEvent],
    log: RunLog,
    on_event: Callable[[AgentEvent], None],
    checkpoint: Callable[[], Awaitable[None]] = anyio.lowlevel.checkpoint,
) -> None:
    """Drain a run's event stream into ``log``; the log is closed however the
    stream ends (a stream that stops early gets the synthetic terminal frame).
    ``checkpoint`` is awaited after every event (a plain yield, or a
    :class:`~helikon.server._pacer.Pacer`'s turn)."""
    try:
        async for event in stream:
            on_event(event)
            log.append(event_frame(event))
            # A model or tool that never waits (a cached or scripted answer)
            # would otherwise run its whole stream in one go: yield to the
            # other runs and to the cheap routes after every event.
            await checkpoint()
    except anyio.get_cancelled_exc_class():
        log.close("the run was cancelled before it ended")
        raise
    except Exception as exc:  # a runner that fails: the readers still see an end
        log.close(f"the run failed to execute: {type(exc).__name__}: {exc}")
    else:
        log.close("the run ended without a terminal event")
    finally:
        # Cancelled between two events, the run's stream is closed now (a
        # wave's parts are cancelled and awaited), not when it is collected.
        close = getattr(stream, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


def output_of(frames: list[Frame], partial: bool = False) -> str:
    """The final output: the last assistant message's text (as :func:`helikon.collect`).

    With ``partial`` (a cancelled run), text streamed after the last
    assistant message counts too: what the run produced before it stopped.
    """
    output = ""
    streamed: list[str] = []
    for frame in frames:
        kind = frame.get("type")
        if kind == "MessageOutput":
            item = frame.get("item") or {}
            output = "".join(p.get("text", "") for p in item.get("content", []) if isinstance(p, dict))
            streamed = []
        elif kind == "TokenDelta" and isinstance(frame.get("text"), str):
            streamed.append(frame["text"])
    if partial and streamed:
        return "".join(streamed)
    return output


def sse_message(frame: Frame) -> bytes:
    """One Server-Sent Events message: ``id`` is the frame's ``seq`` (resume
    with ``Last-Event-ID``), ``event`` its type in snake case (:func:`event_name`)."""
    data = msgspec.json.encode(frame).decode()
    return f"id: {frame['seq']}\nevent: {event_name(frame)}\ndata: {data}\n\n".encode()


def event_name(frame: Frame) -> str:
    """A frame's SSE ``event:`` name: its type in snake case, as the book
    names frames (``run_started``, ``token_delta``, ``run_failed``, the
    synthetic terminal frame's name too); ``data`` keeps helikon's tag.

    >>> event_name({"type": "RunFailed", "synthetic": True}), event_name({"type": "TokenDelta"})
    ('run_failed', 'token_delta')
    """
    return re.sub(r"(?<!^)(?=[A-Z])", "_", str(frame["type"])).lower()


SSE_KEEPALIVE = b": keep-alive\n\n"


async def sse(log: RunLog, since: int = 0, keepalive: float = 15.0) -> AsyncIterator[bytes]:
    """A log as SSE bytes from frame ``since``, with comment keep-alives while quiet."""
    index = max(since, 0)
    while True:
        while index < len(log.frames):
            yield sse_message(log.frames[index])
            index += 1
        if log.closed:
            return
        with anyio.move_on_after(keepalive) as scope:
            await log.changed()
        if scope.cancelled_caught:
            yield SSE_KEEPALIVE


def now() -> float:
    return time.time()


async def frames_of(stream: AsyncIterator[AgentEvent]) -> AsyncIterator[Frame]:
    """A run's events as frames, numbered, ending with a terminal frame however
    the stream ends (for a server that streams a run without keeping a log)."""
    seq = 0
    try:
        async for event in stream:
            frame = event_frame(event)
            frame["seq"] = seq
            seq += 1
            yield frame
            if is_terminal(frame):
                return
        reason = "the run ended without a terminal event"
    except Exception as exc:
        reason = f"the run failed to execute: {type(exc).__name__}: {exc}"
    frame = terminal_frame(reason)
    frame["seq"] = seq
    yield frame


__all__ = [
    "Frame",
    "RunLog",
    "RunStatus",
    "drive",
    "event_frame",
    "frames_of",
    "is_terminal",
    "now",
    "output_of",
    "sse",
    "sse_message",
    "status_of",
    "terminal_frame",
]
