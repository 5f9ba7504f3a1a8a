"""``TemporalAgentWorker``: the process that hosts agents for durable runs.

A worker registers agents by name — their models, tools, instructions and
settings stay in this process — and serves the agent-loop workflow and its
activities on one task queue. Its :class:`WorkerPosture` governs every tool
call it executes; a client can neither see nor change it.

Registration checks the v0 constraints and fails fast:

- only :class:`~helikon.LlmAgent` runs durably (workflow agents such as
  ``SequentialAgent`` are rejected);
- handoffs are rejected: the durable driver does not transfer a run to
  another agent;
- hooks and guardrails are rejected: arbitrary user code around the loop
  cannot be made deterministic inside a workflow;
- agent-as-tool (:class:`~helikon.AgentAsTool`) is allowed, but the nested
  run executes inside its ``invoke_tool`` activity, non-durably: a retry
  of that activity re-runs the whole nested run.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, final

from temporalio.client import Client
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from helikon.agent import LlmAgent
from helikon.errors import ConfigError
from helikon.temporal._activities import AgentActivities, CtxFactory, Registration
from helikon.temporal._posture import WorkerPosture
from helikon.temporal._wire import ActivitySettings, ToolAttempts
from helikon.temporal._workflow import AgentWorkflow
from helikon.trace import fingerprint

#: Agent attributes that carry user code the durable driver cannot run.
_UNSUPPORTED = ("hooks", "input_guardrails", "output_guardrails")

#: Third-party packages the pure core imports (lazily, too): shared with the sandbox.
_THIRD_PARTY = ("attr", "attrs", "cattrs", "msgspec", "returns", "anyio", "sniffio", "jsonschema")


def sandbox_passthrough() -> tuple[str, ...]:
    """The modules the workflow sandbox shares with the host rather than reloading.

    Every helikon module but the workflow's own package is passed through
    (the pure core is deterministic by construction and checked by the
    purity tool), so only :mod:`helikon.temporal._workflow` is reloaded per
    run and stays under the sandbox's restrictions.
    """
    package = str(Path(__file__).resolve().parents[1])  # helikon/, without importing the facade
    names = {f"helikon.{m.name}" for m in pkgutil.iter_modules([package]) if m.name != "temporal"}
    names.update(f"helikon.temporal.{m}" for m in ("_activities", "_posture", "_runner", "_wire", "_worker"))
    names.update(_THIRD_PARTY)
    return tuple(sorted(names))


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox the agent-loop workflow runs in (see :func:`sandbox_passthrough`)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*sandbox_passthrough())
    )


def replayer(**options: Any) -> Replayer:
    """A Temporal ``Replayer`` for helikon run histories, with the worker's sandbox.

    ``await replayer().replay_workflow(await handle.fetch_history())`` replays
    a run with the current code and fails on non-determinism; run it in CI
    against stored histories before deploying a change to the workflow.
    ``options`` go to ``Replayer``.
    """
    return Replayer(workflows=[AgentWorkflow], workflow_runner=workflow_runner(), **options)


def _seconds(value: timedelta, name: str) -> float:
    seconds = value.total_seconds()
    if seconds <= 0:
        raise ConfigError(f"{name} must be positive, got {value}")
    return seconds


def _attempts(value: int, name: str) -> int:
    if value < 1:
        raise ConfigError(f"{name} must be >= 1, got {value}")
    return value


@final
class TemporalAgentWorker:
    """Serves registered agents to durable runs on ``task_queue``.

    Args:
        client: a connected ``temporalio.client.Client``.
        task_queue: the queue runners start runs on.
        posture: the security posture of every tool call this worker runs.
        heartbeat_timeout: opt-in heartbeats: a ``call_model`` or
            ``invoke_tool`` attempt that stops heartbeating for this long is
            retried elsewhere (so a crashed worker's call is reclaimed in
            about this time rather than after the whole activity timeout).
            A tool that blocks the event loop stops heartbeating too.
        model_timeout: the longest one model turn may take (per attempt).
        tool_timeout: the longest one tool call may take (per attempt).
        instructions_timeout: the longest rendering instructions may take.
        model_max_attempts: attempts of a ``call_model`` activity. Model
            errors are never retried by Temporal (they are returned as data);
            only a lost worker or a timeout uses another attempt.
        tool_max_attempts: attempts of an ``invoke_tool`` activity (per-tool
            overrides at :meth:`register`). Tool errors are data and never
            retried; a crash mid-call is, so tools must be idempotent or be
            registered with one attempt.
        instructions_max_attempts: attempts of ``render_instructions``.
        graceful_shutdown_timeout: how long :meth:`shutdown` lets in-flight
            activities finish before cancelling them (they are then retried
            on another worker).
        max_cached_workflows: forwarded to the Temporal worker. ``0`` turns
            off sticky execution; use it with the time-skipping test server,
            which does not reassign a stopped worker's sticky queue.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        posture: WorkerPosture | None = None,
        heartbeat_timeout: timedelta | None = None,
        model_timeout: timedelta = timedelta(minutes=10),
        tool_timeout: timedelta = timedelta(minutes=10),
        instructions_timeout: timedelta = timedelta(minutes=1),
        model_max_attempts: int = 3,
        tool_max_attempts: int = 3,
        instructions_max_attempts: int = 3,
        graceful_shutdown_timeout: timedelta = timedelta(seconds=0),
        max_cached_workflows: int | None = None,
    ) -> None:
        if not task_queue:
            raise ConfigError("a worker needs a task queue")
        self._client = client
        self._task_queue = task_queue
        self._posture = posture or WorkerPosture()
        self._heartbeat = _seconds(heartbeat_timeout, "heartbeat_timeout") if heartbeat_timeout else None
        self._model_timeout = _seconds(model_timeout, "model_timeout")
        self._tool_timeout = _seconds(tool_timeout, "tool_timeout")
        self._instructions_timeout = _seconds(instructions_timeout, "instructions_timeout")
        self._model_attempts = _attempts(model_max_attempts, "model_max_attempts")
        self._tool_attempts = _attempts(tool_max_attempts, "tool_max_attempts")
        self._instructions_attempts = _attempts(instructions_max_attempts, "instructions_max_attempts")
        self._graceful = graceful_shutdown_timeout
        self._max_cached = max_cached_workflows
        self._agents: dict[str, Registration] = {}
        self._worker: Worker | None = None

    @property
    def task_queue(self) -> str:
        return self._task_queue

    @property
    def posture(self) -> WorkerPosture:
        return self._posture

    @property
    def agents(self) -> tuple[str, ...]:
        """The names of the registered agents, sorted."""
        return tuple(sorted(self._agents))

    def register(
        self,
        agent: LlmAgent[Any],
        *,
        ctx_factory: CtxFactory | None = None,
        tool_max_attempts: Mapping[str, int] | None = None,
    ) -> TemporalAgentWorker:
        """Serve ``agent`` under its name. Returns the worker, for chaining.

        Args:
            agent: an :class:`~helikon.LlmAgent` (see the v0 constraints).
            ctx_factory: builds the run's user ctx from the client's JSON
                ctx seed (``None`` when the client sent none), on the worker,
                for every activity that runs user code; it may be async. A
                seed it rejects (by raising) fails the run at once. Without
                a factory the user ctx is ``None`` and a seed is refused.
            tool_max_attempts: per-tool attempt limits (``{"charge": 1}``
                for a tool that must never run twice).

        Raises:
            ConfigError: the agent breaks a v0 constraint, its name is taken,
                or the worker is already running.
        """
        if self._worker is not None:
            raise ConfigError("register agents before the worker starts")
        _check_durable(agent)
        if agent.name in self._agents:
            raise ConfigError(f"an agent named {agent.name!r} is already registered on this worker")
        if ctx_factory is not None and not callable(ctx_factory):
            raise ConfigError(f"agent {agent.name!r}: ctx_factory must be callable")
        overrides: list[ToolAttempts] = []
        for tool, attempts in sorted((tool_max_attempts or {}).items()):
            if tool not in agent.tool_map:
                raise ConfigError(f"agent {agent.name!r} has no tool {tool!r} (in tool_max_attempts)")
            overrides.append(ToolAttempts(tool, _attempts(attempts, f"tool_max_attempts[{tool!r}]")))
        settings = ActivitySettings(
            model_timeout_s=self._model_timeout,
            tool_timeout_s=self._tool_timeout,
            instructions_timeout_s=self._instructions_timeout,
            heartbeat_timeout_s=self._heartbeat,
            model_max_attempts=self._model_attempts,
            tool_max_attempts=self._tool_attempts,
            instructions_max_attempts=self._instructions_attempts,
            tool_attempts=tuple(overrides),
        )
        self._agents[agent.name] = Registration(agent, fingerprint(agent.spec), settings, ctx_factory)
        return self

    def build(self) -> Worker:
        """The Temporal worker serving the workflow and the activities.

        :meth:`run` and ``async with`` build it for you; build it yourself to
        run it under your own supervision.
        """
        if self._worker is not None:
            return self._worker
        if not self._agents:
            raise ConfigError("register at least one agent before starting the worker")
        activities = AgentActivities(self._agents, self._posture, self._task_queue)
        options: dict[str, Any] = {}
        if self._max_cached is not None:
            options["max_cached_workflows"] = self._max_cached
        self._worker = Worker(
            self._client,
            task_queue=self._task_queue,
            workflows=[AgentWorkflow],
            activities=activities.all(),
            workflow_runner=workflow_runner(),
            graceful_shutdown_timeout=self._graceful,
            **options,
        )
        return self._worker

    async def run(self) -> None:
        """Serve until :meth:`shutdown` (or cancellation)."""
        await self.build().run()

    async def shutdown(self) -> None:
        """Stop polling; in-flight activities get ``graceful_shutdown_timeout``
        to finish, then are cancelled (and retried on another worker)."""
        if self._worker is not None:
            await self._worker.shutdown()

    async def __aenter__(self) -> TemporalAgentWorker:
        await self.build().__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._worker is not None:
            await self._worker.__aexit__(exc_type, exc, tb)


def _check_durable(agent: object) -> None:
    """Reject what the durable driver cannot run (the v0 constraints)."""
    if not isinstance(agent, LlmAgent):
        raise ConfigError(
            f"{type(agent).__name__} {getattr(agent, 'name', agent)!r} cannot run durably: only LlmAgent "
            "runs under Temporal in v0 (wrap a workflow agent with AgentAsTool in an LlmAgent's tools "
            "to run it, non-durably, inside one tool activity)"
        )
    if agent.handoffs:
        targets = ", ".join(repr(h.target_name) for h in agent.handoffs)
        raise ConfigError(
            f"agent {agent.name!r} has handoffs ({targets}): handoffs are not supported by the durable "
            "Temporal driver in v0 (use AgentAsTool, which runs the other agent inside a tool activity)"
        )
    for attribute in _UNSUPPORTED:
        if getattr(agent, attribute, None):
            raise ConfigError(
                f"agent {agent.name!r} has {attribute}: hooks and guardrails run arbitrary user code "
                "around the loop, which cannot be made deterministic inside a Temporal workflow (v0)"
            )


__all__ = ["TemporalAgentWorker", "replayer", "sandbox_passthrough", "workflow_runner"]
