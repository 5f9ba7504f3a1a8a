"""Durable runs on Temporal: the pure core inside a workflow.

A run that must survive a worker crash, or a multi-hour agent that must keep
its progress across restarts, runs as a Temporal workflow. The workflow
drives the same pure :func:`helikon.loop.transition` as every interpreter;
each model turn is a ``call_model`` activity and each tool call an
``invoke_tool`` activity, so after a crash Temporal's history replay puts the
loop back where it was and the run resumes from its last completed activity.

- :class:`TemporalRunner` (client side) starts runs and reads their events.
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
    ASK_APPROVALS,
    CALL_MODEL,
    CALL_STEP,
    DESCRIBE_AGENT,
    EVENTS_QUERY,
    RENDER_INSTRUCTIONS,
    WIRE_VERSION,
    WORKFLOW_NAME,
    ActivitySettings,
    AgentDescription,
    RunOutcome,
    RunRequest,
)
from helikon.temporal._worker import TemporalAgentWorker, replayer, sandbox_passthrough, workflow_runner
from helikon.temporal._workflow import AgentWorkflow

__all__ = [
    "CALL_MODEL",
    "DESCRIBE_AGENT",
    "EVENTS_QUERY",
    "ASK_APPROVALS",
    "CALL_STEP",
    "RENDER_INSTRUCTIONS",
    "WIRE_VERSION",
    "WORKFLOW_NAME",
    "ActivitySettings",
    "AgentActivities",
    "AgentDescription",
    "AgentWorkflow",
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
