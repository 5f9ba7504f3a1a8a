"""Durable runs on Temporal: the pure core inside a workflow.

A run that must survive a worker crash, or a multi-hour agent that must keep
its progress across restarts, runs as a Temporal workflow. The workflow
drives the same pure machine as every interpreter — the agent loop, or the
agent tree of a run with handoffs, hooks, workflow agents or a swarm — and
each piece of user code is an activity: a model turn (``call_model``), a
step of a tool call (``call_step``), hooks, guardrails, instructions, an
approval handler. After a crash Temporal's history replay puts the machine
back where it was and the run resumes from its last completed activity. A
run can wait in the workflow for a human's approval (``TemporalRun.approve``).

- :class:`TemporalRunner` (client side) starts runs, reads their events and
  answers their approvals.
- :class:`TemporalAgentWorker` hosts the agents — models, tools, settings —
  and serves the workflow and its activities under its :class:`WorkerPosture`.

Needs the ``temporal`` extra (``pip install 'paigasus-helikon[temporal]'``);
the rest of helikon never imports ``temporalio``. See ``docs/temporal.md``.
"""

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.temporal needs the Temporal SDK: pip install 'paigasus-helikon[temporal]'"
    ) from exc

from helikon.temporal._activities import AgentActivities, CtxFactory
from helikon.temporal._posture import WorkerPosture, redact_step
from helikon.temporal._runner import TemporalRun, TemporalRunner
from helikon.temporal._wire import (
    APPROVE_UPDATE,
    ASK_APPROVALS,
    CALL_MODEL,
    CALL_STEP,
    CHECK_GUARDRAILS,
    DESCRIBE_AGENT,
    EVENTS_QUERY,
    NOTIFY_HOOKS,
    PENDING_QUERY,
    RENDER_INSTRUCTIONS,
    RUN_AGENT,
    RUN_HOOKS,
    WIRE_VERSION,
    WORKFLOW_NAME,
    ActivitySettings,
    AgentDescription,
    ApprovalsPending,
    RunOutcome,
    RunRequest,
)
from helikon.temporal._worker import TemporalAgentWorker, replayer, sandbox_passthrough, workflow_runner
from helikon.temporal._workflow import AgentWorkflow

__all__ = [
    "APPROVE_UPDATE",
    "ASK_APPROVALS",
    "CALL_MODEL",
    "CALL_STEP",
    "CHECK_GUARDRAILS",
    "DESCRIBE_AGENT",
    "EVENTS_QUERY",
    "NOTIFY_HOOKS",
    "PENDING_QUERY",
    "RENDER_INSTRUCTIONS",
    "RUN_AGENT",
    "RUN_HOOKS",
    "WIRE_VERSION",
    "WORKFLOW_NAME",
    "ActivitySettings",
    "AgentActivities",
    "AgentDescription",
    "AgentWorkflow",
    "ApprovalsPending",
    "CtxFactory",
    "RunOutcome",
    "RunRequest",
    "TemporalAgentWorker",
    "TemporalRun",
    "TemporalRunner",
    "WorkerPosture",
    "redact_step",
    "replayer",
    "sandbox_passthrough",
    "workflow_runner",
]
