"""Failures as data, and the exceptions that carry them at the edges.

Inside the core, a failure is a value: a :data:`ModelFailure` in a
``ModelCallFailed`` result, a :data:`ToolFailure` in a tool outcome, an
:data:`AgentError` in a ``RunFailed`` event. At the edges the same values
travel inside exceptions of one hierarchy rooted at :class:`HelikonError`:
adapters raise :class:`ModelError`, tools raise :class:`ToolError`, and
``collect`` raises :class:`RunError`. Any other exception escaping helikon is
a bug.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TypeAlias

import attrs

# -- model failures ----------------------------------------------------------


@attrs.frozen
class Unavailable:
    """The provider is down or overloaded (HTTP 5xx, 529)."""

    message: str


@attrs.frozen
class RateLimited:
    """The provider throttled the call; ``retry_after_ms`` is its hint."""

    message: str
    retry_after_ms: int | None = None


@attrs.frozen
class ContextLengthExceeded:
    """The request does not fit the model's context window."""

    message: str


@attrs.frozen
class Refused:
    """The provider refused to answer (safety, policy)."""

    message: str


@attrs.frozen
class TransportFailure:
    """The connection failed or the stream was cut."""

    message: str


@attrs.frozen
class OtherModelFailure:
    """Anything else: bad request, unknown model, malformed response."""

    message: str
    status: int | None = None


#: Why a model call failed.
ModelFailure: TypeAlias = (
    Unavailable | RateLimited | ContextLengthExceeded | Refused | TransportFailure | OtherModelFailure
)

_MODEL_FAILURES = (
    Unavailable,
    RateLimited,
    ContextLengthExceeded,
    Refused,
    TransportFailure,
    OtherModelFailure,
)

#: Model failures worth retrying.
TRANSIENT_MODEL_FAILURES = (Unavailable, RateLimited, TransportFailure)


# -- tool failures -----------------------------------------------------------


@attrs.frozen
class InvalidArgs:
    """The arguments did not match the tool's schema (fed back once)."""

    schema_errors: tuple[str, ...]


@attrs.frozen
class Denied:
    """The tool (or a permission) refused the call."""

    reason: str


@attrs.frozen
class ToolCrashed:
    """The tool failed for any other reason."""

    message: str


#: Why a tool call failed.
ToolFailure: TypeAlias = InvalidArgs | Denied | ToolCrashed


# -- agent errors ------------------------------------------------------------


@attrs.frozen
class MaxTurnsExceeded:
    """The run used ``max_turns`` model turns and the model still wanted tools."""

    max_turns: int


@attrs.frozen
class MaxAgentDepthExceeded:
    """Handoffs or agent-as-tool calls nested deeper than ``max_depth``."""

    max_depth: int


@attrs.frozen
class MaxIterationsExceeded:
    """A loop agent ran ``max_iterations`` without an exit."""

    max_iterations: int


@attrs.frozen
class MaxHandoffsExceeded:
    """A swarm handed off more than ``max_handoffs`` times."""

    max_handoffs: int


@attrs.frozen
class InvalidStructuredOutput:
    """The final answer did not match the output schema, even after repair."""

    schema_errors: tuple[str, ...]
    text: str


@attrs.frozen
class InvalidToolArgs:
    """The model sent invalid arguments again after being told once."""

    tool: str
    schema_errors: tuple[str, ...]


@attrs.frozen
class ChildFailure:
    """Child agent ``key`` of a workflow failed with ``error``."""

    key: str
    error: AgentError


@attrs.frozen
class ChildrenFailed:
    """Some children of a workflow failed (collect-all); ``skipped`` are the
    graph nodes that did not run because a predecessor failed."""

    failed: tuple[ChildFailure, ...]
    skipped: tuple[str, ...] = ()


@attrs.frozen
class GuardrailTripped:
    """A guardrail's tripwire halted the run."""

    kind: str
    info: str


@attrs.frozen
class Cancelled:
    """The run's cancellation token fired."""


@attrs.frozen
class TimedOut:
    """The run's wall-clock ``timeout`` passed."""

    timeout_s: float


@attrs.frozen
class ModelFailed:
    """A model call failed."""

    failure: ModelFailure


@attrs.frozen
class UsageLimitExceeded:
    """A run's spending reached one of its :class:`~helikon.UsageLimits`.

    ``limit`` names it (``"requests"``, ``"input_tokens"``, ``"output_tokens"``,
    ``"total_tokens"``, ``"tool_calls"`` or ``"cost"``); ``value`` is what the
    run would have spent (the usage so far, plus the model call or the tool
    calls about to start), or None for a cost that is unknown because a model
    has no price; ``maximum`` is the limit; ``agent`` the agent that was about
    to spend and ``path`` where it sits in its tree (``()``: the run's own agent).
    """

    limit: str
    value: int | Decimal | None
    maximum: int | Decimal
    agent: str = ""
    path: tuple[str, ...] = ()


@attrs.frozen
class OtherError:
    """Anything else."""

    message: str


#: Why a run failed.
AgentError: TypeAlias = (
    MaxTurnsExceeded
    | MaxAgentDepthExceeded
    | MaxIterationsExceeded
    | MaxHandoffsExceeded
    | InvalidStructuredOutput
    | InvalidToolArgs
    | ChildrenFailed
    | GuardrailTripped
    | Cancelled
    | TimedOut
    | ModelFailed
    | UsageLimitExceeded
    | OtherError
)


def describe(error: AgentError | ModelFailure | ToolFailure) -> str:
    """A one-line human description of a failure value.

    >>> describe(MaxTurnsExceeded(3))
    'maximum turns exceeded (3)'
    >>> describe(ModelFailed(RateLimited("slow down", 500)))
    'model call failed: rate limited: slow down (retry after 500 ms)'
    """
    match error:
        case MaxTurnsExceeded(n):
            return f"maximum turns exceeded ({n})"
        case MaxAgentDepthExceeded(n):
            return f"maximum agent depth exceeded ({n})"
        case MaxIterationsExceeded(n):
            return f"maximum iterations exceeded ({n})"
        case MaxHandoffsExceeded(n):
            return f"maximum handoffs exceeded ({n})"
        case InvalidStructuredOutput(errs, _):
            return "invalid structured output: " + "; ".join(errs)
        case InvalidToolArgs(tool, errs):
            return f"invalid arguments for tool {tool!r}: " + "; ".join(errs)
        case ChildrenFailed(failed, skipped):
            parts = [f"{f.key} ({describe(f.error)})" for f in failed]
            text = "failed: " + ", ".join(parts)
            return text + ("; skipped: " + ", ".join(skipped) if skipped else "")
        case GuardrailTripped(kind, info):
            return f"guardrail tripped ({kind}): {info}"
        case Cancelled():
            return "cancelled"
        case TimedOut(s):
            return f"timed out after {s:g} s"
        case ModelFailed(failure):
            return "model call failed: " + describe(failure)
        case UsageLimitExceeded(limit, value, maximum, agent, path):
            where = "/".join(path) or agent
            spent = "unknown (a model has no price)" if value is None else str(value)
            return f"usage limit {limit} exceeded by {where!r}: {spent} > {maximum}"
        case OtherError(message):
            return message
        case Unavailable(message):
            return f"model unavailable: {message}"
        case RateLimited(message, None):
            return f"rate limited: {message}"
        case RateLimited(message, ms):
            return f"rate limited: {message} (retry after {ms} ms)"
        case ContextLengthExceeded(message):
            return f"context length exceeded: {message}"
        case Refused(message):
            return f"refused: {message}"
        case TransportFailure(message):
            return f"transport error: {message}"
        case OtherModelFailure(message, status):
            return message if status is None else f"HTTP {status}: {message}"
        case InvalidArgs(errs):
            return "invalid arguments: " + "; ".join(errs)
        case Denied(reason):
            return f"denied: {reason}"
        case ToolCrashed(message):
            return message
    # Not a failure value at all (a plain string passed where one belongs):
    # described as it is rather than failing while describing a failure.
    return str(error)


# -- exceptions --------------------------------------------------------------


class HelikonError(Exception):
    """Base of every exception helikon raises on purpose."""


class ModelError(HelikonError):
    """A model adapter failed; ``failure`` says how.

    Adapters raise it from ``invoke`` (before or during the stream). Build it
    with the class methods: ``ModelError.rate_limited("...", retry_after_ms=500)``.
    ``ModelError("upstream 503")``, with text, is ``ModelError.other(...)``.

    Raises:
        TypeError: ``failure`` is neither text nor a :data:`ModelFailure`.
    """

    def __init__(self, failure: ModelFailure | str) -> None:
        if isinstance(failure, str):
            failure = OtherModelFailure(failure)
        elif not isinstance(failure, _MODEL_FAILURES):
            raise TypeError(
                f"ModelError takes a model failure or its text, not {type(failure).__name__}: use "
                "ModelError.unavailable/.rate_limited/.context_length_exceeded/.refused/.transport/.other"
            )
        super().__init__(describe(failure))
        self.failure: ModelFailure = failure

    @classmethod
    def unavailable(cls, message: str) -> ModelError:
        return cls(Unavailable(message))

    @classmethod
    def rate_limited(cls, message: str, retry_after_ms: int | None = None) -> ModelError:
        return cls(RateLimited(message, retry_after_ms))

    @classmethod
    def context_length_exceeded(cls, message: str) -> ModelError:
        return cls(ContextLengthExceeded(message))

    @classmethod
    def refused(cls, message: str) -> ModelError:
        return cls(Refused(message))

    @classmethod
    def transport(cls, message: str) -> ModelError:
        return cls(TransportFailure(message))

    @classmethod
    def other(cls, message: str, status: int | None = None) -> ModelError:
        return cls(OtherModelFailure(message, status))


class ToolError(HelikonError):
    """A tool failed; ``failure`` says how. The model sees the message.

    ``raise ToolError("no such account")`` reports an ordinary failure;
    ``ToolError.denied(...)`` a refusal and ``ToolError.invalid_args(...)``
    argument errors (which the loop feeds back to the model once).
    """

    def __init__(self, message_or_failure: str | ToolFailure) -> None:
        failure = (
            ToolCrashed(message_or_failure) if isinstance(message_or_failure, str) else message_or_failure
        )
        super().__init__(describe(failure))
        self.failure: ToolFailure = failure

    @classmethod
    def invalid_args(cls, *schema_errors: str) -> ToolError:
        return cls(InvalidArgs(tuple(schema_errors)))

    @classmethod
    def denied(cls, reason: str) -> ToolError:
        return cls(Denied(reason))


class RunError(HelikonError):
    """A run ended with ``RunFailed``; ``error`` is the :data:`AgentError`.

    ``events`` holds the run's events, when the error came from a run.
    """

    def __init__(self, error: AgentError, events: tuple[object, ...] = ()) -> None:
        super().__init__(describe(error))
        self.error = error
        self.events = events


class RunSuspended(HelikonError):
    """The run stopped in ``NeedsApproval``: tool calls wait for a human.

    Raised by the live interpreter when a call needs approval, no approval
    handler is installed and the run context asked to suspend
    (``with_suspend_on_approval()``). Drive such runs with the step API
    (``start``/``perform``/``advance``) to get the state to save, and resume
    with ``agent.resume(ctx, state, ApprovalsGiven(...))``.
    """

    def __init__(self, requests: tuple[object, ...]) -> None:
        super().__init__(f"{len(requests)} tool call(s) await approval")
        self.requests = requests


class StepError(HelikonError):
    """The step API was misused: a result that does not answer the pending
    effect, or a step on a terminal state. Raised by interpreters from the
    core's ``Failure(StepError)``; always a bug in the caller."""


class ConfigError(HelikonError, ValueError):
    """An agent, tool or run was configured with invalid values."""


class NormalFormError(HelikonError, TypeError, ValueError):
    """A value has no canonical JSON form, so it cannot enter the core.

    Raised by :func:`helikon.normal_form` for a non-string dict key, NaN or
    infinity, a string holding a lone surrogate, or a value of a type with no
    JSON form (a set's members are sorted, tuples become lists: those are
    fine). ``path`` says where the value sits (``$.rows[2]``), ``reason``
    what is wrong with it. A ``TypeError`` and a ``ValueError`` both, so code
    that caught what the JSON encoder used to raise still catches it.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


__all__ = [
    "AgentError",
    "Cancelled",
    "ChildFailure",
    "ChildrenFailed",
    "ConfigError",
    "ContextLengthExceeded",
    "Denied",
    "GuardrailTripped",
    "HelikonError",
    "InvalidArgs",
    "InvalidStructuredOutput",
    "InvalidToolArgs",
    "MaxAgentDepthExceeded",
    "MaxHandoffsExceeded",
    "MaxIterationsExceeded",
    "MaxTurnsExceeded",
    "ModelError",
    "ModelFailed",
    "ModelFailure",
    "NormalFormError",
    "OtherError",
    "OtherModelFailure",
    "RateLimited",
    "Refused",
    "RunError",
    "RunSuspended",
    "StepError",
    "TRANSIENT_MODEL_FAILURES",
    "TimedOut",
    "UsageLimitExceeded",
    "ToolCrashed",
    "ToolError",
    "ToolFailure",
    "TransportFailure",
    "Unavailable",
    "describe",
]
