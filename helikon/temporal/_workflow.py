"""The agent-loop workflow: the pure core, driven inside Temporal.

:class:`AgentWorkflow` is a thin adapter. It reads the agent's definition
off the worker once (the ``describe_agent`` activity, recorded in the
history), then runs :func:`helikon.interpreters.drive` — the loop every
interpreter shares, over the pure :func:`helikon.loop.transition` — with a
performer that answers each effect with an activity:

- ``CallModel`` -> one ``call_model`` activity; the raw deltas are made from
  the returned model events with :func:`helikon.loop.delta_event`, exactly
  as the replay interpreter makes them, so the event stream equals the live
  one;
- ``ExecuteTools`` -> one ``call_step`` activity per step of the round's
  tool-call pipelines (a hook, the permission policy, or the tool itself),
  started concurrently under ``parallel_tool_call_limit``; every decision
  between the steps is the machine's, made here in the workflow;
- ``AskApprovals`` -> one ``ask_approvals`` activity (the worker's handler);
- ``RenderInstructions`` -> one ``render_instructions`` activity.

Nothing here reads a clock or draws a random number except through
Temporal: the run id is the workflow id, the run's deadline is measured with
``workflow.now()``, and everything else comes back as activity results, so
a replay of the history makes the same decisions. Everything this module
imports from helikon is a sandbox passthrough module (the pure core); the
module itself is reloaded in the sandbox for each run, as Temporal intends.

Failures: an activity that fails for good becomes data where the core has a
place for it (a model turn -> ``ModelCallFailed``, a tool call ->
``ToolRaised``, the run's deadline -> ``RunInterrupted(TimedOut)``, a
cancelled workflow -> ``RunInterrupted(Cancelled)``), so the run ends with
``RunFailed`` as an ephemeral one would. A misconfigured worker, an
undecodable payload or an interpreter bug fail the workflow with a
non-retryable ``ApplicationError`` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError
from temporalio.exceptions import CancelledError as ActivityCancelled

with workflow.unsafe.imports_passed_through():
    from helikon.cancel import CancellationToken
    from helikon.context import RunContext
    from helikon.effects import (
        ApprovalDecision,
        ApprovalRequest,
        ApprovalsGiven,
        AskApprovals,
        AwaitApproval,
        CallbackRaised,
        CallModel,
        CallStep,
        CheckGuardrails,
        Effect,
        EffectResult,
        ExecuteTools,
        Handoff,
        InstructionsRendered,
        InvokeTool,
        ModelCallFailed,
        ModelResponded,
        RenderInstructions,
        RunAgents,
        RunHooks,
        RunInterrupted,
        StepResult,
        Terminate,
        ToolRaised,
        ToolsExecuted,
    )
    from helikon.errors import Cancelled, StepError, TimedOut, ToolCrashed, TransportFailure
    from helikon.events import AgentEvent
    from helikon.ids import RunId
    from helikon.interpreters import RunEnv, drive
    from helikon.items import AgentInput
    from helikon.loop import delta_event
    from helikon.model import ModelCapabilities, ModelEvent, ModelRequest
    from helikon.temporal._wire import (
        ASK_APPROVALS,
        CALL_MODEL,
        CALL_STEP,
        CONFIG_ERROR,
        DESCRIBE_AGENT,
        EVENTS_QUERY,
        INSTRUCTIONS_ERROR,
        RENDER_INSTRUCTIONS,
        START_ERROR,
        STEP_ERROR,
        WIRE_ERROR,
        WIRE_VERSION,
        WORKFLOW_NAME,
        AgentDescription,
        ApprovalsRequest,
        CallModelRequest,
        DescribeAgent,
        ModelResult,
        RenderInstructionsRequest,
        RunOutcome,
        RunRequest,
        StepDone,
        StepRequest,
        WireFormatError,
        decode,
        encode,
    )

#: Errors an activity raises that no retry can fix.
_NON_RETRYABLE = [CONFIG_ERROR, WIRE_ERROR]

#: ``describe_agent`` only reads the worker's registry.
_DESCRIBE_TIMEOUT = timedelta(seconds=30)


class _RemoteModel:
    """Stands in for the model inside the workflow, where it is never called:
    the model lives on the worker and is reached through ``call_model``."""

    def __init__(self, model_id: str) -> None:
        self._model_id = model_id

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "temporal"

    @property
    def model_id(self) -> str:
        return self._model_id

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        raise StepError("inside the workflow the model is called through the call_model activity")


def _fail(message: str, kind: str) -> NoReturn:
    raise ApplicationError(message, type=kind, non_retryable=True)


def _decode(data: object, as_type: Any) -> Any:
    try:
        return decode(data, as_type)
    except WireFormatError as exc:
        _fail(str(exc), WIRE_ERROR)


def _reason(error: ActivityError) -> str:
    """What went wrong with an activity, in words."""
    cause = error.cause
    if isinstance(cause, TimeoutError):
        return f"timed out ({cause.type.name.lower() if cause.type is not None else 'timeout'})"
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or error)


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """Runs one agent to a terminal state; its result is every event.

    Input and result are the plain-data :class:`~helikon.temporal.RunRequest`
    and :class:`~helikon.temporal.RunOutcome` (see :mod:`helikon.temporal._wire`).
    The ``helikon.events`` query returns the events so far, from an index.
    """

    def __init__(self) -> None:
        self._events: list[AgentEvent] = []

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Drive the run; returns ``RunOutcome`` as plain data."""
        run: RunRequest = _decode(request, RunRequest)
        if run.version != WIRE_VERSION:
            _fail(f"run request of wire version {run.version}; this worker speaks {WIRE_VERSION}", WIRE_ERROR)
        run_id = RunId(workflow.info().workflow_id)
        description = await self._describe(run, run_id)
        spec = description.spec
        performer = _ActivityPerformer(run, run_id, description)
        # The spec carries the worker's governance (secrets excepted, which
        # never enter the history); the workflow runs the pipeline's decisions.
        env = RunEnv(spec, _RemoteModel(spec.model_id), {}, None, RunContext.ephemeral(None), run_id)
        try:
            async for event in drive(performer, env, AgentInput(run.input)):
                self._events.append(event)
        except StepError as exc:
            _fail(f"helikon interpreter error: {exc}", STEP_ERROR)
        return encode(RunOutcome(tuple(self._events)))

    @workflow.query(name=EVENTS_QUERY)
    def events(self, since: int) -> list[dict[str, Any]]:
        """The run's events from index ``since`` on, as plain data."""
        return [encode(event, AgentEvent) for event in self._events[max(since, 0) :]]

    async def _describe(self, run: RunRequest, run_id: RunId) -> AgentDescription:
        try:
            data = await workflow.execute_activity(
                DESCRIBE_AGENT,
                encode(DescribeAgent(run.agent, run_id, run.ctx_seed)),
                result_type=dict,
                start_to_close_timeout=_DESCRIBE_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=_NON_RETRYABLE),
            )
        except ActivityError as error:
            cause = error.cause
            kind = cause.type if isinstance(cause, ApplicationError) and cause.type else START_ERROR
            _fail(f"cannot start agent {run.agent!r}: {_reason(error)}", kind)
        description: AgentDescription = _decode(data, AgentDescription)
        return description


class _ActivityPerformer:
    """The workflow-side interpreter: every effect is an activity."""

    def __init__(self, run: RunRequest, run_id: RunId, description: AgentDescription) -> None:
        self._run = run
        self._run_id = run_id
        self._description = description
        self._settings = description.settings
        timeout = description.spec.config.timeout
        self._timeout = timeout
        self._deadline = workflow.now() + timedelta(seconds=timeout) if timeout is not None else None

    def new_run_id(self) -> RunId:
        return self._run_id

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        if self._expired():
            yield RunInterrupted(TimedOut(self._timeout or 0.0))
            return
        try:
            match effect:
                case CallModel():
                    result = await self._call_model(effect)
                    if not isinstance(result, RunInterrupted):
                        for event in result.events:
                            delta = delta_event(event)
                            if delta is not None:
                                yield delta
                    yield result
                case ExecuteTools(steps=steps):
                    yield await self._execute_tools(steps, env.spec.config.parallel_tool_call_limit)
                case AskApprovals(requests=requests):
                    yield await self._ask_approvals(requests)
                case RenderInstructions(turn=turn):
                    yield await self._render_instructions(turn)
                case Handoff() | RunAgents() | RunHooks() | CheckGuardrails() | AwaitApproval():
                    # Registration refuses the agents that would ask for these.
                    raise StepError(f"{type(effect).__name__} is not supported by the durable driver (v0)")
                case Terminate():
                    raise StepError("there is nothing to perform after Terminate")
        except asyncio.CancelledError:
            # The workflow was cancelled: the run ends as a cancelled ephemeral run does.
            yield RunInterrupted(Cancelled())

    # -- effects -------------------------------------------------------------------------------

    async def _call_model(self, effect: CallModel) -> ModelResponded | ModelCallFailed | RunInterrupted:
        settings = self._settings
        request = CallModelRequest(
            self._run.agent, self._run_id, self._description.fingerprint, effect.turn, effect.request
        )
        try:
            data = await self._activity(
                CALL_MODEL,
                encode(request),
                timeout_s=settings.model_timeout_s,
                attempts=settings.model_max_attempts,
            )
        except ActivityError as error:
            stopped = self._interruption(error)
            if stopped is not None:
                return stopped
            return ModelCallFailed(TransportFailure(f"the call_model activity failed: {_reason(error)}"))
        result: ModelResponded | ModelCallFailed | RunInterrupted = _decode(data, ModelResult)
        return result

    async def _execute_tools(
        self, steps: tuple[CallStep, ...], limit: int | None
    ) -> ToolsExecuted | RunInterrupted:
        gate = asyncio.Semaphore(limit) if limit is not None else None

        async def one(step: CallStep) -> StepResult | RunInterrupted:
            if gate is None:
                return await self._call_step(step)
            async with gate:
                return await self._call_step(step)

        # Activities are scheduled in step order; they may finish in any
        # order, which the history records, so a replay resumes identically.
        results = await asyncio.gather(*(one(step) for step in steps))
        done: list[StepResult] = []
        for result in results:
            if isinstance(result, RunInterrupted):
                return result
            done.append(result)
        return ToolsExecuted(tuple(done))

    async def _call_step(self, step: CallStep) -> StepResult | RunInterrupted:
        settings = self._settings
        request = StepRequest(
            self._run.agent, self._run_id, self._description.fingerprint, step, self._run.ctx_seed
        )
        tool = step.tool if isinstance(step, InvokeTool) else ""
        try:
            data = await self._activity(
                CALL_STEP,
                encode(request),
                timeout_s=settings.tool_timeout_s,
                attempts=settings.attempts_for(tool) if tool else settings.tool_max_attempts,
            )
        except ActivityError as error:
            stopped = self._interruption(error)
            if stopped is not None:
                return stopped
            if isinstance(step, InvokeTool):
                failure = ToolCrashed(f"tool {step.tool!r} did not complete: {_reason(error)}")
                return ToolRaised(step.call_id, failure)
            return CallbackRaised(step.call_id, f"the call_step activity failed: {_reason(error)}")
        done: StepDone = _decode(data, StepDone)
        return done.result

    async def _ask_approvals(self, requests: tuple[ApprovalRequest, ...]) -> ApprovalsGiven | RunInterrupted:
        settings = self._settings
        request = ApprovalsRequest(
            self._run.agent, self._run_id, self._description.fingerprint, requests, self._run.ctx_seed
        )
        try:
            data = await self._activity(
                ASK_APPROVALS, encode(request), timeout_s=settings.tool_timeout_s, attempts=1
            )
        except ActivityError as error:
            stopped = self._interruption(error)
            if stopped is not None:
                return stopped
            reason = f"the approval handler did not answer: {_reason(error)}"
            return ApprovalsGiven(tuple(ApprovalDecision(r.call_id, False, reason) for r in requests))
        given: ApprovalsGiven = _decode(data, ApprovalsGiven)
        return given

    async def _render_instructions(self, turn: int) -> InstructionsRendered | RunInterrupted:
        settings = self._settings
        request = RenderInstructionsRequest(
            self._run.agent, self._run_id, self._description.fingerprint, turn, self._run.ctx_seed
        )
        try:
            data = await self._activity(
                RENDER_INSTRUCTIONS,
                encode(request),
                timeout_s=settings.instructions_timeout_s,
                attempts=settings.instructions_max_attempts,
            )
        except ActivityError as error:
            stopped = self._interruption(error)
            if stopped is not None:
                return stopped
            _fail(
                f"the instructions of agent {self._run.agent!r} failed: {_reason(error)}", INSTRUCTIONS_ERROR
            )
        rendered: InstructionsRendered = _decode(data, InstructionsRendered)
        return rendered

    # -- scheduling ----------------------------------------------------------------------------

    async def _activity(
        self, name: str, payload: dict[str, Any], *, timeout_s: float, attempts: int
    ) -> dict[str, Any]:
        heartbeat = self._settings.heartbeat_timeout_s
        remaining = None
        if self._deadline is not None:
            # No activity may outlive the run's deadline.
            remaining = max(self._deadline - workflow.now(), timedelta(milliseconds=1))
        data: dict[str, Any] = await workflow.execute_activity(
            name,
            payload,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=timeout_s),
            schedule_to_close_timeout=remaining,
            heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat is not None else None,
            retry_policy=RetryPolicy(maximum_attempts=attempts, non_retryable_error_types=_NON_RETRYABLE),
        )
        return data

    def _expired(self) -> bool:
        return self._deadline is not None and workflow.now() >= self._deadline

    def _interruption(self, error: ActivityError) -> RunInterrupted | None:
        """The interruption behind a failed activity, if any; a misconfigured
        worker fails the workflow."""
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type in _NON_RETRYABLE:
            _fail(cause.message, cause.type or CONFIG_ERROR)
        if isinstance(cause, ActivityCancelled):
            return RunInterrupted(Cancelled())
        if self._expired():
            return RunInterrupted(TimedOut(self._timeout or 0.0))
        return None


__all__ = ["AgentWorkflow"]
