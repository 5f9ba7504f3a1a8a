"""The agent loop's states.

A run's state is a :class:`RunState`: the phase it is in (one of the
:data:`LoopState` classes, named after the book's phases), the conversation
so far, the usage so far, and the few counters the rules need. Everything is
frozen; every step returns a new state. Phases are data only, so a state can
be dumped at any effect boundary and resumed elsewhere.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from helikon._conversation import EMPTY, Conversation, as_conversation
from helikon.errors import AgentError
from helikon.ids import RunId
from helikon.items import Item
from helikon.loop._calls import ToolCallState
from helikon.model import Usage


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class CallingModel:
    """About to call the model for ``turn``.

    ``rendered`` is False while dynamic instructions are being rendered.
    """

    turn: int
    rendered: bool = True


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class ExecutingTools:
    """The model asked for ``calls`` on ``turn``; their pipelines are running.

    Each :class:`~helikon.loop.ToolCallState` says where its call is (a call
    the loop rejected itself, an unknown tool or invalid arguments, is settled
    from the start). ``invalid_args`` says whether any call of the round had
    invalid arguments.
    """

    turn: int
    calls: tuple[ToolCallState, ...]
    invalid_args: bool = False


@attrs.frozen
class ApplyingHandoff:
    """Delegating to agent ``target`` with the transcript so far."""

    target: str
    transcript: tuple[Item, ...]


@attrs.frozen
class Finalizing:
    """A constrained turn asking the model for the output type's JSON."""

    turn: int


@attrs.frozen
class RepairingOutput:
    """The one repair turn after the final answer failed validation."""

    turn: int


@attrs.frozen
class NeedsApproval:
    """Tool calls of ``turn`` wait for a human's approval.

    ``calls`` are as in :class:`ExecutingTools`: every call is settled or
    waits at its pipeline's "ask" step. The pending effect asks the approval
    handler, or suspends the run until the answers are given.
    """

    turn: int
    calls: tuple[ToolCallState, ...]
    invalid_args: bool = False


@attrs.frozen
class CheckingInput:
    """The input guardrails are checking the user's text."""


@attrs.frozen
class StartingTurn:
    """The turn-start hooks run before model turn ``turn`` (then ``next``)."""

    turn: int
    next: CallingModel | Finalizing | RepairingOutput


@attrs.frozen
class CheckingOutput:
    """The output guardrails are checking the final answer ``output``."""

    output: str


@attrs.frozen
class Compacting:
    """Compacting the conversation (driven by compacting sessions)."""

    turn: int


@attrs.frozen
class Done:
    """Terminal success; ``output`` is the final answer's text."""

    output: str


@attrs.frozen
class Failed:
    """Terminal failure."""

    error: AgentError


#: The phase a run is in.
LoopState: TypeAlias = (
    CallingModel
    | CheckingInput
    | StartingTurn
    | CheckingOutput
    | ExecutingTools
    | ApplyingHandoff
    | Finalizing
    | RepairingOutput
    | NeedsApproval
    | Compacting
    | Done
    | Failed
)

#: The terminal phases.
TERMINAL = (Done, Failed)


@attrs.frozen(slots=False)  # a dict class: :func:`~helikon.loop._turns.evolve` copies its fields at once
class RunState:
    """Everything the loop knows about a run, between two steps.

    Args:
        run_id: the run's id, given by the interpreter at start.
        agent: the name of the agent running.
        phase: the phase the run is in.
        conversation: every item so far, input included, in order (a
            :class:`~helikon.loop.Conversation`, shared with the states
            before it; any sequence of items given is made one).
        usage: token usage summed over every model call so far.
        instructions: the system instructions of the current turn.
        strikes: consecutive tool rounds with invalid arguments so far.
        depth: how deeply this run is nested in handoffs and sub-agents.
        definition: the fingerprint of the agent definition the run was
            started with through the step API (see :mod:`helikon.steps`),
            so a saved state is not resumed by another definition; empty
            when unknown (then nothing is checked).
        deadline: the clock reading at which the run is out of time (see
            :mod:`helikon.loop._clock`); None without a timeout or a clock.
        timeout: the seconds of the timeout that set ``deadline``.
    """

    run_id: RunId
    agent: str
    phase: LoopState
    conversation: Conversation = attrs.field(default=EMPTY, converter=as_conversation)
    usage: Usage = Usage()
    instructions: str | None = None
    strikes: int = 0
    depth: int = 0
    definition: str = ""
    deadline: float | None = None
    timeout: float | None = None

    @property
    def terminal(self) -> bool:
        """Whether the run is over."""
        return isinstance(self.phase, TERMINAL)


__all__ = [
    "CheckingInput",
    "CheckingOutput",
    "StartingTurn",
    "TERMINAL",
    "ApplyingHandoff",
    "CallingModel",
    "Compacting",
    "Done",
    "ExecutingTools",
    "Failed",
    "Finalizing",
    "LoopState",
    "NeedsApproval",
    "RepairingOutput",
    "RunState",
]
