"""Runs that outlive a request: they wait in memory for a human (or a front
end) between two requests of a protocol (an AG-UI thread, an A2A task).

A :class:`ParkedRun` runs an agent in a task of :class:`ParkedRuns` (the
app's lifespan owns it) with an approval handler that parks: the question
waits in :attr:`ParkedRun.pending` until :meth:`ParkedRun.answer` decides it,
as the agent server's in-process runs wait (``docs/server.md``). A reader
takes the run's events one *segment* at a time: up to the run's end, or up
to the moment every question the run asked waits for an answer
(:class:`Parked`), which is when a protocol ends its request.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, final

import anyio
import anyio.lowlevel
import attrs
from anyio.abc import TaskGroup

from helikon.cancel import CancellationToken
from helikon.effects import ApprovalRequest
from helikon.errors import ConfigError, OtherError
from helikon.events import AgentEvent, ApprovalRequested, RunCompleted, RunFailed
from helikon.governance import Allow, Deny
from helikon.items import AgentInput

#: What a key names: (owner, conversation or task id).
Key = tuple[str | None, str]

#: How many runs a protocol app keeps at once, by default.
MAX_RUNS = 1000


class RunsFull(Exception):
    """Every slot holds a run that is still working (none waits to be evicted):
    the protocol answers "busy, try again" instead of growing without bound."""


@attrs.frozen
class Parked:
    """The run waits: ``requests`` are every question it asked, unanswered."""

    requests: tuple[ApprovalRequest, ...]


@attrs.frozen
class Decision:
    """An answer to one pending question (by path and call id)."""

    call_id: str
    approved: bool
    reason: str = ""
    path: tuple[str, ...] = ()


@final
class _Waiting:
    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        self.answered = anyio.Event()
        self.decision: Decision | None = None


@attrs.frozen
class _Asked:
    request: ApprovalRequest


@attrs.frozen
class _Ended:
    pass


@final
class ParkedRun:
    """One run of an agent, read segment by segment."""

    def __init__(self, key: Key, run_id: str, max_wait: float | None = None) -> None:
        self.key = key
        self.run_id = run_id
        self.token = CancellationToken()
        self.pending: dict[tuple[tuple[str, ...], str], _Waiting] = {}
        self.finished = False
        #: What the protocol keeps with the run (e.g. AG-UI's front-end tools).
        self.data: dict[str, Any] = {}
        self._send, self._receive = anyio.create_memory_object_stream[AgentEvent | _Asked | _Ended](math.inf)
        self._unasked = 0  # ApprovalRequested read whose handler call is not seen yet
        #: When (anyio's clock) the run's oldest unanswered question was asked.
        self.parked_since: float | None = None
        self._max_wait = max_wait

    async def main(self, agent: Any, ctx: Any, input: AgentInput) -> None:
        """Run ``agent`` (in the owner's task group) into the segment stream."""
        ctx = ctx.with_cancel(self.token).with_approval_handler(self.ask)
        try:
            stream: AsyncIterator[AgentEvent]
            if _takes_run_id(agent):
                stream = agent.run(ctx, input, run_id=self.run_id)
            else:
                stream = agent.run(ctx, input)
            async for event in stream:
                self._send.send_nowait(event)
                await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            self._send.send_nowait(RunFailed(OtherError("the run was cancelled")))
            raise
        except Exception as exc:  # the readers still see an end
            self._send.send_nowait(RunFailed(OtherError(f"the run failed: {type(exc).__name__}: {exc}")))
        finally:
            self.finished = True
            self._send.send_nowait(_Ended())

    async def ask(self, request: ApprovalRequest) -> Allow | Deny:
        """The run's approval handler: park until :meth:`answer` decides."""
        waiting = _Waiting(request)
        if not self.pending:
            self.parked_since = anyio.current_time()
        self.pending[(request.path, request.call_id)] = waiting
        self._send.send_nowait(_Asked(request))
        remove = self.token.on_cancel(waiting.answered.set)
        try:
            with anyio.move_on_after(math.inf if self._max_wait is None else self._max_wait) as waited:
                await waiting.answered.wait()
        finally:
            remove()
            self.pending.pop((request.path, request.call_id), None)
            if not self.pending:
                self.parked_since = None
        decision = waiting.decision
        if decision is None and waited.cancelled_caught:
            return Deny(f"no answer within {self._max_wait:g} s")
        if decision is None:
            return Deny("the run was cancelled while waiting for approval")
        return Allow() if decision.approved else Deny(decision.reason or "denied")

    def find(self, call_id: str, path: tuple[str, ...] | None = None) -> ApprovalRequest | None:
        """The pending question about ``call_id`` (at ``path``, or the only one with that id)."""
        found = [w.request for (p, c), w in self.pending.items() if c == call_id and path in (None, p)]
        return found[0] if len(found) == 1 else None

    def answer(self, decisions: list[Decision]) -> int:
        """Decide pending questions; how many of ``decisions`` answered one."""
        count = 0
        for decision in decisions:
            waiting = self.pending.pop((decision.path, decision.call_id), None)
            if waiting is None:
                continue
            waiting.decision = decision
            waiting.answered.set()
            count += 1
        return count

    def cancel(self) -> None:
        self.token.cancel()

    async def segment(self) -> AsyncGenerator[AgentEvent | Parked, None]:
        """The run's next events: up to its terminal event, or up to a
        :class:`Parked` once every question it asked waits. One reader at a
        time; close it (``contextlib.aclosing``) in the task that read it."""
        asked: list[ApprovalRequest] = [w.request for w in self.pending.values()]
        if asked and self._unasked == 0:
            yield Parked(tuple(asked))
            return
        async for item in self._receive:
            match item:
                case _Ended():
                    return
                case _Asked():
                    self._unasked -= 1
                    if self._unasked <= 0 and self.pending:
                        self._unasked = 0
                        yield Parked(tuple(w.request for w in self.pending.values()))
                        return
                    continue
                case ApprovalRequested():
                    self._unasked += 1
                    yield item
                case RunCompleted() | RunFailed():
                    yield item
                    return
                case _:
                    yield item


def _takes_run_id(agent: Any) -> bool:
    try:
        return "run_id" in inspect.signature(agent.run).parameters
    except (TypeError, ValueError):
        return False


@final
class ParkedRuns:
    """The runs of an app, by key; :meth:`serve` (the app's lifespan) owns their tasks.

    Memory stays bounded whatever clients do: at most ``max_runs`` runs are
    kept (a new run evicts the run that has waited longest for an answer,
    its questions denied; when no run waits, :meth:`start` raises
    :class:`RunsFull`), and a question unanswered for ``max_wait`` seconds
    (None: no limit) is denied, so its run goes on and ends.
    """

    def __init__(self, max_runs: int = MAX_RUNS, max_wait: float | None = None) -> None:
        if max_runs < 1:
            raise ConfigError(f"max_runs must be at least 1, not {max_runs}")
        if max_wait is not None and not max_wait > 0:
            raise ConfigError(f"max_wait must be a positive number of seconds or None, not {max_wait}")
        self.max_runs = max_runs
        self.max_wait = max_wait
        self.runs: dict[Key, ParkedRun] = {}
        self._group: TaskGroup | None = None

    async def serve(self) -> None:
        """Own the runs' tasks until cancelled (then cancel them all)."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                await anyio.sleep_forever()
            finally:
                self._group = None
                group.cancel_scope.cancel()

    def start(self, key: Key, run_id: str, agent: Any, ctx: Any, input: AgentInput) -> ParkedRun:
        """Start ``agent`` on ``input`` under ``key`` (a run already there is cancelled)."""
        if self._group is None:
            raise ConfigError(
                "the protocol app's lifespan is not running: serve it with lifespan events "
                "(mounted in another app, pass lifespan=<app>.lifespan to the outer app)"
            )
        old = self.runs.pop(key, None)
        if old is not None:
            old.cancel()
        if len(self.runs) >= self.max_runs:
            self._evict()
        run = ParkedRun(key, run_id, self.max_wait)
        self.runs[key] = run
        self._group.start_soon(self._main, run, agent, ctx, input)
        return run

    async def _main(self, run: ParkedRun, agent: Any, ctx: Any, input: AgentInput) -> None:
        try:
            await run.main(agent, ctx, input)
        finally:
            if self.runs.get(run.key) is run:
                del self.runs[run.key]

    def _evict(self) -> None:
        """Make room: cancel (and forget) the run that has waited longest."""
        parked = [run for run in self.runs.values() if run.parked_since is not None]
        if not parked:
            raise RunsFull(f"{len(self.runs)} runs are working; none waits to be evicted")
        oldest = min(parked, key=lambda run: run.parked_since or 0.0)
        del self.runs[oldest.key]
        oldest.cancel()

    def get(self, key: Key) -> ParkedRun | None:
        return self.runs.get(key)


__all__ = ["MAX_RUNS", "Decision", "Key", "Parked", "ParkedRun", "ParkedRuns", "RunsFull"]
