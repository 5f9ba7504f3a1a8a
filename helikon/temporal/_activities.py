"""The activities: where a durable run meets models, tools and user code.

Each activity performs one effect of the pure machine with the live
interpreter's own performer (:meth:`LiveInterpreter.perform
<helikon.interpreters.LiveInterpreter.perform>`), so a model turn or a tool
call behaves exactly as in an ephemeral run: model errors and tool errors
come back as data (``ModelCallFailed``, ``ToolRaised``), never as a failed
activity. An activity fails only when the infrastructure does (a lost
worker, a timeout) — and that is what Temporal retries — or when the worker
is misconfigured for the run (``helikon.ConfigError``, never retried).

- ``describe_agent``: the agent's spec, fingerprint and activity settings,
  read once at the start of a run (and recorded in its history); it also
  checks the ctx seed, so a bad seed fails the run before any model call.
- ``call_model``: one model turn; returns the streamed model events.
- ``invoke_tool``: one tool call, through the live interpreter's governed
  pipeline under the worker's posture, redacted before it is returned (and
  so before it is recorded); returns the outcome with the pipeline's events.
- ``render_instructions``: the dynamic instructions of one turn.

Every activity fabricates a fresh :class:`~helikon.RunContext` from the
worker's posture and the user ctx the registered factory builds from the
seed (:meth:`WorkerPosture.run_context`), and the agent's own ``make_env``
turns it into the interpreter's world. Nothing of it survives the activity:
run-scoped ``ctx.state`` is not durable under Temporal.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, final

import attrs
from temporalio import activity
from temporalio.exceptions import ApplicationError

from helikon._json import JsonValue
from helikon.agent import LlmAgent
from helikon.effects import (
    ApprovalsGiven,
    CallModel,
    Effect,
    EffectResult,
    InstructionsRendered,
    RenderInstructions,
)
from helikon.events import AgentEvent, ReasoningDelta, TokenDelta, ToolCallDelta
from helikon.ids import RunId
from helikon.interpreters import RESULT_TYPES, LiveInterpreter, RunEnv
from helikon.interpreters._steps import ask_approval, perform_step
from helikon.temporal._posture import WorkerPosture, redact_step
from helikon.temporal._wire import (
    ASK_APPROVALS,
    CALL_MODEL,
    CALL_STEP,
    CONFIG_ERROR,
    DESCRIBE_AGENT,
    INSTRUCTIONS_ERROR,
    RENDER_INSTRUCTIONS,
    WIRE_ERROR,
    ActivitySettings,
    AgentDescription,
    ApprovalsRequest,
    CallModelRequest,
    DescribeAgent,
    ModelResult,
    RenderInstructionsRequest,
    StepDone,
    StepRequest,
    WireFormatError,
    decode,
    encode,
)

#: Live events a model call streams; the workflow makes them from the model events.
_DELTAS: Final = frozenset({TokenDelta, ReasoningDelta, ToolCallDelta})

#: Builds the per-run user ctx from the client's JSON seed (sync or async).
CtxFactory = Callable[[JsonValue], Any]


@final
@attrs.frozen
class Registration:
    """One agent as a worker serves it."""

    agent: LlmAgent[Any]
    fingerprint: str
    settings: ActivitySettings
    ctx_factory: CtxFactory | None = None


def config_error(message: str) -> ApplicationError:
    """A misconfiguration the run cannot recover from: never retried."""
    return ApplicationError(message, type=CONFIG_ERROR, non_retryable=True)


@final
class AgentActivities:
    """The activities of one worker, bound to its agents and posture.

    Args:
        agents: the registrations by agent name.
        posture: the worker's security posture.
        task_queue: named in errors.

    An activity scheduled with a heartbeat timeout (the worker's opt-in
    ``heartbeat_timeout``, recorded in the run's settings) heartbeats three
    times per timeout while a model streams or a tool runs.
    """

    def __init__(
        self,
        agents: Mapping[str, Registration],
        posture: WorkerPosture,
        task_queue: str,
    ) -> None:
        self._agents = dict(agents)
        self._posture = posture
        self._task_queue = task_queue

    def all(self) -> list[Callable[..., Any]]:
        """The activity callables to hand to a Temporal worker."""
        return [
            self.describe_agent,
            self.call_model,
            self.call_step,
            self.ask_approvals,
            self.render_instructions,
        ]

    # -- the activities --------------------------------------------------------------------

    @activity.defn(name=DESCRIBE_AGENT)
    async def describe_agent(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The agent's definition and settings; fails fast on a bad ctx seed."""
        request: DescribeAgent = _decode(payload, DescribeAgent)
        registration = self._registration(request.agent, None)
        user_ctx = await self._user_ctx(registration, request.ctx_seed)
        spec = self._env(registration, request.run_id, user_ctx).spec
        # The workflow enforces the agent's own timeout; the secrets stay on
        # the worker (the history records this description).
        spec = attrs.evolve(
            spec,
            config=registration.agent.spec.config,
            governance=attrs.evolve(spec.governance, secrets=()),
        )
        description = AgentDescription(spec, registration.fingerprint, registration.settings)
        return encode(description)

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One model turn: every model event, or the failure, as data."""
        request: CallModelRequest = _decode(payload, CallModelRequest)
        registration = self._registration(request.agent, request.fingerprint)
        env = self._env(registration, request.run_id, None)
        _, result = await self._perform(CallModel(request.request, request.turn), env)
        return encode(result, ModelResult)

    @activity.defn(name=CALL_STEP)
    async def call_step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One step of a tool call's pipeline (a hook, the policy or the tool),
        its result scrubbed of the worker's secrets; errors as data."""
        request: StepRequest = _decode(payload, StepRequest)
        registration = self._registration(request.agent, request.fingerprint)
        user_ctx = await self._user_ctx(registration, request.ctx_seed)
        env = self._env(registration, request.run_id, user_ctx)
        async with _heartbeats(_heartbeat_interval()):
            result = await perform_step(request.step, env)
        if self._posture.redaction:
            result = redact_step(result, env.secrets)
        return encode(StepDone(result))

    @activity.defn(name=ASK_APPROVALS)
    async def ask_approvals(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The worker's approval handler's answers to the run's questions."""
        request: ApprovalsRequest = _decode(payload, ApprovalsRequest)
        registration = self._registration(request.agent, request.fingerprint)
        user_ctx = await self._user_ctx(registration, request.ctx_seed)
        env = self._env(registration, request.run_id, user_ctx)
        decisions = await asyncio.gather(*(ask_approval(r, env) for r in request.requests))
        return encode(ApprovalsGiven(tuple(decisions)))

    @activity.defn(name=RENDER_INSTRUCTIONS)
    async def render_instructions(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The agent's dynamic instructions for one turn."""
        request: RenderInstructionsRequest = _decode(payload, RenderInstructionsRequest)
        registration = self._registration(request.agent, request.fingerprint)
        user_ctx = await self._user_ctx(registration, request.ctx_seed)
        env = self._env(registration, request.run_id, user_ctx)
        try:
            _, result = await self._perform(RenderInstructions(request.turn), env)
        except Exception as exc:  # user code: retried under the instructions retry policy
            message = f"the instructions of agent {request.agent!r} raised {type(exc).__name__}: {exc}"
            raise ApplicationError(message, type=INSTRUCTIONS_ERROR) from None
        if type(result) is not InstructionsRendered:
            raise ApplicationError(
                f"rendering instructions gave {type(result).__name__}", type=INSTRUCTIONS_ERROR
            )
        return encode(result)

    # -- helpers -------------------------------------------------------------------------------

    def _registration(self, name: str, fingerprint: str | None) -> Registration:
        registration = self._agents.get(name)
        if registration is None:
            known = ", ".join(repr(n) for n in sorted(self._agents)) or "none"
            raise config_error(
                f"no agent named {name!r} is registered on the worker of task queue "
                f"{self._task_queue!r} (registered: {known})"
            )
        if fingerprint is not None and fingerprint != registration.fingerprint:
            raise config_error(
                f"agent {name!r} on this worker is not the definition the run started with "
                f"({registration.fingerprint} != {fingerprint}); a run resumes only with the same "
                "instructions, tools, model and output schema"
            )
        return registration

    async def _user_ctx(self, registration: Registration, seed: JsonValue) -> Any:
        name = registration.agent.name
        factory = registration.ctx_factory
        if factory is None:
            if seed is not None:
                raise config_error(
                    f"agent {name!r} takes no ctx seed on this worker: register it with a ctx_factory"
                )
            return None
        try:
            user_ctx = factory(seed)
            if inspect.isawaitable(user_ctx):
                user_ctx = await user_ctx
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            message = f"the ctx seed for agent {name!r} was rejected by its ctx factory: {reason}"
            raise config_error(message) from None
        return user_ctx

    def _env(self, registration: Registration, run_id: RunId, user_ctx: Any) -> RunEnv:
        # The agent's own make_env, under the worker's posture; without the
        # run's timeout, which the workflow enforces across activities.
        agent = registration.agent
        config = attrs.evolve(agent.spec.config, timeout=None)
        ctx = self._posture.run_context(user_ctx)
        return agent.make_env(ctx, LiveInterpreter(run_id), run_id=run_id, config=config)

    async def _perform(self, effect: Effect, env: RunEnv) -> tuple[tuple[AgentEvent, ...], EffectResult]:
        """Perform ``effect`` with the live interpreter, heartbeating as it goes:
        the events it emitted (model deltas are dropped: the workflow remakes
        them from the model events) and its result."""
        events: list[AgentEvent] = []
        result: EffectResult | None = None
        every = _heartbeat_interval()
        async with _heartbeats(every):
            async for item in LiveInterpreter(env.run_id).perform(effect, env):
                if type(item) in RESULT_TYPES:
                    result = item  # type: ignore[assignment]
                    continue
                if every is not None:
                    activity.heartbeat()  # something happened: progress (the SDK throttles)
                if type(item) not in _DELTAS:
                    events.append(item)  # type: ignore[arg-type]
        if result is None:
            raise ApplicationError(f"{type(effect).__name__} was performed without a result")
        return tuple(events), result


def _heartbeat_interval() -> float | None:
    """Seconds between heartbeats for the running activity (None: it has no heartbeat timeout)."""
    timeout = activity.info().heartbeat_timeout
    return timeout.total_seconds() / 3 if timeout else None


@contextlib.asynccontextmanager
async def _heartbeats(every: float | None) -> AsyncIterator[None]:
    """Heartbeat every ``every`` seconds while the body runs.

    A tool that blocks the event loop starves this task too, so its
    heartbeat times out and Temporal retries the call elsewhere: offload
    blocking work (``anyio.to_thread.run_sync``).
    """
    if every is None:
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _decode(payload: object, as_type: Any) -> Any:
    try:
        return decode(payload, as_type)
    except WireFormatError as exc:
        raise ApplicationError(str(exc), type=WIRE_ERROR, non_retryable=True) from None


__all__ = ["AgentActivities", "CtxFactory", "Registration", "config_error"]
