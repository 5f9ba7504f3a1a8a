"""``TemporalRunner``: start durable runs and read their events (client side).

The runner starts the agent workflow on a task queue and awaits its
result: the run's events, the same events the live interpreter emits for
the same model and tool results. It runs under asyncio (the Temporal SDK
requires it). Progress streams from the ``helikon.events`` workflow query,
polled while the run is in flight. A run that waits for a human shows the
questions through the ``helikon.pending`` query and takes the decisions
through the ``helikon.approve`` update (:meth:`TemporalRun.approve`).

Only data crosses to the worker: the agent's name, the input items and an
optional JSON *ctx seed*. The worker's posture — permission mode, rules,
policy, approval handler, redaction — is the worker's alone.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import timedelta
from typing import Any, final

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from helikon._json import JsonValue
from helikon.effects import ApprovalDecision, ApprovalRequest, ApprovalsGiven
from helikon.errors import ConfigError, OtherError, RunError, StepError
from helikon.events import AgentEvent
from helikon.items import AgentInput
from helikon.results import RunResult, collect
from helikon.temporal._wire import (
    APPROVE_UPDATE,
    CONFIG_ERROR,
    EVENTS_QUERY,
    PENDING_QUERY,
    WORKFLOW_NAME,
    ApprovalsPending,
    RunOutcome,
    RunRequest,
    decode,
    encode,
)

#: Errors of a run that mean the worker was misconfigured for it.
_CONFIG_TYPES = frozenset({CONFIG_ERROR})


def _check_seed(seed: JsonValue) -> None:
    try:
        json.dumps(seed, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the ctx seed must be plain JSON data: {exc}") from None


def _translate(error: WorkflowFailureError, run_id: str) -> Exception:
    """The helikon exception for a durable run whose workflow failed."""
    cause: BaseException | None = error.cause
    while cause is not None:
        if isinstance(cause, ApplicationError):
            if cause.type in _CONFIG_TYPES:
                return ConfigError(cause.message)
            return RunError(OtherError(f"durable run {run_id!r} failed: {cause.message}"))
        cause = cause.__cause__
    return RunError(OtherError(f"durable run {run_id!r} failed: {error.cause or error}"))


async def _replay(events: Sequence[AgentEvent]) -> AsyncIterator[AgentEvent]:
    for event in events:
        yield event


@final
class TemporalRun:
    """A durable run in flight (or finished), by its run id (the workflow id)."""

    def __init__(self, handle: WorkflowHandle[Any, Any], poll_interval: float) -> None:
        self._handle = handle
        self._poll = poll_interval

    @property
    def run_id(self) -> str:
        """The run's id: the workflow id, and the ``run_id`` of its events."""
        return self._handle.id

    @property
    def handle(self) -> WorkflowHandle[Any, Any]:
        """The Temporal workflow handle (describe, signal, terminate...)."""
        return self._handle

    async def outcome(self) -> tuple[AgentEvent, ...]:
        """Wait for the run to end: every event, the terminal one last.

        Raises:
            ConfigError: the worker refused the run (unknown agent, rejected
                ctx seed, a changed agent definition).
            RunError: the workflow failed without reaching a terminal event.
        """
        try:
            data = await self._handle.result()
        except WorkflowFailureError as error:
            raise _translate(error, self.run_id) from None
        outcome: RunOutcome = decode(data, RunOutcome)
        return outcome.events

    async def result(self) -> RunResult[str]:
        """Wait for the run: its :class:`~helikon.RunResult`, as :func:`~helikon.collect` gives.

        Raises:
            RunError: the run ended with ``RunFailed`` (``.events`` holds the
                run's events), or the workflow failed.
            ConfigError: the worker refused the run.
        """
        return await collect(_replay(await self.outcome()))

    async def progress(self) -> tuple[AgentEvent, ...]:
        """The events the run has emitted so far (one query)."""
        return await self._query(0)

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Stream the run's events: polled while it runs, the rest at its end.

        Model deltas of a turn arrive together, when the turn's activity
        completes. Like ``agent.run``, the stream ends with ``RunCompleted``
        or ``RunFailed`` and does not raise for a failed run.
        """
        done = asyncio.ensure_future(self.outcome())
        seen = 0
        try:
            while not done.done():
                for event in await self._query(seen):
                    seen += 1
                    yield event
                await asyncio.wait({done}, timeout=self._poll)
            for event in done.result()[seen:]:
                yield event
        finally:
            if not done.done():
                done.cancel()

    async def cancel(self) -> None:
        """Ask the run to stop: it ends with ``RunFailed(Cancelled)``."""
        await self._handle.cancel()

    async def pending(self, *, wait: bool = False) -> tuple[ApprovalRequest, ...]:
        """The tool calls the run waits on a human's decision about (empty:
        none). With ``wait``, poll until there are some, or the run has
        ended (then empty). The run's events hold an ``ApprovalRequested``
        for each, too."""
        while True:
            try:
                data = await self._handle.query(
                    PENDING_QUERY, result_type=dict, rpc_timeout=timedelta(seconds=10)
                )
            except (WorkflowQueryFailedError, RPCError):
                data = None  # not yet queryable (no worker has picked it up)
            if data is not None:
                requests: tuple[ApprovalRequest, ...] = decode(data, ApprovalsPending).requests
                if requests or not wait:
                    return requests
            elif not wait:
                return ()
            described = await self._handle.describe()
            if described.status not in (None, WorkflowExecutionStatus.RUNNING):
                return ()
            await asyncio.sleep(self._poll)

    async def approve(self, decisions: ApprovalsGiven | Iterable[ApprovalDecision]) -> None:
        """Answer the approvals the run waits for: one decision per pending
        call (``ApprovalDecision(call_id, approved, reason)``). The run goes
        on from where it waited, on whichever worker serves it then.

        Sent while the run is busy, the decisions are held until it waits
        (and refused if it ends first).

        Raises:
            StepError: ``decisions`` do not answer every pending call exactly
                once (nothing changes), or the run is over.
        """
        given = decisions if isinstance(decisions, ApprovalsGiven) else ApprovalsGiven(tuple(decisions))
        try:
            await self._handle.execute_update(APPROVE_UPDATE, encode(given))
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
            raise StepError(f"durable run {self.run_id!r} refused the decisions: {message}") from None
        except RPCError as error:  # the run is over (or unknown)
            raise StepError(f"durable run {self.run_id!r} takes no decisions: {error.message}") from None

    async def _query(self, since: int) -> tuple[AgentEvent, ...]:
        try:
            data = await self._handle.query(
                EVENTS_QUERY, since, result_type=list, rpc_timeout=timedelta(seconds=10)
            )
        except (WorkflowQueryFailedError, RPCError):
            return ()  # not yet queryable (no worker has picked it up): nothing new
        return tuple(decode(item, AgentEvent) for item in data)


@final
class TemporalRunner:
    """Runs agents durably on Temporal workers.

    Args:
        client: a connected ``temporalio.client.Client``.
        task_queue: the default task queue of :meth:`run` and :meth:`start`.
        poll_interval: seconds between progress queries while streaming.
    """

    def __init__(self, client: Client, *, task_queue: str | None = None, poll_interval: float = 0.2) -> None:
        self._client = client
        self._task_queue = task_queue
        self._poll = poll_interval

    async def start(
        self,
        agent: str,
        input: AgentInput | str,
        *,
        task_queue: str | None = None,
        ctx_seed: JsonValue = None,
        run_id: str | None = None,
        execution_timeout: timedelta | None = None,
    ) -> TemporalRun:
        """Start a durable run of the agent registered as ``agent``; don't wait.

        Args:
            agent: the agent's name on the worker.
            input: the user's text or an :class:`~helikon.AgentInput`.
            task_queue: the workers' queue (the runner's default otherwise).
            ctx_seed: small JSON data for the worker's ctx factory; it is
                carried on every tool and instructions activity.
            run_id: the workflow id (and the events' run id); a fresh
                ``helikon-<uuid>`` by default. Temporal refuses a second
                running workflow with the same id.
            execution_timeout: Temporal's hard limit on the whole workflow
                (the agent's ``RunConfig.timeout`` ends the run gracefully).

        Raises:
            ConfigError: no task queue, or a ctx seed that is not JSON.
        """
        queue = task_queue or self._task_queue
        if not queue:
            raise ConfigError("a durable run needs a task_queue")
        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        elif not isinstance(input, AgentInput):
            raise TypeError(f"input must be a str or AgentInput, not {type(input).__name__}")
        _check_seed(ctx_seed)
        request = RunRequest(agent, input.items, ctx_seed)
        handle: WorkflowHandle[Any, Any] = await self._client.start_workflow(
            WORKFLOW_NAME,
            encode(request),
            id=run_id or f"helikon-{uuid.uuid4().hex}",
            task_queue=queue,
            result_type=dict,
            execution_timeout=execution_timeout,
        )
        return TemporalRun(handle, self._poll)

    async def run(
        self,
        agent: str,
        input: AgentInput | str,
        *,
        task_queue: str | None = None,
        ctx_seed: JsonValue = None,
        run_id: str | None = None,
    ) -> RunResult[str]:
        """Run the agent durably and wait: the :class:`~helikon.RunResult`.

        Raises:
            RunError: the run failed (``.error``; ``.events``).
            ConfigError: see :meth:`start` and :meth:`TemporalRun.outcome`.
        """
        run = await self.start(agent, input, task_queue=task_queue, ctx_seed=ctx_seed, run_id=run_id)
        return await run.result()

    async def stream(
        self,
        agent: str,
        input: AgentInput | str,
        *,
        task_queue: str | None = None,
        ctx_seed: JsonValue = None,
        run_id: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent durably, streaming its events as they are recorded."""
        run = await self.start(agent, input, task_queue=task_queue, ctx_seed=ctx_seed, run_id=run_id)
        async for event in run.events():
            yield event

    def attach(self, run_id: str) -> TemporalRun:
        """The run with id ``run_id`` (started by any client)."""
        return TemporalRun(self._client.get_workflow_handle(run_id, result_type=dict), self._poll)

    async def approve(self, run_id: str, decisions: ApprovalsGiven | Iterable[ApprovalDecision]) -> None:
        """Answer the approvals run ``run_id`` waits for (see :meth:`TemporalRun.approve`)."""
        await self.attach(run_id).approve(decisions)


__all__ = ["TemporalRun", "TemporalRunner"]
