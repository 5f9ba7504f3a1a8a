"""Per-run knobs.

Defaults follow the book: 16 model turns, unbounded tool concurrency, agent
nesting depth 8, no timeout; no usage limits. ``timeout`` is enforced by the live interpreter
(a pure machine has no clock).
"""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Final

import attrs

from helikon.errors import ConfigError


def _positive_or_none(_: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{attribute.name} must be >= 1 or None, got {value}")


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ConfigError(f"{attribute.name} must be >= 1, got {value}")


def _positive_seconds(_: object, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is not None and not value > 0:
        raise ConfigError(f"{attribute.name} must be > 0 seconds or None, got {value}")


class PermissionMode(enum.Enum):
    """How tool calls are authorised when no rule decides."""

    #: Ask the permission policy when one is installed; allow when none is.
    DEFAULT = "default"
    #: Auto-approve tools whose effect is WRITE.
    ACCEPT_EDITS = "accept_edits"
    #: Allow only READ_ONLY tools.
    PLAN = "plan"
    #: Allow everything (deny rules still apply).
    BYPASS = "bypass"
    #: Deny unless an allow rule permits; the policy is never asked.
    DONT_ASK = "dont_ask"


def _count_or_none(_: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise ConfigError(f"{attribute.name} must be an int >= 0 or None, got {value!r}")


def _money_or_none(_: object, attribute: attrs.Attribute[Decimal | None], value: Decimal | None) -> None:
    if value is not None and (type(value) is not Decimal or not value.is_finite() or value < 0):
        raise ConfigError(f"{attribute.name} must be a finite Decimal >= 0 or None, got {value!r}")


def _to_money(value: object) -> object:
    """Money as a Decimal: an int or a numeric string is taken exactly; a
    float is refused (0.1 is not a price a user meant)."""
    if type(value) is int or type(value) is str:
        try:
            return Decimal(value)
        except ArithmeticError:
            return value
    return value


@attrs.frozen
class UsageLimits:
    """What a run (an agent tree: every member together) may spend.

    Each limit is None (no limit) or the most the run may use. The machine
    checks them before each model call and before each round of tool calls,
    from the usage the providers reported: a call that would go past
    ``requests``, a round that would go past ``tool_calls``, or usage already
    past a token or cost limit ends the run with ``RunFailed`` carrying a
    :class:`~helikon.errors.UsageLimitExceeded`.

    Args:
        requests: model calls.
        input_tokens: input tokens (cached ones included).
        output_tokens: output tokens (reasoning included).
        total_tokens: input plus output tokens.
        tool_calls: tool calls run.
        cost: US dollars, a :class:`~decimal.Decimal` (an int or a numeric
            string is converted exactly). A run whose cost is unknown (a model
            without a price) with a cost limit ends at its first check.
    """

    requests: int | None = attrs.field(default=None, validator=_count_or_none)
    input_tokens: int | None = attrs.field(default=None, validator=_count_or_none)
    output_tokens: int | None = attrs.field(default=None, validator=_count_or_none)
    total_tokens: int | None = attrs.field(default=None, validator=_count_or_none)
    tool_calls: int | None = attrs.field(default=None, validator=_count_or_none)
    cost: Decimal | None = attrs.field(default=None, converter=_to_money, validator=_money_or_none)

    @property
    def unlimited(self) -> bool:
        """Whether no limit is set."""
        return self is _NO_LIMITS or self == _NO_LIMITS


_NO_LIMITS: Final = UsageLimits()


@attrs.frozen
class RunConfig:
    """How a run may go.

    Args:
        max_turns: model turns before the run fails with ``MaxTurnsExceeded``.
        parallel_tool_call_limit: tool calls of one turn that may run at once;
            ``None`` means unbounded.
        max_agent_depth: nesting depth of handoffs and agent-as-tool runs.
        timeout: wall-clock seconds for the whole run, or ``None``.
        usage_limits: what the run may spend (see :class:`UsageLimits`);
            an agent tree counts every member against its root's.
    """

    max_turns: int = attrs.field(default=16, validator=_positive)
    parallel_tool_call_limit: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_agent_depth: int = attrs.field(default=8, validator=_positive)
    timeout: float | None = attrs.field(default=None, validator=_positive_seconds)
    usage_limits: UsageLimits = _NO_LIMITS

    def with_max_turns(self, max_turns: int) -> RunConfig:
        return attrs.evolve(self, max_turns=max_turns)

    def with_parallel_tool_call_limit(self, limit: int | None) -> RunConfig:
        return attrs.evolve(self, parallel_tool_call_limit=limit)

    def with_max_agent_depth(self, depth: int) -> RunConfig:
        return attrs.evolve(self, max_agent_depth=depth)

    def with_timeout(self, seconds: float | None) -> RunConfig:
        return attrs.evolve(self, timeout=seconds)

    def with_usage_limits(self, limits: UsageLimits) -> RunConfig:
        return attrs.evolve(self, usage_limits=limits)


__all__ = ["PermissionMode", "RunConfig", "UsageLimits"]
