"""``TemporalAgentWorker``: the process that hosts agents for durable runs.

A worker registers agents by name — their models, tools, instructions,
hooks, guardrails, handoff targets and workflow children stay in this
process — and serves the agent workflow and its activities on one task
queue. Its :class:`WorkerPosture` governs every tool call it executes; a
client can neither see nor change it.

Any helikon agent runs durably: an :class:`~helikon.LlmAgent` (with hooks,
guardrails and handoffs), a workflow agent (``SequentialAgent``,
``ParallelAgent``, ``LoopAgent``, ``GraphAgent``) or a ``SwarmAgent``; the
pure machine runs in the workflow and the user code as activities. What
does not run durably, only inside one activity: an agent of your own (an
object with ``run`` but no ``make_env``) as a workflow child or handoff
target (``run_agent``), and the nested run of an
:class:`~helikon.AgentAsTool` (``call_step``).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, final

from temporalio.client import Client
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from helikon.errors import ConfigError
from helikon.interpreters._children import resolve
from helikon.loop import AgentSpec, may_rerun
from helikon.temporal._activities import AgentActivities, CtxFactory, Registration
from helikon.temporal._posture import WorkerPosture
from helikon.temporal._wire import ActivitySettings, ToolAttempts
from helikon.temporal._workflow import AgentWorkflow

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
    # The workflow and its performer are reloaded, under the sandbox's restrictions.
    pure = ("_activities", "_paths", "_posture", "_runner", "_wire", "_worker")
    names.update(f"helikon.temporal.{m}" for m in pure)
    names.update(_THIRD_PARTY)
    return tuple(sorted(names))


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox the agent workflow runs in (see :func:`sandbox_passthrough`)."""
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
        heartbeat_timeout: opt-in heartbeats: an activity attempt that stops heartbeating for this long is
            retried elsewhere (so a crashed worker's call is reclaimed in
            about this time rather than after the whole activity timeout).
            A tool that blocks the event loop stops heartbeating too.
        model_timeout: the longest one model turn may take (per attempt).
        tool_timeout: the longest one tool call may take (per attempt); also
            a hook's, a guardrail's, an approval handler's and an opaque
            child agent's activity.
        instructions_timeout: the longest rendering instructions may take.
        model_max_attempts: attempts of a ``call_model`` activity. Model
            errors are never retried by Temporal (they are returned as data);
            only a lost worker or a timeout uses another attempt.
        tool_max_attempts: attempts of a ``call_step`` activity (per-tool
            overrides at :meth:`register`), and of the hooks', guardrails'
            and opaque children's activities. Tool errors are data and never
            retried. A lost attempt of a tool that may be re-run (declared
            idempotent, or read-only) is retried with the same call id; any
            other tool has one attempt, and a lost one is a call whose
            outcome is unknown, which the machine reconciles (its
            ``reconcile`` callback, else an error the model sees).
        instructions_max_attempts: attempts of ``render_instructions``.
        graceful_shutdown_timeout: how long :meth:`shutdown` lets in-flight
            activities finish before cancelling them (they are then retried
            on another worker).
        max_cached_workflows: forwarded to the Temporal worker. ``0`` turns
            off sticky execution; use it with the time-skipping test server,
            which does not reassign a stopped worker's sticky queue.
        clock: the clock the machine is told the time with (seconds), read
            on the worker through the ``read_clock`` activity, so its
            readings are in the workflow's history; by default the workflow's
            own ``workflow.now()``. For tests of time (scripted readings, as
            ``LiveInterpreter(clock=...)``); each reading is one activity.
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
        clock: Callable[[], float] | None = None,
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
        self._clock = clock
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
        agent: Any,
        *,
        ctx_factory: CtxFactory | None = None,
        tool_max_attempts: Mapping[str, int] | None = None,
    ) -> TemporalAgentWorker:
        """Serve ``agent`` under its name. Returns the worker, for chaining.

        Args:
            agent: any helikon agent: an :class:`~helikon.LlmAgent`, a
                workflow agent or a :class:`~helikon.SwarmAgent`.
            ctx_factory: builds the run's user ctx from the client's JSON
                ctx seed (``None`` when the client sent none), on the worker,
                for every activity that runs user code; it may be async. A
                seed it rejects (by raising) fails the run at once. Without
                a factory the user ctx is ``None`` and a seed is refused.
            tool_max_attempts: per-tool attempt limits, for a tool of that
                name in any agent the run reaches (a tool that may not be
                re-run has one attempt whatever is given).

        Raises:
            ConfigError: ``agent`` is not a helikon agent, its name is taken,
                a tool of ``tool_max_attempts`` is unknown, or the worker is
                already running.
        """
        if self._worker is not None:
            raise ConfigError("register agents before the worker starts")
        _check_durable(agent)
        if agent.name in self._agents:
            raise ConfigError(f"an agent named {agent.name!r} is already registered on this worker")
        if ctx_factory is not None and not callable(ctx_factory):
            raise ConfigError(f"agent {agent.name!r}: ctx_factory must be callable")
        known = _tools(agent)
        # A tool that may not be re-run gets one attempt: a lost attempt is a
        # call whose outcome is unknown, which the machine reconciles (Temporal
        # never runs it again). A re-runnable one is retried with its call id.
        limits = {tool: 1 for tool, rerun in known.items() if not rerun}
        for tool, attempts in sorted((tool_max_attempts or {}).items()):
            if tool not in known:
                raise ConfigError(f"agent {agent.name!r} has no tool {tool!r} (in tool_max_attempts)")
            limit = _attempts(attempts, f"tool_max_attempts[{tool!r}]")
            limits[tool] = min(limit, limits.get(tool, limit))
        overrides = [ToolAttempts(tool, limits[tool]) for tool in sorted(limits)]
        settings = ActivitySettings(
            model_timeout_s=self._model_timeout,
            tool_timeout_s=self._tool_timeout,
            instructions_timeout_s=self._instructions_timeout,
            heartbeat_timeout_s=self._heartbeat,
            model_max_attempts=self._model_attempts,
            tool_max_attempts=self._tool_attempts,
            instructions_max_attempts=self._instructions_attempts,
            tool_attempts=tuple(overrides),
            clock=self._clock is not None,
        )
        self._agents[agent.name] = Registration(agent, settings, ctx_factory)
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
        activities = AgentActivities(self._agents, self._posture, self._task_queue, self._clock)
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
    """Refuse what cannot run as a machine in a workflow: an agent of your own."""
    if getattr(agent, "make_env", None) is None or not isinstance(getattr(agent, "name", None), str):
        raise ConfigError(
            f"{type(agent).__name__} {getattr(agent, 'name', agent)!r} cannot run durably: register a "
            "helikon agent (an LlmAgent, a workflow agent or a SwarmAgent); an agent of your own runs, "
            "non-durably, as a workflow child or a handoff target (inside one run_agent activity)"
        )


def _tool_names(agent: Any) -> frozenset[str]:
    """The names of the tools of every agent ``agent`` can reach (its
    handoff targets, workflow children and swarm members, at any depth)."""
    return frozenset(_tools(agent))


def _tools(agent: Any) -> dict[str, bool]:
    """Every tool ``agent`` can reach, by name: whether it may be re-run
    (:func:`helikon.loop.may_rerun`: declared idempotent, or read-only)."""
    tools: dict[str, bool] = {}
    seen: set[int] = set()
    queue: list[Any] = [agent]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        spec = getattr(current, "spec", None)
        for name in getattr(current, "tool_map", {}):
            rerun = isinstance(spec, AgentSpec) and may_rerun(spec, name)
            tools[name] = tools.get(name, True) and rerun
        queue.extend(resolve(handoff) for handoff in getattr(current, "handoffs", ()))
        queue.extend(child for _, child in getattr(current, "children", ()))
        members = getattr(current, "members", None)
        if isinstance(members, Mapping):
            queue.extend(members.values())
    return tools


__all__ = ["TemporalAgentWorker", "replayer", "sandbox_passthrough", "workflow_runner"]
