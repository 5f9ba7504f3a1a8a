"""In-process runs: each run a task of the server, its log in memory.

Runs of one session are serialised (a lock per session id, held for the
whole run); a run waiting for a human's approval is ``awaiting_approval``
until ``approve`` answers it; finished runs are dropped by :class:`Retention`
as each run finishes (the count and age limits) and by its periodic sweep.

Admission control: at most :attr:`Admission.max_running` runs execute at
once; the rest wait in a first-come-first-served queue of at most
:attr:`Admission.max_queued` runs, and a run that finds the queue full is
refused with :class:`ServerBusy` (the server's 503). A run waiting for an
approval gives its slot back while it waits. Draining (:meth:`InProcessRuns.drain`)
refuses new runs, lets running ones finish within a grace period, then
cancels the rest: a cancelled run ends ``cancelled``, its partial turn in its
session.
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, final

import anyio
import attrs
from anyio.abc import TaskGroup

from helikon.cancel import CancellationToken
from helikon.effects import ApprovalRequest
from helikon.errors import ConfigError
from helikon.events import AgentEvent
from helikon.governance import Allow, Deny
from helikon.interpreters import LiveInterpreter
from helikon.server._backend import (
    ApprovalRefused,
    Decision,
    RunNotFound,
    ServerBusy,
    StartRun,
    scoped_session_id,
)
from helikon.server._pacer import Pacer
from helikon.server._retention import Retention, expired
from helikon.server._runs import Frame, RunLog, RunStatus, drive, now, output_of, status_of

log = logging.getLogger("helikon.server")


@attrs.frozen
class Admission:
    """How many runs execute at once, and how many may wait for a turn.

    ``max_running`` bounds the work the event loop interleaves; ``max_queued``
    bounds the backlog: beyond both a new run is refused with 503 and
    ``Retry-After: retry_after`` seconds rather than queued without limit
    (so memory and latency stay bounded however many clients arrive).

    The defaults suit model-bound runs (mostly waiting on the provider): a
    queued run's first event waits for a slot, so a low ``max_running``
    lengthens the time to first event of a burst. Lower it for runs whose
    tools burn CPU in the server process.

    A run waiting for a human gives its slot back; ``max_awaiting`` bounds
    how many runs may wait so at once (each holds its memory until a human
    answers): a run that would wait beyond it has the call denied at once
    ("too many runs wait for a human"), and goes on.
    """

    max_running: int = 1024
    max_queued: int = 1024
    retry_after: int = 2
    max_awaiting: int = 1024

    def __attrs_post_init__(self) -> None:
        if self.max_running < 1 or self.max_queued < 0 or self.retry_after < 1 or self.max_awaiting < 0:
            raise ConfigError(
                "admission needs max_running >= 1, max_queued >= 0, retry_after >= 1, "
                f"max_awaiting >= 0: {self!r}"
            )


@final
class _Slots:
    """The execution slots: a first-come-first-served semaphore that counts its waiters."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.free = anyio.Semaphore(admission.max_running)
        self.waiting = 0
        self.awaiting = 0  # runs waiting for a human (their slots given back)

    async def acquire(self) -> None:
        self.waiting += 1
        try:
            await self.free.acquire()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        self.free.release()


@final
class _Pending:
    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        self.answered = anyio.Event()
        self.decision: Decision | None = None


@final
class LocalRun:
    """A run of this process."""

    def __init__(self, request: StartRun) -> None:
        self.run_id = request.run_id
        self.agent = str(request.agent.name)
        self.session_id = request.session_id
        self.owner = request.owner
        self.detached = request.detached
        self.created_at = now()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.status = RunStatus.QUEUED
        self.log = RunLog()
        self.token = CancellationToken()
        self.pending: dict[tuple[tuple[str, ...], str], _Pending] = {}
        self.slots: _Slots | None = None  # set while it holds an execution slot
        self._parked = 0  # its approvals waiting for a human (its slot is given back meanwhile)

    async def describe(self) -> dict[str, Any]:
        terminal = self.log.terminal
        error = terminal.get("error") if terminal is not None and terminal["type"] == "RunFailed" else None
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "status": self.status.value,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "events": len(self.log.frames),
            "output": output_of(self.log.frames, partial=self.status is RunStatus.CANCELLED)
            if self.status.finished
            else None,
            "error": error,
            "usage": terminal.get("usage") if terminal is not None else None,
            "pending_approvals": [
                {
                    "call_id": p.request.call_id,
                    "path": list(p.request.path),
                    "tool": p.request.tool,
                    "arguments": p.request.arguments,
                }
                for p in self.pending.values()
            ],
        }

    def frames(self, since: int = 0) -> AsyncIterator[Frame]:
        return self.log.tail(since)

    async def approve(self, decisions: tuple[Decision, ...]) -> None:
        if not self.pending:
            raise ApprovalRefused(f"run {self.run_id} is not waiting for an approval")
        keys = [self._pending_key(d) for d in decisions]
        if len(set(keys)) != len(keys):
            raise ApprovalRefused("a tool call is answered more than once")
        for key, decision in zip(keys, decisions, strict=True):
            waiting = self.pending.pop(key)
            waiting.decision = decision
            waiting.answered.set()
        if not self.pending and self.status is RunStatus.AWAITING_APPROVAL:
            self.status = RunStatus.RUNNING

    def _pending_key(self, decision: Decision) -> tuple[tuple[str, ...], str]:
        """The pending call ``decision`` answers: by (path, call id); without a
        path, the one pending call with that id."""
        if decision.path or ((), decision.call_id) in self.pending:
            key = (decision.path, decision.call_id)
            if key not in self.pending:
                raise ApprovalRefused(f"run {self.run_id} has no pending tool call {decision.call_id!r}")
            return key
        found = [key for key in self.pending if key[1] == decision.call_id]
        if not found:
            raise ApprovalRefused(f"run {self.run_id} has no pending tool call {decision.call_id!r}")
        if len(found) > 1:
            raise ApprovalRefused(
                f"tool call {decision.call_id!r} is pending in {len(found)} agents: answer with its path"
            )
        return found[0]

    async def cancel(self) -> None:
        self.token.cancel()

    async def ask(self, request: ApprovalRequest) -> Allow | Deny:
        """The approval handler a run waits in until ``approve`` answers."""
        slots = self.slots
        if slots is not None and not self._parked and slots.awaiting >= slots.admission.max_awaiting:
            limit = slots.admission.max_awaiting
            return Deny(f"too many runs wait for a human ({limit}, the server's limit): the call is denied")
        waiting = _Pending(request)
        self.pending[(request.path, request.call_id)] = waiting
        self.status = RunStatus.AWAITING_APPROVAL
        remove = self.token.on_cancel(waiting.answered.set)
        # A human may take hours: the run's slot goes to another run while it
        # waits (given back by the first of its parallel approvals, taken again
        # by the last one answered).
        if slots is not None and not self._parked:
            slots.release()
            slots.awaiting += 1
        self._parked += 1
        try:
            await waiting.answered.wait()
        finally:
            remove()
            self.pending.pop((request.path, request.call_id), None)
            self._parked -= 1
            if slots is not None and not self._parked:
                slots.awaiting -= 1
                with anyio.CancelScope(shield=True):
                    await slots.acquire()
        decision = waiting.decision
        if decision is None:
            return Deny("the run was cancelled while waiting for approval")
        return Allow() if decision.approved else Deny(decision.reason or "a human denied the call")


@final
class InProcessRuns:
    """The default run backend: runs are tasks of this process.

    Args:
        retention: how long finished runs (and their logs) are kept.
        admission: how many runs execute at once and how many may queue.
    """

    def __init__(self, retention: Retention | None = None, admission: Admission | None = None) -> None:
        self.retention = retention or Retention()
        self.admission = admission or Admission()
        self.runs: dict[str, LocalRun] = {}
        self.draining = False
        self._finished: OrderedDict[str, float] = OrderedDict()  # finish order, oldest first
        self._active = 0  # admitted and not finished: running or queued
        self._idle = anyio.Event()
        self._slots = _Slots(self.admission)
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}
        self._group: TaskGroup | None = None
        #: Runs (and run intake) share the loop with the cheap routes through it.
        self.pacer = Pacer()

    @property
    def capacity(self) -> int:
        """How many runs may be admitted at once (executing plus queued)."""
        return self.admission.max_running + self.admission.max_queued

    @property
    def ready(self) -> bool:
        """Whether a new run would be admitted now."""
        return not self.draining and self._active < self.capacity

    @property
    def active(self) -> int:
        """Runs admitted and not finished (executing or queued)."""
        return self._active

    async def serve(self) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self.pacer.run)
            try:
                while True:
                    await anyio.sleep(self.retention.sweep_every)
                    await self.sweep()
            finally:
                self._group = None
                for run in self.runs.values():
                    run.token.cancel()

    async def start(self, request: StartRun) -> LocalRun:
        if self._group is None:
            raise ConfigError(
                "the agent server's lifespan is not running: serve the app with lifespan events "
                "(mounted in another app, pass lifespan=server.lifespan to it)"
            )
        if self.draining:
            raise ServerBusy(
                "the server is shutting down; retry on another replica", self.admission.retry_after
            )
        if self._active >= self.capacity:
            raise ServerBusy(
                f"the server is at capacity ({self.admission.max_running} runs executing, "
                f"{self.admission.max_queued} queued); retry later",
                self.admission.retry_after,
            )
        run = LocalRun(request)
        self.runs[run.run_id] = run
        self._active += 1
        self._group.start_soon(self._execute, run, request)
        return run

    async def drain(self, grace: float) -> None:
        """Refuse new runs; let the running ones finish within ``grace``
        seconds, then cancel the rest and wait for them to end (each
        cancelled run persists its partial turn into its session)."""
        self.draining = True
        with anyio.move_on_after(grace):
            await self._wait_idle()
        if self._active:
            log.info("drain: cancelling %d runs still going after %.1f s", self._active, grace)
            for run in list(self.runs.values()):
                if run.finished_at is None:
                    run.token.cancel()
            with anyio.move_on_after(max(grace, 5.0)):
                await self._wait_idle()

    async def _wait_idle(self) -> None:
        while self._active:
            await self._idle.wait()

    async def list_runs(
        self, agent: str, owner: str | None, limit: int, after: str | None = None
    ) -> tuple[list[LocalRun], str | None]:
        """The runs of ``agent`` started by ``owner``, newest first: at most
        ``limit`` of them after the run ``after`` (a cursor), and the cursor
        of the next page (``None`` on the last)."""
        mine = [r for r in reversed(self.runs.values()) if r.agent == agent and r.owner == owner]
        start = 0
        if after is not None:
            ids = [r.run_id for r in mine]
            if after not in ids:
                raise RunNotFound(f"no run {after!r} to continue the listing after")
            start = ids.index(after) + 1
        page = mine[start : start + limit]
        more = start + limit < len(mine)
        return page, (page[-1].run_id if more and page else None)

    async def find(self, agent: str, run_id: str, owner: str | None = None) -> LocalRun:
        """The run (``owner`` is not checked here: the server compares it
        with the run's, and asks its ``authorize`` hook)."""
        run = self.runs.get(run_id)
        if run is None or run.agent != agent:
            raise RunNotFound(f"no run {run_id!r} of agent {agent!r}")
        return run

    async def sweep(self) -> int:
        finished = [(r.run_id, r.finished_at) for r in self.runs.values() if r.finished_at is not None]
        gone = expired(finished, now(), self.retention)
        for run_id in gone:
            del self.runs[run_id]
            self._finished.pop(run_id, None)
        return len(gone)

    def _retire(self, run: LocalRun) -> None:
        """A run has finished: count it out, and enforce retention's count and
        age limits at once (memory stays bounded between sweeps)."""
        self._active -= 1
        if not self._active:
            idle, self._idle = self._idle, anyio.Event()
            idle.set()
        self._finished[run.run_id] = run.finished_at or now()
        limit = now() - self.retention.max_age
        while self._finished:
            oldest, at = next(iter(self._finished.items()))
            if len(self._finished) <= self.retention.max_runs and at >= limit:
                break
            del self._finished[oldest]
            self.runs.pop(oldest, None)

    async def _execute(self, run: LocalRun, request: StartRun) -> None:
        ctx = request.ctx.with_cancel(run.token)
        if ctx.approval_handler is None and ctx.suspend_on_approval:
            ctx = ctx.with_approval_handler(run.ask)
        try:
            if run.session_id is None:
                await self._admitted(run, request.agent, ctx, request)
            else:
                async with self._session_lock(scoped_session_id(run.owner, run.session_id)):
                    await self._admitted(run, request.agent, ctx, request)
        finally:
            _finish(run)  # cancelled while it queued: still ends, with a terminal frame
            self._retire(run)

    async def _admitted(self, run: LocalRun, agent: Any, ctx: Any, request: StartRun) -> None:
        """Wait for an execution slot (first come, first served), then run."""
        acquired = False
        with run.token.scope():  # a run cancelled while it queues leaves the queue
            await self._slots.acquire()
            acquired = True
        if not acquired:
            await self._run(run, agent, ctx, request)  # ends it as cancelled before it started
            return
        run.slots = self._slots
        try:
            await self._run(run, agent, ctx, request)
        finally:
            run.slots = None
            self._slots.release()

    async def _run(self, run: LocalRun, agent: Any, ctx: Any, request: StartRun) -> None:
        """Run it (holding its session's lock): it is finished before the next run of the session starts."""
        try:
            if run.token.cancelled:  # cancelled while it queued behind its session
                run.log.close("the run was cancelled before it started")
                return
            run.status = RunStatus.RUNNING
            run.started_at = now()
            try:
                stream = _start(agent, ctx, request)
            except Exception as exc:
                run.log.close(f"the run could not start: {type(exc).__name__}: {exc}")
                return
            await drive(stream, run.log, _ignore, self.pacer.checkpoint)
        finally:
            _finish(run)

    def _session_lock(self, session_id: str) -> _SessionLock:
        return _SessionLock(self._locks, session_id)


def _start(agent: Any, ctx: Any, request: StartRun) -> AsyncIterator[AgentEvent]:
    """The run's event stream, under the server's run id when the agent takes
    an interpreter (helikon's agents do): one id in ``X-Run-Id``, the events,
    call ids and traces. A wave's parts stream their events as they happen,
    so a client sees a branch's approval request while a human's answer is
    awaited and the other branches go on."""
    if _takes_interpreter(type(agent)):
        stream: AsyncIterator[AgentEvent] = agent.run(
            ctx, request.input, interpreter=LiveInterpreter(run_id=request.run_id)
        )
        return stream
    plain: AsyncIterator[AgentEvent] = agent.run(ctx, request.input)
    return plain


_TAKES_INTERPRETER: dict[type, bool] = {}


def _takes_interpreter(kind: type) -> bool:
    known = _TAKES_INTERPRETER.get(kind)
    if known is None:
        try:
            known = "interpreter" in inspect.signature(kind.run).parameters  # type: ignore[attr-defined]
        except (TypeError, ValueError, AttributeError):
            known = False
        _TAKES_INTERPRETER[kind] = known
    return known


def _ignore(event: AgentEvent) -> None:
    pass


def _finish(run: LocalRun) -> None:
    if run.finished_at is not None:
        return
    run.log.close("the run ended without a terminal event")
    run.status = status_of(run.log.frames, cancelled=run.token.cancelled)
    run.finished_at = now()


@final
class _SessionLock:
    """The lock of one session id, dropped from the table when nobody holds or waits for it."""

    def __init__(self, table: dict[str, tuple[anyio.Lock, int]], key: str) -> None:
        self._table = table
        self._key = key

    async def __aenter__(self) -> None:
        lock, users = self._table.get(self._key) or (anyio.Lock(), 0)
        self._table[self._key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._release_user()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._table[self._key][0].release()
        self._release_user()

    def _release_user(self) -> None:
        lock, users = self._table[self._key]
        if users <= 1:
            del self._table[self._key]
        else:
            self._table[self._key] = (lock, users - 1)


__all__ = ["Admission", "InProcessRuns", "LocalRun"]
