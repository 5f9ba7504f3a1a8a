"""Scaling the agent server out: runs handed to Temporal.

With :class:`TemporalRuns` as its backend, an :class:`~helikon.server.AgentServer`
does not run agents itself: each run is a durable workflow of
:mod:`helikon.temporal`, executed by :class:`~helikon.temporal.TemporalAgentWorker`
processes. Every replica of the server reads, streams, approves and cancels
every run — its state lives in Temporal, not in a replica's memory — so a run
started through one replica can be followed and approved through another,
and outlives them all.

What changes against the in-process backend: the worker's
:class:`~helikon.temporal.WorkerPosture` governs the run (permission mode,
rules, approvals: ``suspend_on_approval=True`` makes runs wait for the
approvals route), not the server's context provider; events arrive as the
runner polls them (model deltas of a turn together); retention is the
Temporal namespace's; ``X-Session-Id`` reaches the worker only through
``seed``. Runs under asyncio only (the Temporal SDK needs it): serve the app
with Hypercorn's asyncio worker.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable
from typing import Any, final

import anyio
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from helikon._json import JsonValue
from helikon.effects import ApprovalDecision
from helikon.errors import HelikonError, StepError
from helikon.ids import CallId
from helikon.server._backend import ApprovalRefused, Decision, RunNotFound, ServerBusy, StartRun
from helikon.server._runs import Frame, event_frame, is_terminal, output_of, status_of, terminal_frame
from helikon.temporal import TemporalRun, TemporalRunner

#: Workflow statuses of a run that is over.
_OVER = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "failed",
}


def workflow_id(agent: str, run_id: str, owner: str | None = None) -> str:
    """The workflow id of the server's run ``run_id`` of ``agent`` started by
    ``owner``: one run id can never reach another agent's run, nor, with an
    owner (authentication on), another identity's run (the owner's digest is
    part of the id, so every replica scopes runs without storing owners)."""
    if owner is None:
        return f"helikon-server.{agent}.{run_id}"
    digest = hashlib.sha256(owner.encode()).hexdigest()[:24]
    return f"helikon-server.{agent}.{digest}.{run_id}"


@final
class TemporalHandle:
    """A durable run, as the server shows it."""

    def __init__(self, run: TemporalRun, agent: str, run_id: str, owner: str | None = None) -> None:
        self._run = run
        self._agent = agent
        self._run_id = run_id
        self.owner = owner

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def agent(self) -> str:
        return self._agent

    async def describe(self) -> dict[str, Any]:
        described = await self._run.handle.describe()
        over = _OVER.get(described.status) if described.status is not None else None
        frames = await self._events(over is not None)
        pending = [] if over else list(await self._run.pending())
        terminal = frames[-1] if frames and is_terminal(frames[-1]) else None
        if over is None:
            status = "awaiting_approval" if pending else "running"
        else:
            ended = status_of(frames, cancelled=over == "cancelled")
            status = ended.value
        return {
            "run_id": self._run_id,
            "agent": self._agent,
            "status": status,
            "session_id": None,
            "created_at": described.start_time.timestamp() if described.start_time else None,
            "finished_at": described.close_time.timestamp() if described.close_time else None,
            "events": len(frames),
            "output": output_of(frames, partial=status == "cancelled") if over else None,
            "error": terminal.get("error")
            if terminal is not None and terminal["type"] == "RunFailed"
            else None,
            "usage": terminal.get("usage") if terminal is not None else None,
            "pending_approvals": [
                {"call_id": r.call_id, "path": list(r.path), "tool": r.tool, "arguments": r.arguments}
                for r in pending
            ],
        }

    async def _events(self, over: bool) -> list[Frame]:
        try:
            events = await self._run.outcome() if over else await self._run.progress()
        except HelikonError as error:
            return [terminal_frame(f"the durable run failed: {error}")]
        return [{**event_frame(e), "seq": index} for index, e in enumerate(events)]

    async def frames(self, since: int = 0) -> AsyncIterator[Frame]:
        seq = 0
        try:
            async for event in self._run.events():
                frame = event_frame(event)
                frame["seq"] = seq
                seq += 1
                if frame["seq"] >= since:
                    yield frame
                if is_terminal(frame):
                    return
            reason = "the durable run ended without a terminal event"
        except HelikonError as error:
            reason = f"the durable run failed: {error}"
        frame = terminal_frame(reason)
        frame["seq"] = seq
        if seq >= since:
            yield frame

    async def approve(self, decisions: tuple[Decision, ...]) -> None:
        pending = {r.call_id for r in await self._run.pending()}  # the machine routes by path
        if not pending:
            raise ApprovalRefused(f"run {self._run_id} is not waiting for an approval")
        unknown = sorted({d.call_id for d in decisions} - pending)
        if unknown:
            raise ApprovalRefused(f"run {self._run_id} has no pending tool call {unknown[0]!r}")
        try:
            await self._run.approve(
                [ApprovalDecision(CallId(d.call_id), d.approved, d.reason, d.path) for d in decisions]
            )
        except StepError as error:
            raise ApprovalRefused(str(error)) from None

    async def cancel(self) -> None:
        with contextlib.suppress(RPCError):  # already over
            await self._run.cancel()


@final
class TemporalRuns:
    """A run backend that hands runs to Temporal workers.

    Args:
        runner: a :class:`~helikon.temporal.TemporalRunner` with a task queue
            the workers serving these agents listen on.
        seed: ``(StartRun) -> JSON`` — the ctx seed each run carries to the
            worker's ``ctx_factory`` (e.g. the session id); none by default.
    """

    def __init__(
        self, runner: TemporalRunner, *, seed: Callable[[StartRun], JsonValue] | None = None
    ) -> None:
        self.runner = runner
        self.seed = seed
        self.draining = False

    async def drain(self, grace: float) -> None:
        """Admit no more runs from this replica (its ``/ready`` answers 503).
        Runs in flight are Temporal's: they go on, on the workers, and any
        replica still serving reads them."""
        self.draining = True

    async def start(self, request: StartRun) -> TemporalHandle:
        if self.draining:
            raise ServerBusy("this replica is shutting down; retry on another one")
        agent = str(request.agent.name)
        seed = self.seed(request) if self.seed is not None else None
        run = await self.runner.start(
            agent, request.input, ctx_seed=seed, run_id=workflow_id(agent, request.run_id, request.owner)
        )
        return TemporalHandle(run, agent, request.run_id, request.owner)

    async def find(self, agent: str, run_id: str, owner: str | None = None) -> TemporalHandle:
        """The run ``run_id`` of ``agent`` that ``owner`` started (another
        identity's run of that id is not found: its workflow id differs)."""
        run = self.runner.attach(workflow_id(agent, run_id, owner))
        try:
            await run.handle.describe()
        except RPCError:
            raise RunNotFound(f"no run {run_id!r} of agent {agent!r}") from None
        return TemporalHandle(run, agent, run_id, owner)

    async def sweep(self) -> int:
        return 0  # Temporal's namespace retention keeps and drops closed workflows

    async def serve(self) -> None:
        await anyio.sleep_forever()


__all__ = ["TemporalHandle", "TemporalRuns", "workflow_id"]
