"""The agent workflow: the pure machine, driven inside Temporal.

:class:`AgentWorkflow` is a thin adapter. It reads the agent's definition
off the worker once (the ``describe_agent`` activity, recorded in the
history): its spec and, when the agent runs as an agent tree (handoffs,
hooks, a workflow agent, a swarm), the tree of every agent it can reach.
Then it runs :func:`helikon.interpreters.drive` — the loop every interpreter
shares — over the same pure machine as every interpreter (the agent loop,
or the :class:`~helikon.interpreters._machine.TreeMachine`), with a
performer (:mod:`helikon.temporal._performer`) that answers each effect
with activities, and each sub-machine's effect with an activity addressed
to its path.

A suspension for approval (``AwaitApproval``, with a worker posture that
suspends) waits *in the workflow*: the ``helikon.pending`` query shows the
questions (and ``ApprovalRequested`` events are in the stream), and the
``helikon.approve`` update carries the decisions
(:class:`~helikon.effects.ApprovalsGiven`). Nothing runs meanwhile; the wait
survives worker restarts like any other point of the history.

Nothing here reads a clock or draws a random number except through
Temporal: the run id is the workflow id, deadlines are measured with
``workflow.now()``, and everything else comes back as activity results, so
a replay of the history makes the same decisions. Everything this module
imports from helikon is a sandbox passthrough module (the pure core), but
the performer, which is reloaded in the sandbox with this module for each
run, as Temporal intends.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from helikon.context import RunContext
    from helikon.effects import ApprovalsGiven
    from helikon.errors import StepError
    from helikon.events import AgentEvent
    from helikon.ids import RunId
    from helikon.interpreters import RunEnv, drive
    from helikon.interpreters._machine import TreeMachine
    from helikon.items import AgentInput
    from helikon.temporal._wire import (
        APPROVAL_ERROR,
        APPROVE_UPDATE,
        DESCRIBE_AGENT,
        EVENTS_QUERY,
        PENDING_QUERY,
        START_ERROR,
        STEP_ERROR,
        WIRE_ERROR,
        WIRE_VERSION,
        WORKFLOW_NAME,
        AgentDescription,
        ApprovalsPending,
        DescribeAgent,
        RunOutcome,
        RunRequest,
        encode,
    )

from helikon.temporal._performer import (
    NON_RETRYABLE,
    ActivityPerformer,
    Approvals,
    RemoteModel,
    decode_or_fail,
    fail,
    reason,
)

#: ``describe_agent`` only reads the worker's registry.
_DESCRIBE_TIMEOUT = timedelta(seconds=30)


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """Runs one agent to a terminal state; its result is every event.

    Input and result are the plain-data :class:`~helikon.temporal.RunRequest`
    and :class:`~helikon.temporal.RunOutcome` (see :mod:`helikon.temporal._wire`).
    The ``helikon.events`` query returns the events so far, from an index;
    ``helikon.pending`` the approvals the run waits for; the
    ``helikon.approve`` update answers them.
    """

    def __init__(self) -> None:
        self._events: list[AgentEvent] = []
        self._approvals = Approvals()

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Drive the run; returns ``RunOutcome`` as plain data."""
        run: RunRequest = decode_or_fail(request, RunRequest)
        if run.version != WIRE_VERSION:
            fail(f"run request of wire version {run.version}; this worker speaks {WIRE_VERSION}", WIRE_ERROR)
        run_id = RunId(workflow.info().workflow_id)
        description = await self._describe(run, run_id)
        spec = description.spec
        performer = ActivityPerformer(run, run_id, description, self._approvals)
        # The spec carries the worker's governance (secrets excepted, which
        # never enter the history); the workflow runs the pipeline's decisions.
        machine = TreeMachine(description.tree) if description.tree is not None else None
        env = RunEnv(
            spec, RemoteModel(spec.model_id), {}, None, RunContext.ephemeral(None), run_id, machine=machine
        )
        try:
            async for event in drive(performer, env, AgentInput(run.input)):
                self._events.append(event)
        except StepError as exc:
            fail(f"helikon interpreter error: {exc}", STEP_ERROR)
        finally:
            self._approvals.closed = True  # a late decision is refused, not kept waiting
        return encode(RunOutcome(tuple(self._events)))

    @workflow.query(name=EVENTS_QUERY)
    def events(self, since: int) -> list[dict[str, Any]]:
        """The run's events from index ``since`` on, as plain data."""
        return [encode(event, AgentEvent) for event in self._events[max(since, 0) :]]

    @workflow.query(name=PENDING_QUERY)
    def pending(self) -> dict[str, Any]:
        """The approvals the run waits for (:class:`ApprovalsPending`)."""
        return encode(ApprovalsPending(self._approvals.pending))

    @workflow.update(name=APPROVE_UPDATE)
    async def approve(self, decisions: dict[str, Any]) -> None:
        """Answer the pending approvals with ``decisions`` (an ``ApprovalsGiven``):
        they must answer every pending question exactly once; sent while the
        run is busy, they are held until it waits (and refused if it ends)."""
        try:
            await self._approvals.answer(decode_or_fail(decisions, ApprovalsGiven))
        except ValueError as exc:
            raise ApplicationError(str(exc), type=APPROVAL_ERROR, non_retryable=True) from None

    @approve.validator
    def check_approval(self, decisions: dict[str, Any]) -> None:
        """Refuse a payload that is not an ``ApprovalsGiven`` (unrecorded)."""
        decode_or_fail(decisions, ApprovalsGiven)

    async def _describe(self, run: RunRequest, run_id: RunId) -> AgentDescription:
        try:
            data = await workflow.execute_activity(
                DESCRIBE_AGENT,
                encode(DescribeAgent(run.agent, run_id, run.ctx_seed)),
                result_type=dict,
                start_to_close_timeout=_DESCRIBE_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=NON_RETRYABLE),
            )
        except ActivityError as error:
            cause = error.cause
            kind = cause.type if isinstance(cause, ApplicationError) and cause.type else START_ERROR
            fail(f"cannot start agent {run.agent!r}: {reason(error)}", kind)
        description: AgentDescription = decode_or_fail(data, AgentDescription)
        return description


__all__ = ["AgentWorkflow"]
