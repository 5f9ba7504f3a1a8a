"""Performing the steps of a tool call's pipeline: calling user code, no more.

The machine decides everything around a tool call (:mod:`helikon.loop._calls`);
what it cannot do is call the user's hooks, permission policy, approval
handler and tools. Each function here calls one of them for one step and
turns what came back (or what was raised) into the step's result, as data:

- a hook answers a ``HookDecision`` (``None`` counts as ``Allow()``);
- a policy answers a ``PermissionDecision``;
- an approval handler answers ``Allow()`` or ``Deny(reason)``;
- a tool returns a value (text, or anything msgspec encodes) or raises
  ``ToolError`` (a failure the model sees) or anything else (a crash).

A hook or policy that raises, or answers something else, is reported with
:class:`~helikon.effects.CallbackRaised` and the machine denies the call
(governance fails closed); an approval handler that does is a denial.

The live, scripted and Temporal interpreters all perform steps with these
functions; they differ only in how they call user code (awaiting, or not).
"""

from __future__ import annotations

from typing import Any

import msgspec

from helikon._json import JsonValue
from helikon.context import ToolContext
from helikon.effects import (
    ApprovalDecision,
    ApprovalRequest,
    AskPolicy,
    CallbackRaised,
    CallStep,
    FireHook,
    HookAnswered,
    InvokeTool,
    PolicyAnswered,
    StepResult,
    ToolRaised,
    ToolReturned,
)
from helikon.errors import ToolCrashed, ToolError
from helikon.governance import (
    Allow,
    AskUser,
    Deny,
    InjectSystemMessage,
    Replace,
    ReplaceInput,
    ReplaceOutput,
)
from helikon.ids import CallId
from helikon.interpreters._env import RunEnv
from helikon.interpreters._governed import call_user
from helikon.tools import to_json

_HOOK_DECISIONS = (Allow, Deny, ReplaceInput, ReplaceOutput, InjectSystemMessage)
_POLICY_DECISIONS = (Allow, Deny, AskUser, Replace)


def raised(exc: BaseException) -> str:
    """How an exception from user code is described."""
    return f"{type(exc).__name__}: {exc}"


def hook_answered(call_id: CallId, value: object) -> StepResult:
    """A hook's answer as a step result."""
    if value is None:
        return HookAnswered(call_id, Allow())
    if isinstance(value, _HOOK_DECISIONS):
        return HookAnswered(call_id, value)
    return CallbackRaised(call_id, f"an answer that is not a hook decision: {value!r}")


def policy_answered(call_id: CallId, value: object) -> StepResult:
    """A permission policy's answer as a step result."""
    if isinstance(value, _POLICY_DECISIONS):
        return PolicyAnswered(call_id, value)
    return CallbackRaised(call_id, f"an answer that is not a permission decision: {value!r}")


def approval_answered(request: ApprovalRequest, value: object) -> ApprovalDecision:
    """An approval handler's answer as a decision (anything but ``Allow()`` denies)."""
    if isinstance(value, Allow):
        return ApprovalDecision(request.call_id, True)
    if isinstance(value, Deny):
        return ApprovalDecision(request.call_id, False, value.reason)
    return ApprovalDecision(request.call_id, False, f"the approval handler answered {value!r}")


def tool_returned(call_id: CallId, value: object, tool: str | None = None) -> StepResult:
    """A tool's return value as JSON data in normal form (text stays text).

    A value with no JSON form (binary data included: it does not silently
    become base64; NaN, a lone surrogate, a non-string key) is a crash of
    the tool the model sees, named when ``tool`` is given.
    """
    try:
        output: JsonValue = to_json(value)
    except (TypeError, msgspec.EncodeError) as exc:
        who = "the tool" if tool is None else f"tool {tool!r}"
        return ToolRaised(call_id, ToolCrashed(f"{who} returned a value with no JSON form: {exc}"))
    return ToolReturned(call_id, output)


def tool_raised(call_id: CallId, exc: Exception) -> StepResult:
    """An exception from a tool as a step result."""
    if isinstance(exc, ToolError):
        return ToolRaised(call_id, exc.failure)
    return ToolRaised(call_id, ToolCrashed(raised(exc)))


async def perform_step(step: CallStep, env: RunEnv) -> StepResult:
    """Perform one step of a tool call's pipeline for real."""
    ctx = env.ctx
    match step:
        case FireHook(call_id=call_id, hook=index, event=event):
            if index >= len(env.hooks):
                return CallbackRaised(call_id, f"no hook number {index} (the run has {len(env.hooks)})")
            try:
                return hook_answered(call_id, await call_user(env.hooks[index], ctx, event))
            except Exception as exc:
                return CallbackRaised(call_id, raised(exc))
        case AskPolicy(call_id=call_id, tool=asked, args=args):
            if ctx.permission_policy is None:
                return CallbackRaised(call_id, "no permission policy is installed")
            try:
                return policy_answered(call_id, await call_user(ctx.permission_policy, ctx, asked, args))
            except Exception as exc:
                return CallbackRaised(call_id, raised(exc))
        case InvokeTool(call_id=call_id, tool=name, args=args):
            tool = env.tools.get(name)
            if tool is None:
                return ToolRaised(call_id, ToolCrashed(f"tool {name!r} has no implementation"))
            try:
                value = await tool.invoke(_tool_context(env, call_id), args if isinstance(args, dict) else {})
            except Exception as exc:  # the model sees the failure; the run goes on
                return tool_raised(call_id, exc)
            return tool_returned(call_id, value, name)


async def ask_approval(request: ApprovalRequest, env: RunEnv) -> ApprovalDecision:
    """Ask the run's approval handler about one call."""
    handler = env.ctx.approval_handler
    if handler is None:
        return ApprovalDecision(request.call_id, False, "no approval handler is installed")
    try:
        return approval_answered(request, await call_user(handler, request))
    except Exception as exc:
        return ApprovalDecision(request.call_id, False, f"the approval handler raised {raised(exc)}")


def _tool_context(env: RunEnv, call_id: CallId) -> ToolContext[Any]:
    ctx = env.ctx
    return ToolContext(
        ctx.user_ctx,
        ctx.state,
        env.actions,
        ctx.cancel,
        ctx.tracer,
        call_id,
        env.run_id,
        env.spec.name,
        ctx.agent_depth,
        env.spec.config.max_agent_depth,
        ctx.permission_mode,
        ctx.governed(),
    )


__all__ = [
    "approval_answered",
    "ask_approval",
    "hook_answered",
    "perform_step",
    "policy_answered",
    "raised",
    "tool_raised",
    "tool_returned",
]
