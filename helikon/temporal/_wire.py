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
from helikon.effects import (
    ApprovalRequest,
    CallStep,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    StepResult,
)
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.items import Item
from helikon.loop import AgentSpec
from helikon.model import ModelRequest

#: The shape of the payloads below; checked by the workflow when a run starts.
WIRE_VERSION: Final = 2

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
#: The query that returns a running workflow's events so far.
EVENTS_QUERY: Final = "helikon.events"

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
class AgentDescription:
    """Output of ``describe_agent``: the agent as data, as the worker has it.

    The workflow drives the machine with this ``spec``; it is recorded in the
    history once, at the start, so every replay sees the same definition.
    ``fingerprint`` travels with each later activity, which refuses to run
    against a different definition.
    """

    spec: AgentSpec
    fingerprint: str
    settings: ActivitySettings


@attrs.frozen
class CallModelRequest:
    """Input of ``call_model``: model turn ``turn`` with ``request``."""

    agent: str
    run_id: RunId
    fingerprint: str
    turn: int
    request: ModelRequest


@attrs.frozen
class StepRequest:
    """Input of ``call_step``: one step of a tool call's pipeline (fire a
    hook, ask the policy, run the tool), answered with its
    :data:`~helikon.effects.StepResult` (:class:`StepDone`)."""

    agent: str
    run_id: RunId
    fingerprint: str
    step: CallStep
    ctx_seed: JsonValue = None


@attrs.frozen
class StepDone:
    """Output of ``call_step``: the step's result, scrubbed of secrets."""

    result: StepResult


@attrs.frozen
class ApprovalsRequest:
    """Input of ``ask_approvals``: the questions for the worker's approval
    handler, answered with :class:`~helikon.effects.ApprovalsGiven`."""

    agent: str
    run_id: RunId
    fingerprint: str
    requests: tuple[ApprovalRequest, ...]
    ctx_seed: JsonValue = None


@attrs.frozen
class RenderInstructionsRequest:
    """Input of ``render_instructions``: the instructions for turn ``turn``."""

    agent: str
    run_id: RunId
    fingerprint: str
    turn: int
    ctx_seed: JsonValue = None


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
    "CALL_MODEL",
    "CONFIG_ERROR",
    "DESCRIBE_AGENT",
    "EVENTS_QUERY",
    "INSTRUCTIONS_ERROR",
    "ASK_APPROVALS",
    "CALL_STEP",
    "RENDER_INSTRUCTIONS",
    "START_ERROR",
    "STEP_ERROR",
    "WIRE_ERROR",
    "WIRE_VERSION",
    "WORKFLOW_NAME",
    "ActivitySettings",
    "AgentDescription",
    "CallModelRequest",
    "DescribeAgent",
    "ApprovalsRequest",
    "StepDone",
    "StepRequest",
    "ModelResult",
    "RenderInstructionsRequest",
    "RunOutcome",
    "RunRequest",
    "ToolAttempts",
    "WireFormatError",
    "decode",
    "encode",
]
