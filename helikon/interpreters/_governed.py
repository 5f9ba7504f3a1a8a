"""Performing governance: hooks, guardrails, the permission pipeline and
redaction around each tool call.

Every decision here is a pure fold from :mod:`helikon.governance`; what this
module adds is calling the user's code those folds ask for (hooks,
guardrails, the permission policy, the approval handler) and the tool
itself, in the book's order for one call::

    PreToolUse hooks -> permissions (deny > guard > allow > mode > policy >
    approval) -> the tool -> PostToolUse hooks -> redaction
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.context import RunContext, ToolContext
from helikon.effects import (
    ApprovalPending,
    ApprovalRequest,
    GuardrailsChecked,
    HooksRan,
    ToolOutcome,
    ToolRaised,
    ToolReturned,
)
from helikon.errors import Denied, GuardrailTripped, ToolCrashed, ToolError, ToolFailure
from helikon.events import AgentEvent, ApprovalRequested, PermissionDenied
from helikon.governance import (
    Allow,
    ApprovalNeeded,
    ArgumentRole,
    Decided,
    Deny,
    GuardRule,
    HookVerdict,
    ModelOutput,
    OnRunStart,
    OnTurnStart,
    Pass,
    PermissionSettings,
    PermissionStep,
    PolicyNeeded,
    PostToolUse,
    PreToolUse,
    Replace,
    Tripwire,
    UserText,
    after_approval,
    after_policy,
    fire_order,
    fold_guardrails,
    fold_permissions,
    kind_label,
    redact,
    replaced_value,
    resolve_without_handler,
    secret_values_from_environment,
    tripwire_from_error,
)
from helikon.interpreters._env import RunEnv
from helikon.items import ToolCall
from helikon.model import ToolEffect

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


async def call_user(fn: Any, *args: Any) -> Any:
    """Call user code that may be sync or async (or an object with ``__call__``)."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


def tool_output_text(value: object) -> str:
    """The text the model sees for a tool's return value (JSON unless a str).

    msgspec encodes attrs classes, dataclasses, Structs, enums and datetimes
    directly; a value it cannot encode raises ``TypeError``.
    """
    if isinstance(value, str):
        return value
    return _encode(value).decode()


def permission_settings(ctx: RunContext[Any]) -> PermissionSettings:
    """The run context's permission configuration, as the pure pipeline's data."""
    guards = (*GuardRule.destructive_defaults(), *ctx.guard_rules) if ctx.default_guards else ctx.guard_rules
    return PermissionSettings(
        mode=ctx.permission_mode,
        deny_rules=tuple(ctx.deny_rules),
        guard_rules=tuple(guards),
        allow_rules=tuple(ctx.allow_rules),
        has_policy=ctx.permission_policy is not None,
    )


_environment_secrets: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] = ((), ())


def run_secrets(ctx: RunContext[Any]) -> tuple[str, ...]:
    """The secret values to redact from tool output: secret-named environment
    variables, captured now (at run start), plus the context's extras.

    The environment scan is memoised on the environment's contents (it costs
    tens of microseconds and the environment rarely changes between runs).
    """
    global _environment_secrets
    if not ctx.redact_output:
        return ()
    snapshot = tuple(os.environ.items())
    if snapshot != _environment_secrets[0]:
        _environment_secrets = (snapshot, secret_values_from_environment(dict(snapshot)))
    return (*_environment_secrets[1], *ctx.extra_secrets)


_ROLES = tuple(ArgumentRole)


def permission_step(
    name: str, effect: ToolEffect, args: JsonValue, settings: PermissionSettings, memo: dict[Any, Any]
) -> PermissionStep:
    """``fold_permissions``, memoised per run for tools none of whose
    arguments the rules read (then the fold cannot depend on the arguments)."""
    if any(settings.arguments.handles(name, role) for role in _ROLES):
        return fold_permissions(name, effect, args, settings)
    key = (name, effect)
    step = memo.get(key)
    if step is None:
        step = memo[key] = fold_permissions(name, effect, args, settings)
    return step


async def _hook_verdict(hooks: Sequence[Any], ctx: RunContext[Any], event: object) -> HookVerdict:
    verdict = HookVerdict()
    for hook in hooks:
        decision = await call_user(hook, ctx, event)
        verdict = verdict.add(Allow() if decision is None else decision)
        if verdict.denied:
            break  # the first deny short-circuits
    return verdict


async def run_turn_hooks(turn: int, env: RunEnv) -> HooksRan:
    """Fire OnRunStart (turn 1) and OnTurnStart hooks; fold their decisions."""
    hooks = fire_order(env.hooks, env.ctx.hooks.hooks)
    verdict = HookVerdict()
    events: list[object] = [OnRunStart(), OnTurnStart(turn)] if turn == 1 else [OnTurnStart(turn)]
    for event in events:
        verdict = verdict.then(await _hook_verdict(hooks, env.ctx, event))
        if verdict.denied:
            break
    denial = verdict.denial
    return HooksRan(denial.reason if denial is not None else None, tuple(verdict.injections))


async def notify_hooks(env: RunEnv, event: object) -> None:
    """Fire the hooks that only observe (OnHandoff, OnSubagentStop,
    OnRunComplete): their decisions are ignored and a hook that raises is
    logged, never fatal. Best effort, like the book's OnRunComplete."""
    hooks = fire_order(env.hooks, env.ctx.hooks.hooks)
    for hook in hooks:
        try:
            await call_user(hook, env.ctx, event)
        except Exception:
            import logging

            logging.getLogger("helikon.hooks").exception("a %s hook failed", type(event).__name__)


async def check_guardrails(stage: str, text: str, env: RunEnv) -> GuardrailsChecked:
    """Run the stage's guardrails at once; report the first tripwire in
    declaration order (an error counts as a tripwire)."""
    import anyio

    if stage == "input":
        guardrails = (*env.input_guardrails, *env.ctx.hooks.input_guardrails)
        subject: object = UserText(text)
    else:
        guardrails = (*env.output_guardrails, *env.ctx.hooks.output_guardrails)
        subject = ModelOutput(text)
    verdicts: list[Any] = [Pass()] * len(guardrails)

    async def check(index: int) -> None:
        try:
            verdicts[index] = await call_user(guardrails[index], env.ctx, subject)
        except Exception as exc:  # a failing guardrail trips (book)
            verdicts[index] = tripwire_from_error(f"{type(exc).__name__}: {exc}")

    async with anyio.create_task_group() as group:
        for index in range(len(guardrails)):
            group.start_soon(check, index)
    folded = fold_guardrails(verdicts)
    if isinstance(folded, Tripwire):
        raw = folded.info
        info = raw if isinstance(raw, str) else "" if raw is None else _encode(raw).decode()
        return GuardrailsChecked(GuardrailTripped(kind_label(folded.kind), info))
    return GuardrailsChecked()


def _scrubbed(failure: ToolFailure, ctx: RunContext[Any], secrets: tuple[str, ...]) -> ToolFailure:
    """A tool failure with secrets redacted from its message (it reaches the
    model and the session like any tool output)."""
    if not ctx.redact_output:
        return failure
    match failure:
        case ToolCrashed(message=message):
            return ToolCrashed(redact(message, secrets))
        case Denied(reason=reason):
            return Denied(redact(reason, secrets))
        case _:
            return failure


@attrs.define
class CallReport:
    """What happened to one tool call: its outcome, the events to emit, and
    the system messages its hooks asked to inject."""

    outcome: ToolOutcome
    events: list[AgentEvent] = attrs.field(factory=list)
    injected: list[str] = attrs.field(factory=list)


async def run_governed_tool(
    call: ToolCall, env: RunEnv, approved: bool, secrets: tuple[str, ...]
) -> CallReport:
    """One tool call through the whole pipeline."""
    tool = env.tools.get(call.name)
    if tool is None:
        return CallReport(ToolRaised(call.call_id, ToolCrashed(f"tool {call.name!r} has no implementation")))
    ctx = env.ctx
    report = CallReport(ToolRaised(call.call_id, ToolCrashed("not run")))
    args: JsonValue = _decode(call.arguments) if call.arguments else {}
    hooks = fire_order(env.hooks, ctx.hooks.hooks)

    def deny(reason: str) -> CallReport:
        report.events.append(PermissionDenied(call.name, reason))
        report.outcome = ToolRaised(call.call_id, Denied(reason))
        return report

    if hooks:
        verdict = await _hook_verdict(hooks, ctx, PreToolUse(call.name, args))
        report.injected.extend(verdict.injections)
        if verdict.denial is not None:
            return deny(verdict.denial.reason)
        args = replaced_value(verdict, args)

    if not approved:
        effect = getattr(tool, "effect", ToolEffect.SIDE_EFFECT)
        settings = env.permissions if env.permissions is not None else permission_settings(ctx)
        step = permission_step(call.name, effect, args, settings, env.memo)
        while not isinstance(step, Decided):
            if isinstance(step, PolicyNeeded):
                step = after_policy(await call_user(ctx.permission_policy, ctx, call.name, args))
            elif isinstance(step, ApprovalNeeded):
                request = ApprovalRequest(call.call_id, call.name, _encode(args).decode(), step.prompt)
                if ctx.approval_handler is not None:
                    report.events.append(ApprovalRequested(call.call_id, call.name, args))
                    answer = await call_user(ctx.approval_handler, request)
                    step = after_approval(call.name, effect, args, settings, step, answer)
                elif ctx.suspend_on_approval:
                    report.outcome = ApprovalPending(call.call_id, step.prompt)
                    return report
                else:
                    step = resolve_without_handler(step)
        decision = step.decision
        if isinstance(decision, Deny):
            return deny(decision.reason)
        if isinstance(decision, Replace):
            args = decision.args

    tool_ctx = ToolContext(
        ctx.user_ctx,
        ctx.state,
        env.actions,
        ctx.cancel,
        ctx.tracer,
        call.call_id,
        env.run_id,
        env.spec.name,
        ctx.agent_depth,
        env.spec.config.max_agent_depth,
        ctx.permission_mode,
    )
    try:
        value = await tool.invoke(tool_ctx, args if isinstance(args, dict) else {})
        output: JsonValue = value if isinstance(value, str) else _decode(_encode(value))
    except ToolError as exc:
        report.outcome = ToolRaised(call.call_id, _scrubbed(exc.failure, ctx, secrets))
        return report
    except Exception as exc:  # the model sees the failure; the run goes on
        failure = ToolCrashed(f"{type(exc).__name__}: {exc}")
        report.outcome = ToolRaised(call.call_id, _scrubbed(failure, ctx, secrets))
        return report

    if hooks:
        verdict = await _hook_verdict(hooks, ctx, PostToolUse(call.name, args, output))
        report.injected.extend(verdict.injections)
        if verdict.denial is not None:
            return deny(verdict.denial.reason)
        output = replaced_value(verdict, output)
    text = tool_output_text(output)
    if secrets or ctx.redact_output:
        text = redact(text, secrets)
    report.outcome = ToolReturned(call.call_id, text)
    return report


__all__ = [
    "CallReport",
    "call_user",
    "check_guardrails",
    "notify_hooks",
    "permission_settings",
    "run_governed_tool",
    "run_secrets",
    "run_turn_hooks",
    "tool_output_text",
]
