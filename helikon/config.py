"""Per-run knobs.

Defaults follow the book: 16 model turns, unbounded tool concurrency, agent
nesting depth 8, no timeout. ``timeout`` is enforced by the live interpreter
(a pure machine has no clock).
"""

from __future__ import annotations

import enum

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


@attrs.frozen
class RunConfig:
    """How a run may go.

    Args:
        max_turns: model turns before the run fails with ``MaxTurnsExceeded``.
        parallel_tool_call_limit: tool calls of one turn that may run at once;
            ``None`` means unbounded.
        max_agent_depth: nesting depth of handoffs and agent-as-tool runs.
        timeout: wall-clock seconds for the whole run, or ``None``.
    """

    max_turns: int = attrs.field(default=16, validator=_positive)
    parallel_tool_call_limit: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_agent_depth: int = attrs.field(default=8, validator=_positive)
    timeout: float | None = attrs.field(default=None, validator=_positive_seconds)

    def with_max_turns(self, max_turns: int) -> RunConfig:
        return attrs.evolve(self, max_turns=max_turns)

    def with_parallel_tool_call_limit(self, limit: int | None) -> RunConfig:
        return attrs.evolve(self, parallel_tool_call_limit=limit)

    def with_max_agent_depth(self, depth: int) -> RunConfig:
        return attrs.evolve(self, max_agent_depth=depth)

    def with_timeout(self, seconds: float | None) -> RunConfig:
        return attrs.evolve(self, timeout=seconds)


__all__ = ["PermissionMode", "RunConfig"]
