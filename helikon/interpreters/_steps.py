"""The user code of a run's environment, as the performer calls it.

:func:`callbacks_of` names, for a :class:`RunEnv`, the functions every
effect that needs user code calls (hooks, the permission policy, the
approval handler, guardrails, the instructions function and the tools);
the plans of :mod:`helikon.interpreters._perform` call them and the
machine's answer table (:mod:`helikon.loop._answers`) says what their
answers mean. The live interpreter and the Temporal worker perform steps
with these functions; the scripted interpreter has its own
:class:`~helikon.interpreters._perform.Callbacks` over the same plans.
"""

from __future__ import annotations

from typing import Any

from helikon._json import JsonValue
from helikon.context import Actions, ToolContext
from helikon.effects import ApprovalDecision, ApprovalRequest, CallStep, StepResult
from helikon.ids import CallId
from helikon.interpreters._env import RunEnv
from helikon.interpreters._perform import Call, Callbacks, approvals, one_step, run_async
from helikon.tools._decorator import context_free


def callbacks_of(env: RunEnv) -> Callbacks:
    """The user code the effects of the run ``env`` call (made once per environment)."""
    made = env.derived.get("callbacks")
    if made is None:
        made = env.derived["callbacks"] = _callbacks(env)
    callbacks: Callbacks = made
    return callbacks


def _callbacks(env: RunEnv) -> Callbacks:
    ctx = env.ctx
    render = env.instructions

    def tool(call_id: CallId, name: str, args: JsonValue, actions: Actions) -> Call | None:
        implementation = env.tools.get(name)
        if implementation is None:
            return None
        # A non-object argument reaches the tool as it is: the machine
        # validated it against the tool's schema, and nothing is made up here.
        # A function tool that takes no context is given none (its ``invoke``
        # passes the context to the function only when it takes one).
        if context_free(implementation):
            return Call(implementation.invoke, (None, args))
        return Call(implementation.invoke, (_tool_context(env, call_id, actions), args))

    def reconcile(call_id: CallId, name: str, args: JsonValue, actions: Actions) -> Call | None:
        callback = getattr(env.tools.get(name), "reconcile", None)
        if callback is None:
            return None
        return Call(callback, (_tool_context(env, call_id, actions), args))

    return Callbacks(
        ctx,
        env.hooks,
        ctx.permission_policy,
        ctx.approval_handler,
        env.input_guardrails,
        env.output_guardrails,
        None if render is None else (lambda turn: Call(render, (ctx,))),
        tool,
        reconcile,
    )


async def perform_step(step: CallStep, env: RunEnv, actions: Actions | None = None) -> StepResult:
    """Perform one step of a tool call's pipeline for real (``actions``
    collects what the tool signalled; a fresh record by default)."""
    return await run_async(one_step(step, callbacks_of(env), actions if actions is not None else Actions()))


async def ask_approval(request: ApprovalRequest, env: RunEnv) -> ApprovalDecision:
    """Ask the run's approval handler about one call."""
    given = await run_async(approvals((request,), callbacks_of(env)))
    return given.decisions[0]


def _tool_context(env: RunEnv, call_id: CallId, actions: Actions) -> ToolContext[Any]:
    ctx = env.ctx
    governed = env.derived.get("governed")
    if governed is None:  # the run's permission record: one per run
        governed = env.derived["governed"] = ctx.governed()
    return ToolContext(
        ctx.user_ctx,
        ctx.state,
        actions,
        ctx.cancel,
        ctx.tracer,
        call_id,
        env.run_id,
        env.spec.name,
        ctx.agent_depth,
        env.spec.config.max_agent_depth,
        ctx.permission_mode,
        governed,
        prices=ctx.prices,
    )


__all__ = ["ask_approval", "callbacks_of", "perform_step"]
