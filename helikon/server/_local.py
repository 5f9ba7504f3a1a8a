"""In-process runs: each run a task of the server, its log in memory.

Runs of one session are serialised (a lock per session id, held for the
whole run); a run waiting for a human's approval is ``awaiting_approval``
until ``approve`` answers it; finished runs are swept by :class:`Retention`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, final

import anyio
from anyio.abc import TaskGroup

from helikon.cancel import CancellationToken
from helikon.effects import ApprovalRequest
from helikon.errors import ConfigError
from helikon.events import AgentEvent
from helikon.governance import Allow, Deny
from helikon.server._backend import ApprovalRefused, Decision, RunNotFound, StartRun
from helikon.server._retention import Retention, expired
from helikon.server._runs import Frame, RunLog, RunStatus, drive, now, output_of


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
        self.detached = request.detached
        self.created_at = now()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.status = RunStatus.QUEUED
        self.log = RunLog()
        self.token = CancellationToken()
        self.pending: dict[tuple[tuple[str, ...], str], _Pending] = {}

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
            "output": output_of(self.log.frames) if self.status.finished else None,
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
        waiting = _Pending(request)
        self.pending[(request.path, request.call_id)] = waiting
        self.status = RunStatus.AWAITING_APPROVAL
        remove = self.token.on_cancel(waiting.answered.set)
        try:
            await waiting.answered.wait()
        finally:
            remove()
            self.pending.pop((request.path, request.call_id), None)
        decision = waiting.decision
        if decision is None:
            return Deny("the run was cancelled while waiting for approval")
        return Allow() if decision.approved else Deny(decision.reason or "a human denied the call")


@final
class InProcessRuns:
    """The default run backend: runs are tasks of this process.

    Args:
        retention: how long finished runs (and their logs) are kept.
    """

    def __init__(self, retention: Retention | None = None) -> None:
        self.retention = retention or Retention()
        self.runs: dict[str, LocalRun] = {}
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}
        self._group: TaskGroup | None = None

    async def serve(self) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
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
        run = LocalRun(request)
        self.runs[run.run_id] = run
        self._group.start_soon(self._execute, run, request)
        return run

    async def find(self, agent: str, run_id: str) -> LocalRun:
        run = self.runs.get(run_id)
        if run is None or run.agent != agent:
            raise RunNotFound(f"no run {run_id!r} of agent {agent!r}")
        return run

    async def sweep(self) -> int:
        finished = [(r.run_id, r.finished_at) for r in self.runs.values() if r.finished_at is not None]
        gone = expired(finished, now(), self.retention)
        for run_id in gone:
            del self.runs[run_id]
        return len(gone)

    async def _execute(self, run: LocalRun, request: StartRun) -> None:
        ctx = request.ctx.with_cancel(run.token)
        if ctx.approval_handler is None and ctx.suspend_on_approval:
            ctx = ctx.with_approval_handler(run.ask)
        try:
            if run.session_id is None:
                await self._run(run, request.agent, ctx, request)
            else:
                async with self._session_lock(run.session_id):
                    await self._run(run, request.agent, ctx, request)
        finally:
            _finish(run)  # cancelled while it queued: still ends, with a terminal frame

    async def _run(self, run: LocalRun, agent: Any, ctx: Any, request: StartRun) -> None:
        """Run it (holding its session's lock): it is finished before the next run of the session starts."""
        try:
            if run.token.cancelled:  # cancelled while it queued behind its session
                run.log.close("the run was cancelled before it started")
                return
            run.status = RunStatus.RUNNING
            run.started_at = now()
            try:
                stream = agent.run(ctx, request.input)
            except Exception as exc:
                run.log.close(f"the run could not start: {type(exc).__name__}: {exc}")
                return
            await drive(stream, run.log, _ignore)
        finally:
            _finish(run)

    def _session_lock(self, session_id: str) -> _SessionLock:
        return _SessionLock(self._locks, session_id)


def _ignore(event: AgentEvent) -> None:
    pass


def _finish(run: LocalRun) -> None:
    if run.finished_at is not None:
        return
    run.log.close("the run ended without a terminal event")
    run.status = RunStatus.FAILED if _failed(run.log) else RunStatus.COMPLETED
    run.finished_at = now()


def _failed(log: RunLog) -> bool:
    terminal = log.terminal
    return terminal is None or terminal["type"] == "RunFailed"


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


__all__ = ["InProcessRuns", "LocalRun"]
