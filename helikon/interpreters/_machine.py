"""The pure machines an interpreter can drive, behind one small protocol.

An LLM agent's run is the agent loop (:mod:`helikon.loop`); a workflow's is
the workflow machine (:mod:`helikon.agents`). :func:`~helikon.interpreters.drive`
needs only ``begin`` and ``step`` from either.
"""

from __future__ import annotations

from typing import Protocol, final

import attrs
from returns.result import Result

from helikon.agents import (
    TreeOutcome,
    TreeSpec,
    TreeState,
    WorkflowOutcome,
    WorkflowSpec,
    WorkflowState,
    start_tree,
    start_workflow,
    step_tree,
    step_workflow,
)
from helikon.effects import Effect, EffectResult
from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.items import AgentInput, Item
from helikon.loop import AgentSpec, Outcome, RunState, start, transition


class OutcomeLike(Protocol):
    """What a step returns: the next state, events and effect."""

    @property
    def state(self) -> RunState | WorkflowState | TreeState: ...

    @property
    def events(self) -> tuple[AgentEvent, ...]: ...

    @property
    def effect(self) -> Effect: ...

    @property
    def appended(self) -> tuple[Item, ...]: ...


class Machine(Protocol):
    """A pure machine: where a run begins and how it steps."""

    def begin(
        self, input: AgentInput, run_id: RunId, depth: int, now: float | None = None
    ) -> OutcomeLike: ...

    def step(
        self, state: RunState | WorkflowState | TreeState, result: EffectResult, now: float | None = None
    ) -> Result[OutcomeLike, StepError]: ...

    @property
    def timed(self) -> bool:
        """Whether a part of the run keeps a deadline of its own (a tree
        member's timeout): then every result comes with a clock reading."""
        ...


@final
@attrs.frozen
class LoopMachine:
    """The agent loop of an LLM agent."""

    spec: AgentSpec

    timed = False

    def begin(self, input: AgentInput, run_id: RunId, depth: int, now: float | None = None) -> Outcome:
        return start(self.spec, input, run_id, depth)

    def step(
        self, state: RunState | WorkflowState | TreeState, result: EffectResult, now: float | None = None
    ) -> Result[Outcome, StepError]:
        if not isinstance(state, RunState):
            raise StepError("the agent loop was given a workflow state")
        return transition(state, result, self.spec)


@final
@attrs.frozen
class WorkflowMachine:
    """A workflow agent's machine."""

    spec: WorkflowSpec

    timed = False

    def begin(
        self, input: AgentInput, run_id: RunId, depth: int, now: float | None = None
    ) -> WorkflowOutcome:
        return start_workflow(self.spec, input.items, run_id, depth)

    def step(
        self, state: RunState | WorkflowState | TreeState, result: EffectResult, now: float | None = None
    ) -> Result[WorkflowOutcome, StepError]:
        if not isinstance(state, WorkflowState):
            raise StepError("a workflow was given an agent-loop state")
        return step_workflow(state, result, self.spec)


@final
@attrs.frozen
class TreeMachine:
    """An agent tree: handoffs and workflow children as addressed sub-machines."""

    spec: TreeSpec

    @property
    def timed(self) -> bool:
        return self.spec.timed

    def begin(self, input: AgentInput, run_id: RunId, depth: int, now: float | None = None) -> TreeOutcome:
        return start_tree(self.spec, input, run_id, depth, now)

    def step(
        self, state: RunState | WorkflowState | TreeState, result: EffectResult, now: float | None = None
    ) -> Result[TreeOutcome, StepError]:
        if not isinstance(state, TreeState):
            raise StepError("an agent tree was given a single machine's state")
        return step_tree(state, result, self.spec, now)


__all__ = ["LoopMachine", "Machine", "OutcomeLike", "TreeMachine", "WorkflowMachine"]
