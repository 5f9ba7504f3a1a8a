"""What crosses the Temporal boundary: the workflow's and activities' payloads.

Everything here is a frozen attrs carrier, data only, and imports nothing
from ``temporalio``. At the boundary each carrier travels as the plain
JSON-compatible data :func:`helikon.codec.unstructure` makes of it (a
``dict``), which Temporal's *default* data converter stores as readable JSON
(``json/plain``). So any Temporal client can start and inspect a run, the
history shows the conversation as JSON (not a base64 blob, not a string of
escaped JSON), and helikon's one converter — not a second one configured on
the client — decides the shape of every value. :func:`decode` rebuilds the
carrier with cattrs' validation on the way in.

Histories outlive code (hence Temporal's ``workflow.patched()``):
:data:`WIRE_VERSION` names the shape of these payloads and is checked when a
run starts; changing a carrier's shape bumps it.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import attrs

from helikon import codec
from helikon._json import JsonValue
from helikon.agents import TreeSpec
from helikon.effects import (
    AgentRun,
    AgentsRan,
    ApprovalRequest,
    CallStep,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    StepResult,
)
from helikon.events import AgentEvent
from helikon.governance import OnHandoff, OnRunComplete, OnSubagentStop
from helikon.ids import RunId
from helikon.items import Item
from helikon.loop import AgentSpec
from helikon.model import ModelRequest

#: The shape of the payloads below; checked by the workflow when a run starts.
WIRE_VERSION: Final = 3

#: The workflow type every helikon run executes as.
WORKFLOW_NAME: Final = "helikon.AgentRun"
#: The activity that reads an agent's definition and settings off the worker.
DESCRIBE_AGENT: Final = "describe_agent"
#: One model turn.
CALL_MODEL: Final = "call_model"
#: One step of a tool call's pipeline: a hook, the policy, or the tool.
CALL_STEP: Final = "call_step"
#: Questions for the worker's approval handler.
ASK_APPROVALS: Final = "ask_approvals"
#: The agent's dynamic instructions for one turn.
RENDER_INSTRUCTIONS: Final = "render_instructions"
#: The turn-start hooks (OnRunStart, OnTurnStart) of one turn.
RUN_HOOKS: Final = "run_hooks"
#: The input or output guardrails of one run.
CHECK_GUARDRAILS: Final = "check_guardrails"
#: The hooks that only observe (OnHandoff, OnSubagentStop, OnRunComplete).
NOTIFY_HOOKS: Final = "notify_hooks"
#: A child agent that is not a helikon machine, run whole.
RUN_AGENT: Final = "run_agent"
#: A reading of the worker's own clock (a worker given ``clock``).
READ_CLOCK: Final = "read_clock"
#: The query that returns a running workflow's events so far.
EVENTS_QUERY: Final = "helikon.events"
#: The query that returns the approvals a run waits for.
PENDING_QUERY: Final = "helikon.pending"
#: The update that answers them (an :class:`~helikon.effects.ApprovalsGiven`).
APPROVE_UPDATE: Final = "helikon.approve"

#: ``ApplicationError.type`` of a misconfiguration found on the worker (unknown
#: agent, a changed definition, a rejected ctx seed). Never retried; the
#: runner raises :class:`~helikon.errors.ConfigError` for it.
CONFIG_ERROR: Final = "helikon.ConfigError"
#: ``ApplicationError.type`` of a run whose ``describe_agent`` kept failing.
START_ERROR: Final = "helikon.StartFailed"
#: ``ApplicationError.type`` of a payload the other side could not decode.
WIRE_ERROR: Final = "helikon.WireError"
#: ``ApplicationError.type`` of an interpreter bug (a ``StepError`` from the core).
STEP_ERROR: Final = "helikon.StepError"
#: ``ApplicationError.type`` of decisions that do not answer the pending approvals.
APPROVAL_ERROR: Final = "helikon.ApprovalRefused"
#: ``ApplicationError.type`` of a dynamic-instructions function that raised.
INSTRUCTIONS_ERROR: Final = "helikon.InstructionsFailed"

#: The answer of a ``call_model`` activity.
ModelResult: TypeAlias = ModelResponded | ModelCallFailed | RunInterrupted


@attrs.frozen
class RunRequest:
    """The workflow's input: run agent ``agent`` on ``input``.

    Args:
        agent: the name the agent is registered under on the worker.
        input: the items that start the run.
        ctx_seed: request-scoped caller data for the worker's ctx factory
            (JSON; never posture).
        version: :data:`WIRE_VERSION` of the client that started the run.
    """

    agent: str
    input: tuple[Item, ...]
    ctx_seed: JsonValue = None
    version: int = WIRE_VERSION


@attrs.frozen
class ToolAttempts:
    """Tool ``tool`` may be attempted at most ``max_attempts`` times."""

    tool: str
    max_attempts: int


@attrs.frozen
class ActivitySettings:
    """How the workflow schedules an agent's activities (the worker's choice).

    Seconds rather than ``timedelta`` so the value is plain data. ``None``
    for ``heartbeat_timeout_s`` means heartbeats are off.
    """

    model_timeout_s: float
    tool_timeout_s: float
    instructions_timeout_s: float
    heartbeat_timeout_s: float | None
    model_max_attempts: int
    tool_max_attempts: int
    instructions_max_attempts: int
    tool_attempts: tuple[ToolAttempts, ...] = ()
    #: The machine's clock readings come from the worker's ``clock`` (the
    #: ``read_clock`` activity) instead of ``workflow.now()``.
    clock: bool = False

    def attempts_for(self, tool: str) -> int:
        """The attempt limit of ``tool`` (its override, else the default).

        >>> s = ActivitySettings(1, 1, 1, None, 1, 3, 1, (ToolAttempts("pay", 1),))
        >>> s.attempts_for("pay"), s.attempts_for("look")
        (1, 3)
        """
        for entry in self.tool_attempts:
            if entry.tool == tool:
                return entry.max_attempts
        return self.tool_max_attempts


@attrs.frozen
class DescribeAgent:
    """Input of ``describe_agent``: which agent, and the seed to check."""

    agent: str
    run_id: RunId
    ctx_seed: JsonValue = None


@attrs.frozen
class MemberTimeout:
    """Agent ``agent`` of the tree has its own run timeout of ``seconds``."""

    agent: str
    seconds: float


@attrs.frozen
class AgentDescription:
    """Output of ``describe_agent``: the agent as data, as the worker has it.

    The workflow drives the machine with this ``spec`` — and, for an agent
    that runs as an agent tree (handoffs, hooks, a workflow agent, a swarm),
    with ``tree``, every agent the run can reach. It is recorded in the
    history once, at the start, so every replay sees the same definition.
    No member's ``governance.secrets`` is in it (secrets never enter the
    history). ``fingerprint`` travels with each later activity, which refuses
    to run against a different definition. ``timeouts`` are the tree's
    agents' own run timeouts (the root's is ``spec.config.timeout``).
    """

    spec: AgentSpec
    fingerprint: str
    settings: ActivitySettings
    tree: TreeSpec | None = None
    timeouts: tuple[MemberTimeout, ...] = ()

    def timeout_of(self, agent: str) -> float | None:
        """The own run timeout of tree agent ``agent`` (None: none)."""
        for entry in self.timeouts:
            if entry.agent == agent:
                return entry.seconds
        return None


@attrs.frozen
class StoredOutput:
    """A workflow child's output the run stored under ``key`` (``ctx.state[key]``)."""

    key: str
    text: str


@attrs.frozen
class Address:
    """Whom an activity works for.

    Args:
        agent: the name the run's (root) agent is registered under.
        run_id: the run's id.
        fingerprint: the definition the run started with.
        path: the sub-machine of the agent tree whose effect this is (one
            key per level; empty for the root).
        ctx_seed: the client's seed, for activities that run user code.
        state: the outputs the run has stored so far, in order; the worker
            puts them in ``ctx.state`` for user code to read.
    """

    agent: str
    run_id: RunId
    fingerprint: str
    path: tuple[str, ...] = ()
    ctx_seed: JsonValue = None
    state: tuple[StoredOutput, ...] = ()


@attrs.frozen
class CallModelRequest:
    """Input of ``call_model``: model turn ``turn`` with ``request``."""

    at: Address
    turn: int
    request: ModelRequest


@attrs.frozen
class StepRequest:
    """Input of ``call_step``: one step of a tool call's pipeline (fire a
    hook, ask the policy, run the tool), answered with its
    :data:`~helikon.effects.StepResult` (:class:`StepDone`)."""

    at: Address
    step: CallStep


@attrs.frozen
class StepDone:
    """Output of ``call_step``: the step's result, scrubbed of secrets;
    ``escalated`` if the tool asked an enclosing loop agent to stop."""

    result: StepResult
    escalated: bool = False


@attrs.frozen
class ApprovalsRequest:
    """Input of ``ask_approvals``: the questions for the worker's approval
    handler, answered with :class:`~helikon.effects.ApprovalsGiven`."""

    at: Address
    requests: tuple[ApprovalRequest, ...]


@attrs.frozen
class RenderInstructionsRequest:
    """Input of ``render_instructions``: the instructions for turn ``turn``."""

    at: Address
    turn: int


@attrs.frozen
class HooksRequest:
    """Input of ``run_hooks``: the turn-start hooks of turn ``turn``,
    answered with :class:`~helikon.effects.HooksRan`."""

    at: Address
    turn: int


@attrs.frozen
class GuardrailsRequest:
    """Input of ``check_guardrails``: the ``stage`` guardrails on ``text``,
    answered with :class:`~helikon.effects.GuardrailsChecked`."""

    at: Address
    stage: str
    text: str


@attrs.frozen
class NotifyRequest:
    """Input of ``notify_hooks``: the observing hooks on ``event``,
    answered with :class:`~helikon.effects.HooksNotified`."""

    at: Address
    event: OnHandoff | OnSubagentStop | OnRunComplete


@attrs.frozen
class AgentRunRequest:
    """Input of ``run_agent``: run the child ``run`` that is not a helikon
    machine, whole, at ``depth``; ``at.path`` is the child's own path."""

    at: Address
    run: AgentRun
    depth: int


@attrs.frozen
class AgentRan:
    """Output of ``run_agent``: the child's forwarded events and its result."""

    events: tuple[AgentEvent, ...]
    result: AgentsRan


@attrs.frozen
class ApprovalsPending:
    """What the ``helikon.pending`` query answers: the tool calls waiting
    for a human's decision (empty when the run waits for none)."""

    requests: tuple[ApprovalRequest, ...] = ()


@attrs.frozen
class RunOutcome:
    """The workflow's result: every event of the run, in order."""

    events: tuple[AgentEvent, ...]


class WireFormatError(ValueError):
    """A payload did not decode into the carrier it should hold."""


def encode(value: object, as_type: object = None) -> dict[str, Any]:
    """``value`` as the JSON-compatible ``dict`` Temporal's converter stores.

    Pass a union as ``as_type`` to tag the top-level value with its class.

    >>> encode(ToolAttempts("pay", 1))
    {'tool': 'pay', 'max_attempts': 1}
    """
    data = codec.unstructure(value, as_type)
    if not isinstance(data, dict):
        raise TypeError(f"{type(value).__name__} does not encode to a JSON object")
    return data


def decode(data: object, as_type: Any) -> Any:
    """Rebuild a carrier of ``as_type`` from :func:`encode`'s output.

    Raises:
        WireFormatError: ``data`` is not a valid ``as_type``.

    >>> decode({"tool": "pay", "max_attempts": 1}, ToolAttempts)
    ToolAttempts(tool='pay', max_attempts=1)
    """
    try:
        return codec.structure(data, as_type)
    except Exception as exc:  # cattrs raises several kinds; the payload is bad either way
        name = getattr(as_type, "__name__", str(as_type))
        raise WireFormatError(f"not a valid {name} payload: {exc}") from None


__all__ = [
    "APPROVAL_ERROR",
    "APPROVE_UPDATE",
    "ASK_APPROVALS",
    "CALL_MODEL",
    "CALL_STEP",
    "CHECK_GUARDRAILS",
    "CONFIG_ERROR",
    "DESCRIBE_AGENT",
    "EVENTS_QUERY",
    "INSTRUCTIONS_ERROR",
    "NOTIFY_HOOKS",
    "PENDING_QUERY",
    "RENDER_INSTRUCTIONS",
    "READ_CLOCK",
    "RUN_AGENT",
    "RUN_HOOKS",
    "START_ERROR",
    "STEP_ERROR",
    "WIRE_ERROR",
    "WIRE_VERSION",
    "WORKFLOW_NAME",
    "ActivitySettings",
    "Address",
    "AgentDescription",
    "AgentRan",
    "AgentRunRequest",
    "ApprovalsPending",
    "ApprovalsRequest",
    "CallModelRequest",
    "DescribeAgent",
    "GuardrailsRequest",
    "HooksRequest",
    "MemberTimeout",
    "ModelResult",
    "NotifyRequest",
    "RenderInstructionsRequest",
    "RunOutcome",
    "RunRequest",
    "StepDone",
    "StepRequest",
    "StoredOutput",
    "ToolAttempts",
    "WireFormatError",
    "decode",
    "encode",
]
