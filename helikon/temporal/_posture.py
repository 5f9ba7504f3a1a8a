"""The worker's security posture: the run context every activity runs under.

The caller's :class:`~helikon.RunContext` (tenant data, auth claims,
permission rules) never crosses the client -> worker boundary: it is not
serialisable in general, and a caller must not be able to loosen the rules
of the process that runs the tools. The worker fabricates its own context
for every activity from its :class:`WorkerPosture` (:meth:`WorkerPosture.
run_context`), which is therefore authoritative for permission enforcement
and output redaction on every tool call the worker executes. The one thing
a client may send is a small JSON *ctx seed*, which a factory the worker
registered turns into the context's ``user_ctx`` — request data, never
posture.

A tool call then goes through the same pure pipeline as everywhere (deny
rules > guard rules > allow rules > mode > policy > approval, the tool,
redaction of its output), decided in the workflow from the posture's
configuration (``describe_agent`` reads it, without the secrets); each step
that calls user code (a hook, the policy, the approval handler, the tool)
is an activity on the worker. :func:`redact_step` scrubs each step's result
of the worker's secrets inside the activity, before Temporal records it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, final

import attrs

from helikon.config import PermissionMode
from helikon.context import RunContext
from helikon.effects import CallbackRaised, StepResult, ToolRaised, ToolReturned
from helikon.errors import ConfigError, Denied, InvalidArgs, ToolCrashed
from helikon.governance import AllowRule, DenyRule, GuardRule, redact, redact_json
from helikon.pricing import PriceSource


def _deny_rules(rules: Iterable[DenyRule]) -> tuple[DenyRule, ...]:
    return tuple(rules)


def _guard_rules(rules: Iterable[GuardRule]) -> tuple[GuardRule, ...]:
    return tuple(rules)


def _allow_rules(rules: Iterable[AllowRule]) -> tuple[AllowRule, ...]:
    return tuple(rules)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ConfigError("extra_secrets must be a collection of strings, not one string")
    return tuple(values)


def _callable_or_none(instance: object, attribute: attrs.Attribute[object], value: object) -> None:
    if value is not None and not callable(value):
        raise ConfigError(f"WorkerPosture.{attribute.name} must be callable, got {value!r}")


@final
@attrs.frozen
class WorkerPosture:
    """Everything that governs the tool calls a worker executes.

    Set on the worker (``TemporalAgentWorker(..., posture=...)``), never by
    the caller. ``WorkerPosture()`` is the posture of
    ``RunContext.ephemeral(...)``: ``DEFAULT`` mode, no rules, the built-in
    destructive guards, no policy, no approval handler (so an ask resolves
    to deny, no suspension) and output redaction on.

    Args:
        mode: the permission mode; tools also see it as ``ctx.permission_mode``.
        deny_rules: checked first, in every mode (even ``BYPASS``).
        guard_rules: your guard rules (after the built-in ones).
        allow_rules: pre-approvals, checked after the guards.
        default_guards: keep :meth:`GuardRule.destructive_defaults`
            (``False`` is the book's ``without_default_guards()``).
        policy: the permission policy, ``policy(ctx, tool_name, args)``
            returning (or awaiting to) ``Allow``, ``Deny``, ``AskUser`` or
            ``Replace``. ``ctx`` is the worker's context for the run, whose
            ``user_ctx`` the ctx seed built, so the policy can decide per
            tenant without the client ever sending a rule. Not asked in
            ``BYPASS`` and ``DONT_ASK`` mode.
        approval_handler: ``handler(request)`` returning (or awaiting to)
            ``Allow()`` or ``Deny(reason)`` for an
            :class:`~helikon.effects.ApprovalRequest`. It runs inside the
            ``ask_approvals`` activity (mind the tool timeout).
        suspend_on_approval: with no approval handler, a question for a
            human suspends the run *in the workflow* until the decisions
            arrive (``TemporalRun.approve``) instead of being denied
            (``RunContext.with_suspend_on_approval``). The wait costs no
            worker and survives worker restarts.
        redaction: scrub tool output (and failure messages) before they are
            returned to the workflow, and so before they are recorded.
        extra_secrets: literal secret values to scrub, besides the
            secret-named environment variables of the worker process.
        prices: where the runs' model prices come from (see
            :mod:`helikon.pricing`); the price travels in the agent's spec
            to the workflow, whose machine prices each turn.
    """

    mode: PermissionMode = PermissionMode.DEFAULT
    deny_rules: tuple[DenyRule, ...] = attrs.field(default=(), converter=_deny_rules)
    guard_rules: tuple[GuardRule, ...] = attrs.field(default=(), converter=_guard_rules)
    allow_rules: tuple[AllowRule, ...] = attrs.field(default=(), converter=_allow_rules)
    default_guards: bool = True
    policy: object | None = attrs.field(default=None, validator=_callable_or_none)
    approval_handler: object | None = attrs.field(default=None, validator=_callable_or_none)
    redaction: bool = True
    extra_secrets: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    suspend_on_approval: bool = False
    prices: PriceSource | None = None

    def run_context(self, user_ctx: Any) -> RunContext[Any]:
        """The context an activity of a run executes under: this posture,
        around the ``user_ctx`` the ctx seed built.

        >>> ctx = WorkerPosture(mode=PermissionMode.PLAN).run_context("acme")
        >>> ctx.user_ctx, ctx.permission_mode.name, ctx.default_guards
        ('acme', 'PLAN', True)
        """
        return RunContext(
            user_ctx,
            permission_mode=self.mode,
            deny_rules=self.deny_rules,
            allow_rules=self.allow_rules,
            guard_rules=self.guard_rules,
            default_guards=self.default_guards,
            permission_policy=self.policy,
            approval_handler=self.approval_handler,
            extra_secrets=self.extra_secrets,
            redact_output=self.redaction,
            suspend_on_approval=self.suspend_on_approval,
            prices=self.prices,
        )


def redact_step(result: StepResult, secrets: Iterable[str]) -> StepResult:
    """``result`` with every known secret scrubbed, before Temporal records it.

    A tool's output, an exception's message (``ToolCrashed``), a denial's
    reason, argument errors and a hook's or policy's failure can each quote
    a secret, and the history would keep it. (The machine redacts the output
    again, key-name patterns included, before the model sees it.)

    >>> from helikon.ids import CallId
    >>> redact_step(ToolRaised(CallId("c"), ToolCrashed("bad key sk-secret-1")), ["sk-secret-1"]).failure
    ToolCrashed(message='bad key ***')
    """
    secrets = tuple(secrets)
    match result:
        case ToolReturned(call_id=call_id, output=output):
            return ToolReturned(call_id, redact_json(output, secrets))
        case ToolRaised(call_id=call_id, failure=ToolCrashed(message=message)):
            return ToolRaised(call_id, ToolCrashed(redact(message, secrets)))
        case ToolRaised(call_id=call_id, failure=Denied(reason=reason)):
            return ToolRaised(call_id, Denied(redact(reason, secrets)))
        case ToolRaised(call_id=call_id, failure=InvalidArgs(schema_errors=errors)):
            return ToolRaised(call_id, InvalidArgs(tuple(redact(e, secrets) for e in errors)))
        case CallbackRaised(call_id=call_id, message=message):
            return CallbackRaised(call_id, redact(message, secrets))
    return result


__all__ = ["WorkerPosture", "redact_step"]
