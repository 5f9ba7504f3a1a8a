"""Workflow agents as pure machines (sequential, parallel, loop, graph)."""

from helikon.agents._workflow import (
    Node,
    Running,
    WorkflowKind,
    WorkflowOutcome,
    WorkflowPhase,
    WorkflowSpec,
    WorkflowState,
    descendants,
    graph_errors,
    predecessors,
    resume_workflow,
    sinks,
    start_workflow,
    step_workflow,
)

__all__ = [
    "Node",
    "Running",
    "WorkflowKind",
    "WorkflowOutcome",
    "WorkflowPhase",
    "WorkflowSpec",
    "WorkflowState",
    "descendants",
    "graph_errors",
    "predecessors",
    "resume_workflow",
    "sinks",
    "start_workflow",
    "step_workflow",
]
