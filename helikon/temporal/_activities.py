"""The activities: where a durable run meets models, tools and user code.

Each activity performs one effect of the pure machine with the live
interpreter's own performers, so a model turn, a tool call, a hook or a
guardrail behaves exactly as in an ephemeral run: model errors and tool
errors come back as data (``ModelCallFailed``, ``ToolRaised``), never as a
failed activity. An activity fails only when the infrastructure does (a
lost worker, a timeout) — and that is what Temporal retries — or when the
worker is misconfigured for the run (``helikon.ConfigError``, never retried).

- ``describe_agent``: the agent's spec — and, for an agent tree, every agent
  it can reach (:func:`helikon.interpreters.compose`) — its fingerprint and
  the activity settings, read once at the start of a run (and recorded in
  its history), without any secret value; it also checks the ctx seed, so a
  bad seed fails the run before any model call.
- ``call_model``: one model turn; returns the streamed model events.
- ``call_step``: one step of a tool call's pipeline (a hook, the policy, the
  tool), redacted before it is returned (and so before it is recorded).
- ``ask_approvals``, ``render_instructions``, ``run_hooks``,
  ``check_guardrails``, ``notify_hooks``: the approval handler, the dynamic
  instructions, the turn-start hooks, the guardrails, the observing hooks.
- ``run_agent``: a child agent that is not a helikon machine, run whole
  (non-durably) with the live interpreter; returns its forwarded events.

Every request names the sub-machine it is for by its *path* in the agent
tree; the worker resolves that sub-machine's environment the way the live
interpreter does, with :func:`~helikon.interpreters.env_at` over the
composed environment of the registered agent. Every activity fabricates a
fresh :class:`~helikon.RunContext` from the worker's posture and the user
ctx the registered factory builds from the seed
(:meth:`WorkerPosture.run_context`), with the outputs the run stored so far
in ``ctx.state``. Nothing else of it survives the activity: what user code
writes to ``ctx.state`` is not durable under Temporal.
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
from helikon.agent import environment
from helikon.agents import Member, TreeSpec
from helikon.config import RunConfig
from helikon.context import Actions
from helikon.effects import (
    AgentsRan,
    ApprovalsGiven,
    CallModel,
    CheckGuardrails,
    Effect,
    EffectResult,
    GuardrailsChecked,
    HooksNotified,
    HooksRan,
    InstructionsFailed,
    InstructionsRendered,
    NotifyHooks,
    RenderInstructions,
    RunAgents,
    RunHooks,
)
from helikon.errors import ConfigError
from helikon.events import AgentEvent, ReasoningDelta, TokenDelta, ToolCallDelta
from helikon.interpreters import RESULT_TYPES, LiveInterpreter, RunEnv
from helikon.interpreters._machine import TreeMachine
from helikon.interpreters._steps import ask_approval, perform_step
from helikon.interpreters._tree_env import env_at
from helikon.loop import AgentSpec
from helikon.temporal._paths import member_paths
from helikon.temporal._posture import WorkerPosture, redact_step
from helikon.temporal._wire import (
    ASK_APPROVALS,
    CALL_MODEL,
    CALL_STEP,
    CHECK_GUARDRAILS,
    CONFIG_ERROR,
    DESCRIBE_AGENT,
    INSTRUCTIONS_ERROR,
    NOTIFY_HOOKS,
    READ_CLOCK,
    RENDER_INSTRUCTIONS,
    RUN_AGENT,
    RUN_HOOKS,
    WIRE_ERROR,
    ActivitySettings,
    Address,
    AgentDescription,
    AgentRan,
    AgentRunRequest,
    ApprovalsRequest,
    CallModelRequest,
    DescribeAgent,
    GuardrailsRequest,
    HooksRequest,
    MemberTimeout,
    ModelResult,
    NotifyRequest,
    RenderInstructionsRequest,
    StepDone,
    StepRequest,
    WireFormatError,
    decode,
    encode,
)
from helikon.trace import fingerprint

#: Live events a model call streams; the workflow makes them from the model events.
_DELTAS: Final = frozenset({TokenDelta, ReasoningDelta, ToolCallDelta})

#: Builds the per-run user ctx from the client's JSON seed (sync or async).
CtxFactory = Callable[[JsonValue], Any]


@final
@attrs.frozen
class Registration:
    """One agent as a worker serves it: any helikon agent (an ``LlmAgent``,
    a workflow agent, a swarm)."""

    agent: Any
    settings: ActivitySettings
    ctx_factory: CtxFactory | None = None


@final
@attrs.frozen
class Described:
    """A registered agent as data, as ``describe_agent`` answers it (see
    :class:`~helikon.temporal.AgentDescription`), and the run config its
    activities run under (without the timeout: the workflow enforces it)."""

    spec: AgentSpec
    tree: TreeSpec | None
    fingerprint: str
    timeouts: tuple[MemberTimeout, ...]
    config: RunConfig

    def description(self, settings: ActivitySettings) -> AgentDescription:
        return AgentDescription(self.spec, self.fingerprint, settings, self.tree, self.timeouts)


def config_error(message: str) -> ApplicationError:
    """A misconfiguration the run cannot recover from: never retried."""
    return ApplicationError(message, type=CONFIG_ERROR, non_retryable=True)


def _without_secrets(spec: AgentSpec) -> AgentSpec:
    return attrs.evolve(spec, governance=attrs.evolve(spec.governance, secrets=()))


def _tree_without_secrets(tree: TreeSpec) -> TreeSpec:
    members = tuple(
        attrs.evolve(m, spec=_without_secrets(m.spec)) if isinstance(m.spec, AgentSpec) else m
        for m in tree.members
    )
    return attrs.evolve(tree, members=members)


def describe(agent: Any, posture: WorkerPosture) -> Described:
    """``agent`` as data under ``posture``: its spec, its tree (when it runs
    as one), their fingerprint and every agent's own timeout. Call it from
    async code (a timeout's deadline reads the event loop's clock)."""
    interpreter = LiveInterpreter("describe")
    env = environment(agent, posture.run_context(None), interpreter, run_id="describe")
    spec = _without_secrets(env.spec)
    tree: TreeSpec | None = None
    timeouts: list[MemberTimeout] = []
    if isinstance(env.machine, TreeMachine):
        tree = _tree_without_secrets(env.machine.spec)
        for name, path in member_paths(tree):
            member: Member | None = tree.member(name)
            if not path or member is None or member.spec is None:
                continue  # the root's timeout is its spec's; an opaque child has none of its own
            own = env_at(env, path, interpreter).spec.config.timeout
            if own is not None:
                timeouts.append(MemberTimeout(name, own))
    config = attrs.evolve(env.spec.config, timeout=None)
    return Described(spec, tree, fingerprint(spec, tree), tuple(timeouts), config)


@final
class AgentActivities:
    """The activities of one worker, bound to its agents and posture.

    Args:
        agents: the registrations by agent name.
        posture: the worker's security posture.
        task_queue: named in errors.

    An activity scheduled with a heartbeat timeout (the worker's opt-in
    ``heartbeat_timeout``, recorded in the run's settings) heartbeats three
    times per timeout while it runs.
    """

    def __init__(
        self,
        agents: Mapping[str, Registration],
        posture: WorkerPosture,
        task_queue: str,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._agents = dict(agents)
        self._posture = posture
        self._task_queue = task_queue
        self._clock = clock
        self._described: dict[str, Described] = {}

    def all(self) -> list[Callable[..., Any]]:
        """The activity callables to hand to a Temporal worker."""
        return [
            self.describe_agent,
            self.call_model,
            self.call_step,
            self.ask_approvals,
            self.render_instructions,
            self.run_hooks,
            self.check_guardrails,
            self.notify_hooks,
            self.run_agent,
            *([self.read_clock] if self._clock is not None else []),
        ]

    # -- the activities --------------------------------------------------------------------

    @activity.defn(name=DESCRIBE_AGENT)
    async def describe_agent(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The agent's definition and settings; fails fast on a bad ctx seed."""
        request: DescribeAgent = _decode(payload, DescribeAgent)
        registration = self._registration(request.agent)
        await self._user_ctx(registration, request.ctx_seed)
        return encode(self._describe(registration).description(registration.settings))

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One model turn: every model event, or the failure, as data."""
        request: CallModelRequest = _decode(payload, CallModelRequest)
        env = await self._env(request.at, with_user_ctx=False)
        _, result = await self._perform(CallModel(request.request, request.turn), env)
        return encode(result, ModelResult)

    @activity.defn(name=CALL_STEP)
    async def call_step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One step of a tool call's pipeline (a hook, the policy or the tool),
        its result scrubbed of the worker's secrets; errors as data."""
        request: StepRequest = _decode(payload, StepRequest)
        env = await self._env(request.at)
        actions = Actions()  # this step's signals: escalation is the machine's state
        async with _heartbeats(_heartbeat_interval()):
            result = await perform_step(request.step, env, actions)
        if self._posture.redaction:
            result = redact_step(result, env.secrets)
        return encode(StepDone(result, actions.escalated))

    @activity.defn(name=ASK_APPROVALS)
    async def ask_approvals(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The worker's approval handler's answers to the run's questions."""
        request: ApprovalsRequest = _decode(payload, ApprovalsRequest)
        env = await self._env(request.at)
        decisions = await asyncio.gather(*(ask_approval(r, env) for r in request.requests))
        return encode(ApprovalsGiven(tuple(decisions)))

    @activity.defn(name=RENDER_INSTRUCTIONS)
    async def render_instructions(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The agent's dynamic instructions for one turn."""
        request: RenderInstructionsRequest = _decode(payload, RenderInstructionsRequest)
        env = await self._env(request.at)
        _, result = await self._perform(RenderInstructions(request.turn), env)
        if type(result) is InstructionsFailed:  # retried under the instructions retry policy
            raise ApplicationError(result.message, type=INSTRUCTIONS_ERROR)
        return encode(_expect(result, InstructionsRendered))

    @activity.defn(name=RUN_HOOKS)
    async def run_hooks(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The turn-start hooks of one turn, folded (a hook that raises fails
        the attempt; one that keeps failing denies the turn)."""
        request: HooksRequest = _decode(payload, HooksRequest)
        env = await self._env(request.at)
        _, result = await self._perform(RunHooks(request.turn), env)
        return encode(_expect(result, HooksRan))

    @activity.defn(name=CHECK_GUARDRAILS)
    async def check_guardrails(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The input or output guardrails, folded (an error trips, as in an ephemeral run)."""
        request: GuardrailsRequest = _decode(payload, GuardrailsRequest)
        env = await self._env(request.at)
        _, result = await self._perform(CheckGuardrails(request.stage, request.text), env)
        return encode(_expect(result, GuardrailsChecked))

    @activity.defn(name=NOTIFY_HOOKS)
    async def notify_hooks(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The hooks that only observe (their decisions and errors are ignored)."""
        request: NotifyRequest = _decode(payload, NotifyRequest)
        env = await self._env(request.at)
        _, result = await self._perform(NotifyHooks(request.event), env)
        return encode(_expect(result, HooksNotified))

    @activity.defn(name=RUN_AGENT)
    async def run_agent(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A child agent that is not a helikon machine, run whole from its
        parent's environment: its forwarded events and its result."""
        request: AgentRunRequest = _decode(payload, AgentRunRequest)
        env = await self._env(request.at, parent=True)
        events, result = await self._perform(RunAgents((request.run,), request.depth), env, deltas=True)
        return encode(AgentRan(events, _expect(result, AgentsRan)))

    @activity.defn(name=READ_CLOCK)
    async def read_clock(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A reading of the worker's clock, for the machine (recorded in the
        history, so a replayed workflow is told the same time)."""
        if self._clock is None:
            raise config_error("this worker was given no clock")
        return {"now": float(self._clock())}

    # -- helpers -------------------------------------------------------------------------------

    def _registration(self, name: str) -> Registration:
        registration = self._agents.get(name)
        if registration is None:
            known = ", ".join(repr(n) for n in sorted(self._agents)) or "none"
            raise config_error(
                f"no agent named {name!r} is registered on the worker of task queue "
                f"{self._task_queue!r} (registered: {known})"
            )
        return registration

    def _describe(self, registration: Registration) -> Described:
        name = registration.agent.name
        described = self._described.get(name)
        if described is None:
            try:
                described = describe(registration.agent, self._posture)
            except ConfigError as exc:
                raise config_error(f"agent {name!r} cannot run: {exc}") from None
            self._described[name] = described
        return described

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

    async def _env(self, at: Address, *, with_user_ctx: bool = True, parent: bool = False) -> RunEnv:
        """The environment of the sub-machine at ``at.path`` (of its parent
        with ``parent``): the agent's own ``make_env``, composed, under the
        worker's posture, with the run's stored outputs in ``ctx.state``."""
        registration = self._registration(at.agent)
        described = self._describe(registration)
        known = described.fingerprint
        if at.fingerprint != known:
            raise config_error(
                f"agent {at.agent!r} on this worker is not the definition the run started with "
                f"({known} != {at.fingerprint}); a run resumes only with the same agents, "
                "instructions, tools, models, output schemas and governance"
            )
        user_ctx = await self._user_ctx(registration, at.ctx_seed) if with_user_ctx else None
        ctx = self._posture.run_context(user_ctx)
        for stored in at.state:
            ctx.state[stored.key] = stored.text
        interpreter = LiveInterpreter(at.run_id)
        root = environment(registration.agent, ctx, interpreter, run_id=at.run_id, config=described.config)
        path = at.path[:-1] if parent else at.path
        try:
            return env_at(root, path, interpreter)
        except ConfigError as exc:
            raise config_error(str(exc)) from None

    async def _perform(
        self, effect: Effect, env: RunEnv, *, deltas: bool = False
    ) -> tuple[tuple[AgentEvent, ...], EffectResult]:
        """Perform ``effect`` with the live interpreter, heartbeating as it goes:
        the events it emitted (a model's deltas are dropped unless ``deltas``:
        the workflow remakes them from the model events) and its result."""
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
                if deltas or type(item) not in _DELTAS:
                    events.append(item)  # type: ignore[arg-type]
        if result is None:
            raise ApplicationError(f"{type(effect).__name__} was performed without a result")
        return tuple(events), result


def _expect(result: EffectResult, kind: type[Any]) -> Any:
    """``result`` if it is a ``kind`` (else the effect was interrupted, or an
    interpreter bug: the attempt fails)."""
    if type(result) is not kind:
        raise ApplicationError(f"expected {kind.__name__}, the interpreter gave {type(result).__name__}")
    return result


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


__all__ = ["AgentActivities", "CtxFactory", "Described", "Registration", "config_error", "describe"]
