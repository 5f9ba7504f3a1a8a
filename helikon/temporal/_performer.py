"""The workflow-side interpreter: every effect of the machine as activities.

:class:`ActivityPerformer` is what :func:`helikon.interpreters.drive` calls
inside the workflow. Each effect becomes activities on the worker, and each
effect of a sub-machine of an agent tree (an :class:`~helikon.effects.AtPath`
of a :class:`~helikon.effects.PerformAll`) an activity addressed to that
sub-machine's path:

- ``CallModel`` -> ``call_model``; the raw deltas are made from the returned
  model events with :func:`helikon.loop.delta_event`, exactly as the replay
  interpreter makes them, so the event stream equals the live one;
- ``ExecuteTools`` -> one ``call_step`` per step of the round's tool-call
  pipelines (a hook, the permission policy, or the tool itself), started
  concurrently under the agent's ``parallel_tool_call_limit``;
- ``AskApprovals`` -> ``ask_approvals``; ``RenderInstructions`` ->
  ``render_instructions``; ``RunHooks`` -> ``run_hooks``;
  ``CheckGuardrails`` -> ``check_guardrails``; ``NotifyHooks`` ->
  ``notify_hooks``;
- ``RunAgents`` at a path (a child that is not a helikon machine) ->
  ``run_agent``, which runs it whole on the worker;
- ``StoreOutput`` is kept here, in the workflow (it is the machine's data),
  and sent with every later activity that runs user code, which finds it in
  ``ctx.state``;
- ``PerformAll`` -> its effects' activities, started at once and joined in
  order (Temporal records which finished when, so a replay resumes
  identically); their events are emitted in tree order, then the results;
- ``AwaitApproval`` -> waits in the workflow for the ``helikon.approve``
  update (:class:`Approvals`).

Time is the machine's (:mod:`helikon.loop._clock`): the performer's clock
is ``workflow.now()`` (or a worker's ``clock``, read through the
``read_clock`` activity), and the machine keeps every deadline — the run's
and each tree member's own — and decides when one has passed. The performer
only derives from the machine's state how long an activity may take
(``schedule_to_close_timeout``), so no activity outlives its deadline.

Failures: an activity that fails for good becomes data where the core has a
place for it (a model turn -> ``ModelCallFailed``, a tool call ->
``ToolRaised``, a turn hook -> a denial (governance fails closed), a
guardrail -> a tripwire, an observing hook -> ignored, an opaque child -> its
failure, an approval wait past the deadline -> ``RunInterrupted(TimedOut)``, a cancelled workflow ->
``RunInterrupted(Cancelled)``). A misconfigured worker, an undecodable
payload or an interpreter bug fail the workflow with a non-retryable
``ApplicationError`` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as ActivityCancelled
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from helikon.agents import deadline_at
    from helikon.cancel import CancellationToken
    from helikon.effects import (
        AgentRun,
        AgentRunResult,
        AgentsRan,
        AllPerformed,
        ApprovalRequest,
        ApprovalsGiven,
        AskApprovals,
        AwaitApproval,
        CallModel,
        CallStep,
        CheckGuardrails,
        Effect,
        EffectResult,
        ExecuteTools,
        GuardrailsChecked,
        HooksNotified,
        HooksRan,
        InstructionsFailed,
        InstructionsRendered,
        InvokeTool,
        ModelCallFailed,
        NotifyHooks,
        OutputStored,
        PathResult,
        PerformAll,
        RenderInstructions,
        RunAgents,
        RunHooks,
        RunInterrupted,
        StepResult,
        StoreOutput,
        ToolsExecuted,
    )
    from helikon.errors import (
        Cancelled,
        OtherError,
        StepError,
        TimedOut,
        TransportFailure,
    )
    from helikon.events import AgentEvent, emitted_at
    from helikon.ids import RunId
    from helikon.interpreters import RunEnv
    from helikon.interpreters._perform import step_result
    from helikon.loop import (
        AgentSpec,
        NoAnswer,
        Raised,
        approval_decision,
        delta_event,
        guardrails_checked,
        hooks_unanswered,
        instructions_result,
    )
    from helikon.model import ModelCapabilities, ModelEvent, ModelRequest, Usage
    from helikon.temporal._paths import is_private, member_at
    from helikon.temporal._wire import (
        ASK_APPROVALS,
        CALL_MODEL,
        CALL_STEP,
        CHECK_GUARDRAILS,
        CONFIG_ERROR,
        NOTIFY_HOOKS,
        READ_CLOCK,
        RENDER_INSTRUCTIONS,
        RUN_AGENT,
        RUN_HOOKS,
        WIRE_ERROR,
        Address,
        AgentDescription,
        AgentRan,
        AgentRunRequest,
        ApprovalsRequest,
        CallModelRequest,
        GuardrailsRequest,
        HooksRequest,
        ModelResult,
        NotifyRequest,
        RenderInstructionsRequest,
        RunRequest,
        StepDone,
        StepRequest,
        StoredOutput,
        WireFormatError,
        decode,
        encode,
    )

#: Errors an activity raises that no retry can fix.
NON_RETRYABLE = [CONFIG_ERROR, WIRE_ERROR]

#: A node's own bookkeeping after its machine moved (see ``helikon.agents``).
_CHORES = (NotifyHooks, StoreOutput)

#: What performing one effect gives: the events it streamed and its result.
Performed = tuple[tuple[AgentEvent, ...], EffectResult]


class RemoteModel:
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


def fail(message: str, kind: str) -> NoReturn:
    raise ApplicationError(message, type=kind, non_retryable=True)


def decode_or_fail(data: object, as_type: Any) -> Any:
    try:
        return decode(data, as_type)
    except WireFormatError as exc:
        fail(str(exc), WIRE_ERROR)


def reason(error: ActivityError) -> str:
    """What went wrong with an activity, in words."""
    cause = error.cause
    if isinstance(cause, ActivityTimeout):
        return f"timed out ({cause.type.name.lower() if cause.type is not None else 'timeout'})"
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or error)


class Approvals:
    """The questions a run waits on, and the decisions that answer them.

    The run sets ``pending`` while it waits (:meth:`wait`); the
    ``helikon.approve`` update hands decisions over (:meth:`answer`) once
    they answer every pending question exactly once.
    """

    def __init__(self) -> None:
        self.pending: tuple[ApprovalRequest, ...] = ()
        self.given: ApprovalsGiven | None = None
        self.closed = False

    def check(self, given: ApprovalsGiven) -> None:
        """Raise ``ValueError`` unless ``given`` answers every pending question once."""
        if not self.pending or self.given is not None:
            raise ValueError("the run is not waiting for an approval")
        asked = [r.call_id for r in self.pending]
        answered = [d.call_id for d in given.decisions]
        unknown = sorted(set(answered) - set(asked))
        if unknown:
            raise ValueError(f"no pending approval for tool call(s) {', '.join(unknown)}")
        twice = sorted({c for c in answered if answered.count(c) > 1})
        if twice:
            raise ValueError(f"more than one decision for tool call(s) {', '.join(twice)}")
        missing = [c for c in asked if c not in answered]
        if missing:
            raise ValueError(f"no decision for pending tool call(s) {', '.join(missing)}")

    async def answer(self, given: ApprovalsGiven) -> None:
        """Hand ``given`` to the run once it waits (or refuse it, raising
        ``ValueError``, if it does not answer the questions, or the run ended).

        A worker that replays a run's history may deliver the update before
        the replay is back at the wait, hence the wait here.
        """
        await workflow.wait_condition(lambda: bool(self.pending) or self.closed)
        self.check(given)
        by_call = {d.call_id: d for d in given.decisions}
        self.given = ApprovalsGiven(tuple(by_call[r.call_id] for r in self.pending))

    async def wait(
        self, requests: tuple[ApprovalRequest, ...], timeout: timedelta | None
    ) -> ApprovalsGiven | None:
        """Wait for the decisions about ``requests`` (None: ``timeout`` passed)."""
        self.pending = requests
        try:
            await workflow.wait_condition(lambda: self.given is not None, timeout=timeout)
        except TimeoutError:
            return None
        finally:
            self.pending = ()
        given, self.given = self.given, None
        return given


class ActivityPerformer:
    """The workflow-side interpreter: every effect is an activity."""

    def __init__(
        self, run: RunRequest, run_id: RunId, description: AgentDescription, approvals: Approvals
    ) -> None:
        self._run = run
        self._run_id = run_id
        self._description = description
        self._settings = description.settings
        self._approvals = approvals
        self._stored: dict[str, str] = {}
        self._cancelled = False
        #: The machine's latest state and the latest clock reading it was
        #: given: each activity's deadline is derived from them, never kept here.
        self._state: Any = None
        self._last: float | None = None

    def new_run_id(self) -> RunId:
        return self._run_id

    def now(self) -> float | Awaitable[float]:
        """The machine's clock reading: the workflow's clock (deterministic on
        replay), or, on a worker given a ``clock``, that clock's reading
        through the ``read_clock`` activity (recorded in the history)."""
        if self._settings.clock:
            return self._read_clock()
        self._last = workflow.now().timestamp()
        return self._last

    async def _read_clock(self) -> float:
        data = await workflow.execute_activity(
            READ_CLOCK,
            {},
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=NON_RETRYABLE),
        )
        reading = float(data["now"])
        self._last = reading
        return reading

    def observe(self, env: RunEnv, outcome: Any) -> None:
        """Keep the machine's state: where its deadlines are."""
        self._state = outcome.state

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        if self._cancelled and type(effect) not in _CHORES:
            yield RunInterrupted(Cancelled())
            return
        try:
            match effect:
                case PerformAll(effects=effects):
                    # Started in tree order; they may finish in any order, which
                    # the history records, so a replay resumes identically.
                    done = await asyncio.gather(*(self._at(at.path, at.effect) for at in effects))
                    for at, (events, _) in zip(effects, done, strict=True):
                        if is_private(self._description.tree, at.path):
                            continue  # an agent used as a tool: its turns are its own
                        for event in events:
                            yield emitted_at(at.path, event)
                    results = (result for _, result in done)
                    yield AllPerformed(
                        tuple(PathResult(at.path, r) for at, r in zip(effects, results, strict=True))
                    )
                case AwaitApproval(requests=requests):
                    yield await self._await_approval(requests)
                case _:
                    events, result = await self._at((), effect)
                    for event in events:
                        yield event
                    yield result
        except asyncio.CancelledError:
            # The workflow was cancelled: the run ends as a cancelled ephemeral run does.
            self._cancelled = True
            yield RunInterrupted(Cancelled())

    async def _at(self, path: tuple[str, ...], effect: Effect) -> Performed:
        """Perform the effect of the sub-machine at ``path`` (the root: ``()``)."""
        # An opaque child runs whole in its parent's world (and under its deadline).
        # A node's chores (observing hooks, storing an output) are done even past a
        # deadline or a cancel: they may come after its machine ended, because of it.
        if self._cancelled and type(effect) not in _CHORES:
            return (), RunInterrupted(Cancelled())
        match effect:
            case CallModel():
                result = await self._call_model(path, effect)
                if isinstance(result, RunInterrupted):
                    return (), result
                deltas = (delta_event(event) for event in result.events)
                return tuple(d for d in deltas if d is not None), result
            case ExecuteTools(steps=steps):
                return (), await self._execute_tools(path, steps)
            case AskApprovals(requests=requests):
                return (), await self._ask_approvals(path, requests)
            case RenderInstructions(turn=turn):
                return (), await self._render_instructions(path, turn)
            case RunHooks(turn=turn):
                return (), await self._run_hooks(path, turn)
            case CheckGuardrails(stage=stage, text=text):
                return (), await self._check_guardrails(path, stage, text)
            case NotifyHooks(event=event):
                request = NotifyRequest(self._address(path), event)
                try:
                    await self._user_code(NOTIFY_HOOKS, request, None)
                except asyncio.CancelledError:
                    self._cancelled = True  # the next effect is interrupted
                # Best effort, as in an ephemeral run: the hooks' failures are ignored.
                return (), HooksNotified()
            case StoreOutput(key=key, text=text):
                self._stored[key] = text
                return (), OutputStored()
            case RunAgents(runs=(run,), depth=depth):
                return await self._run_agent(path, run, depth)
            case _:
                where = "/".join(path) or "the root"
                raise StepError(f"{type(effect).__name__} at {where} is not an interpreter's to perform")

    # -- effects -------------------------------------------------------------------------------

    async def _call_model(self, path: tuple[str, ...], effect: CallModel) -> ModelResult:
        settings = self._settings
        request = CallModelRequest(self._address(path, user=False), effect.turn, effect.request)
        try:
            data = await self._activity(
                CALL_MODEL, encode(request), path, settings.model_timeout_s, settings.model_max_attempts
            )
        except ActivityError as error:
            stopped = self._interruption(error, path)
            if stopped is not None:
                return stopped
            return ModelCallFailed(TransportFailure(f"the call_model activity failed: {reason(error)}"))
        result: ModelResult = decode_or_fail(data, ModelResult)
        return result

    async def _execute_tools(
        self, path: tuple[str, ...], steps: tuple[CallStep, ...]
    ) -> ToolsExecuted | RunInterrupted:
        limit = self._tool_limit(path)
        gate = asyncio.Semaphore(limit) if limit is not None else None

        async def one(step: CallStep) -> tuple[StepResult, bool] | RunInterrupted:
            if gate is None:
                return await self._call_step(path, step)
            async with gate:
                return await self._call_step(path, step)

        results = await asyncio.gather(*(one(step) for step in steps))
        done: list[StepResult] = []
        escalated = False
        for result in results:
            if isinstance(result, RunInterrupted):
                return result
            done.append(result[0])
            escalated = escalated or result[1]
        return ToolsExecuted(tuple(done), escalated)

    async def _call_step(
        self, path: tuple[str, ...], step: CallStep
    ) -> tuple[StepResult, bool] | RunInterrupted:
        settings = self._settings
        request = StepRequest(self._address(path), step)
        tool = step.tool if isinstance(step, InvokeTool) else ""
        attempts = settings.attempts_for(tool) if tool else settings.tool_max_attempts
        try:
            data = await self._activity(CALL_STEP, encode(request), path, settings.tool_timeout_s, attempts)
        except ActivityError as error:
            stopped = self._interruption(error, path)
            if stopped is not None:
                return stopped
            what = f"tool {step.tool!r} did not complete" if isinstance(step, InvokeTool) else "no answer"
            return step_result(step, Raised(NoAnswer(f"{what}: {reason(error)}"))), False
        done: StepDone = decode_or_fail(data, StepDone)
        return done.result, done.escalated

    async def _ask_approvals(
        self, path: tuple[str, ...], requests: tuple[ApprovalRequest, ...]
    ) -> ApprovalsGiven | RunInterrupted:
        request = ApprovalsRequest(self._address(path), requests)
        data = await self._user_code(ASK_APPROVALS, request, path, attempts=1)
        if isinstance(data, RunInterrupted):
            return data
        if isinstance(data, str):
            why = Raised(NoAnswer(f"the approval handler did not answer: {data}"))
            return ApprovalsGiven(tuple(approval_decision(r.call_id, why, r.path) for r in requests))
        given: ApprovalsGiven = decode_or_fail(data, ApprovalsGiven)
        return given

    async def _render_instructions(
        self, path: tuple[str, ...], turn: int
    ) -> InstructionsRendered | InstructionsFailed | RunInterrupted:
        settings = self._settings
        request = RenderInstructionsRequest(self._address(path), turn)
        try:
            data = await self._activity(
                RENDER_INSTRUCTIONS,
                encode(request),
                path,
                settings.instructions_timeout_s,
                settings.instructions_max_attempts,
            )
        except ActivityError as error:
            stopped = self._interruption(error, path)
            if stopped is not None:
                return stopped
            return instructions_result(Raised(NoAnswer(reason(error))))
        rendered: InstructionsRendered = decode_or_fail(data, InstructionsRendered)
        return rendered

    async def _run_hooks(self, path: tuple[str, ...], turn: int) -> HooksRan | RunInterrupted:
        data = await self._user_code(RUN_HOOKS, HooksRequest(self._address(path), turn), path)
        if isinstance(data, RunInterrupted):
            return data
        if isinstance(data, str):
            return hooks_unanswered(f"the turn hooks did not answer: {data}")
        ran: HooksRan = decode_or_fail(data, HooksRan)
        return ran

    async def _check_guardrails(
        self, path: tuple[str, ...], stage: str, text: str
    ) -> GuardrailsChecked | RunInterrupted:
        request = GuardrailsRequest(self._address(path), stage, text)
        data = await self._user_code(CHECK_GUARDRAILS, request, path)
        if isinstance(data, RunInterrupted):
            return data
        if isinstance(data, str):
            unanswered = Raised(NoAnswer(f"the {stage} guardrails did not answer: {data}"))
            return guardrails_checked([unanswered], str)
        checked: GuardrailsChecked = decode_or_fail(data, GuardrailsChecked)
        return checked

    async def _run_agent(self, path: tuple[str, ...], run: AgentRun, depth: int) -> Performed:
        request = AgentRunRequest(self._address(path), run, depth)
        data = await self._user_code(RUN_AGENT, request, path[:-1])
        if isinstance(data, RunInterrupted):
            return (), data
        if isinstance(data, str):
            error = OtherError(f"agent {run.agent!r} did not complete: {data}")
            return (), AgentsRan((AgentRunResult(run.key, "", Usage(), error),))
        ran: AgentRan = decode_or_fail(data, AgentRan)
        return ran.events, ran.result

    # -- scheduling ----------------------------------------------------------------------------

    async def _await_approval(self, requests: tuple[ApprovalRequest, ...]) -> ApprovalsGiven | RunInterrupted:
        given = await self._approvals.wait(requests, self._remaining(()))
        if given is None:  # the wait was cut short at the run's deadline
            return RunInterrupted(Cancelled() if self._cancelled else TimedOut(self._timeout()))
        return given

    async def _user_code(
        self, name: str, request: object, under: tuple[str, ...] | None, *, attempts: int | None = None
    ) -> dict[str, Any] | RunInterrupted | str:
        """Run a callback activity (hooks, guardrails, a handler, an opaque
        child) under the tool settings and the deadline of the sub-machine at
        ``under`` (None: no deadline): its result, the interruption, or why
        it failed for good."""
        settings = self._settings
        tries = attempts if attempts is not None else settings.tool_max_attempts
        try:
            return await self._activity(name, encode(request), under, settings.tool_timeout_s, tries)
        except ActivityError as error:
            return self._interruption(error, under or ()) or reason(error)

    async def _activity(
        self,
        name: str,
        payload: dict[str, Any],
        path: tuple[str, ...] | None,
        timeout_s: float,
        attempts: int,
    ) -> dict[str, Any]:
        """Schedule activity ``name``, under the deadline of the sub-machine
        at ``path`` (None: none)."""
        heartbeat = self._settings.heartbeat_timeout_s
        # No activity may outlive its sub-machine's deadline (the machine's).
        remaining = self._remaining(path) if path is not None else None
        data: dict[str, Any] = await workflow.execute_activity(
            name,
            payload,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=timeout_s),
            schedule_to_close_timeout=remaining,
            heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat is not None else None,
            retry_policy=RetryPolicy(maximum_attempts=attempts, non_retryable_error_types=NON_RETRYABLE),
        )
        return data

    def _address(self, path: tuple[str, ...], *, user: bool = True) -> Address:
        """Whom an activity at ``path`` works for; with ``user``, with the seed
        and the stored outputs that user code may read."""
        run = self._run
        fingerprint = self._description.fingerprint
        if not user:
            return Address(run.agent, self._run_id, fingerprint, path)
        stored = tuple(StoredOutput(key, text) for key, text in self._stored.items())
        return Address(run.agent, self._run_id, fingerprint, path, run.ctx_seed, stored)

    def _agent_at(self, path: tuple[str, ...]) -> str:
        tree = self._description.tree
        member = member_at(tree, path) if tree is not None else None
        return member.name if member is not None else self._description.spec.name

    def _tool_limit(self, path: tuple[str, ...]) -> int | None:
        tree = self._description.tree
        member = member_at(tree, path) if tree is not None else None
        spec = member.spec if member is not None else self._description.spec
        return spec.config.parallel_tool_call_limit if isinstance(spec, AgentSpec) else None

    def _remaining(self, path: tuple[str, ...]) -> timedelta | None:
        """How long the sub-machine at ``path`` has before its deadline (the
        earliest of its own and its parents', as the machine's state keeps
        them), from the latest clock reading; None: no deadline. This only
        cuts work short: whether the run is out of time is the machine's
        decision, from the reading taken when the work comes back."""
        limit = deadline_at(self._state, path)
        if limit is None or self._last is None or self._settings.clock:
            return None  # a worker's own clock (tests) is not the server's: nothing is cut short
        return max(timedelta(seconds=limit[0] - self._last), timedelta(milliseconds=1))

    def _timeout(self) -> float:
        timeout = getattr(self._state, "timeout", None)
        return float(timeout) if timeout is not None else 0.0

    def _interruption(self, error: ActivityError, path: tuple[str, ...]) -> RunInterrupted | None:
        """The interruption behind a failed activity, if any; a misconfigured
        worker fails the workflow."""
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type in NON_RETRYABLE:
            fail(cause.message, cause.type or CONFIG_ERROR)
        if isinstance(cause, ActivityCancelled):
            self._cancelled = True
            return RunInterrupted(Cancelled())
        return None  # a failure as data: past a deadline, the machine's reading ends the run


__all__ = [
    "NON_RETRYABLE",
    "ActivityPerformer",
    "Approvals",
    "RemoteModel",
    "decode_or_fail",
    "fail",
    "reason",
]
