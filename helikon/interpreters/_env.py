"""What an interpreter needs to perform a run's effects, built in one place.

The pure machine sees an agent as an :class:`~helikon.loop.AgentSpec`; an
interpreter also needs the objects with behaviour it names: the model, the
tool implementations, an instructions function, the hooks and the run
context. A :class:`RunEnv` bundles them for one run, and :func:`build_env`
is the one function that assembles it — for ``agent.run``, the step API,
workflow children and the Temporal worker alike — including the governance
configuration the machine reads (:func:`governance_of`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, final

import attrs

from helikon.config import RunConfig
from helikon.context import Actions, RunContext
from helikon.governance import GuardRule, PermissionSettings, secret_values_from_environment
from helikon.ids import RunId
from helikon.loop import AgentSpec, ApprovalRoute, Governance
from helikon.pricing import ModelPrice
from helikon.protocols import Model, Tool

#: Dynamic instructions: a function of the run context, sync or async.
InstructionsFn = Callable[[RunContext[Any]], "str | Awaitable[str]"]


@final
@attrs.frozen
class Limits:
    """The limits a run inherits from its parent: the deadline (and the
    timeout that set it) and the agent-depth cap."""

    deadline: float | None = None
    timeout_s: float | None = None
    max_agent_depth: int | None = None

    @classmethod
    def of(cls, env: RunEnv) -> Limits:
        """The limits a child of the run ``env`` must respect."""
        return cls(env.deadline, env.timeout_s, env.spec.config.max_agent_depth)


@final
@attrs.frozen
class RunEnv:
    """One run's world.

    Args:
        spec: the agent as data (governance included).
        model: the model to call.
        tools: tool implementations by name.
        instructions: the dynamic instructions function, if any.
        ctx: the run context.
        run_id: the run's id.
        deadline: ``anyio.current_time()`` at which the run times out.
        actions: signals tools raised during the run.
        machine: the pure machine to drive (the agent loop of ``spec`` when None).
        children: sub-agents by key (workflow children, handoff targets).
        path: where this run sits in an agent tree (empty at the root).
        hooks: every hook in fire order: the agent's own, then the run context's.
        input_guardrails: the agent's own input guardrails.
        output_guardrails: the agent's own output guardrails.
        timeout_s: the seconds of the timeout that set ``deadline``.
        subenvs: the environments of an agent tree's sub-machines by path
            (built on first use, see :func:`helikon.interpreters._tree_env.env_at`).
    """

    spec: AgentSpec
    model: Model
    tools: Mapping[str, Tool]
    instructions: InstructionsFn | None
    ctx: RunContext[Any]
    run_id: RunId
    deadline: float | None = None
    actions: Actions = attrs.field(factory=Actions)
    machine: Any = None
    children: Mapping[str, Any] = attrs.field(factory=dict)
    path: tuple[str | int, ...] = ()
    hooks: tuple[Any, ...] = ()
    input_guardrails: tuple[Any, ...] = ()
    output_guardrails: tuple[Any, ...] = ()
    timeout_s: float | None = None
    subenvs: dict[tuple[str, ...], RunEnv] = attrs.field(factory=dict, eq=False, repr=False)
    #: What interpreters derive once per run from this environment (the
    #: callbacks its effects call, see :func:`helikon.interpreters._steps.callbacks_of`).
    derived: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values the run scrubs from tool output."""
        return self.spec.governance.secrets


_last_settings: tuple[tuple[object, ...], PermissionSettings] | None = None


def permission_settings(ctx: RunContext[Any]) -> PermissionSettings:
    """The run context's permission configuration, as the pure pipeline's data.

    Runs under one context get the very same settings object (a one-entry
    memo on the context's rule tuples, by identity), so the machine's
    memoised permission folds hit by identity instead of comparing rules.
    """
    global _last_settings
    key = (
        ctx.permission_mode,
        ctx.deny_rules,
        ctx.guard_rules,
        ctx.allow_rules,
        ctx.default_guards,
        ctx.permission_policy is not None,
    )
    last = _last_settings
    if last is not None and all(a is b for a, b in zip(last[0], key, strict=True)):
        return last[1]
    guards = (*GuardRule.destructive_defaults(), *ctx.guard_rules) if ctx.default_guards else ctx.guard_rules
    settings = PermissionSettings(
        mode=ctx.permission_mode,
        deny_rules=tuple(ctx.deny_rules),
        guard_rules=tuple(guards),
        allow_rules=tuple(ctx.allow_rules),
        has_policy=ctx.permission_policy is not None,
    )
    _last_settings = (key, settings)
    return settings


_environment_secrets: tuple[tuple[tuple[Any, Any], ...], tuple[str, ...]] = ((), ())


def run_secrets(ctx: RunContext[Any]) -> tuple[str, ...]:
    """The secret values to redact from tool output: secret-named environment
    variables, captured now (at run start), plus the context's extras.

    The environment scan is memoised on the environment's contents (it costs
    tens of microseconds and the environment rarely changes between runs).
    """
    global _environment_secrets
    if not ctx.redact_output:
        return ()
    # the raw environment (CPython keeps it as bytes in ``_data``): copied at
    # C speed, where ``os.environ.items()`` decodes every name and value
    raw = getattr(os.environ, "_data", None)
    snapshot = tuple(raw.items() if isinstance(raw, dict) else os.environ.items())
    if snapshot != _environment_secrets[0]:
        _environment_secrets = (snapshot, secret_values_from_environment(dict(os.environ)))
    return (*_environment_secrets[1], *ctx.extra_secrets)


def hook_name(hook: object) -> str:
    """How a hook is named in a spec and a trace: its qualified name."""
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    return str(name)


def governance_of(ctx: RunContext[Any], hooks: tuple[Any, ...]) -> Governance:
    """The governance configuration the machine reads, from the run context
    and the run's hooks (in fire order)."""
    if ctx.approval_handler is not None:
        approvals = ApprovalRoute.HANDLER
    elif ctx.suspend_on_approval:
        approvals = ApprovalRoute.SUSPEND
    else:
        approvals = ApprovalRoute.DENY
    return Governance(
        permissions=permission_settings(ctx),
        hooks=tuple(hook_name(h) for h in hooks),
        approvals=approvals,
        redact=ctx.redact_output,
        secrets=run_secrets(ctx),
    )


def inherit(config: RunConfig, parent: Limits | None) -> tuple[RunConfig, float | None, float | None]:
    """A run's config, deadline and timeout seconds, given its parent's limits:
    the earlier deadline wins, and the depth cap is the lower one."""
    deadline: float | None = None
    timeout_s = config.timeout
    if config.timeout is not None:
        import anyio

        try:
            deadline = anyio.current_time() + config.timeout
        except RuntimeError:
            # No event loop (a run compiled from synchronous code, the step
            # API's ``start``): there is nothing to cut short here, and the
            # machine keeps the deadline from the clock readings it is given.
            deadline = None
    if parent is not None:
        if parent.deadline is not None and (deadline is None or parent.deadline < deadline):
            deadline, timeout_s = parent.deadline, parent.timeout_s
        if parent.max_agent_depth is not None and parent.max_agent_depth < config.max_agent_depth:
            config = attrs.evolve(config, max_agent_depth=parent.max_agent_depth)
    return config, deadline, timeout_s


def price_of(ctx: RunContext[Any], model: object) -> ModelPrice | None:
    """The price of ``model`` from the run's price source (None: no source,
    or the source does not know the model)."""
    source = ctx.prices
    model_id = getattr(model, "model_id", None)
    if source is None or not isinstance(model_id, str) or not model_id:
        return None
    provider = getattr(model, "provider", "")
    return source.price(provider if isinstance(provider, str) else "", model_id)


def build_env(
    spec: AgentSpec,
    ctx: RunContext[Any],
    *,
    run_id: RunId,
    model: Model,
    tools: Mapping[str, Tool] | None = None,
    instructions: InstructionsFn | None = None,
    hooks: tuple[Any, ...] = (),
    input_guardrails: tuple[Any, ...] = (),
    output_guardrails: tuple[Any, ...] = (),
    config: RunConfig | None = None,
    parent: Limits | None = None,
    actions: Actions | None = None,
    machine: Any = None,
    children: Mapping[str, Any] | None = None,
    path: tuple[str | int, ...] = (),
) -> RunEnv:
    """The one place a run's environment is assembled.

    It completes ``spec`` with what the run context adds: the governance
    configuration (permissions, the hooks in fire order, where approvals go,
    redaction), whether guardrails and turn hooks exist, and the limits the
    run inherits from ``parent``.

    Args:
        spec: the agent as data.
        ctx: the run context.
        run_id: the run's id.
        model: the model to call.
        tools: tool implementations by name.
        instructions: the dynamic instructions function, if any.
        hooks: the agent's own hooks (the context's fire after them).
        input_guardrails: the agent's own input guardrails.
        output_guardrails: the agent's own output guardrails.
        config: overrides the spec's run config.
        parent: the limits of the run this one is a child of.
        actions: the signals record tools write to.
        machine: the pure machine, when not the agent loop.
        children: sub-agents by key.
        path: where the run sits in an agent tree.
    """
    registry = ctx.hooks
    fired = (*hooks, *registry.hooks)
    limited, deadline, timeout_s = inherit(config or spec.config, parent)
    spec = attrs.evolve(
        spec,
        config=limited,
        input_guardrails=bool(input_guardrails or registry.input_guardrails),
        output_guardrails=bool(output_guardrails or registry.output_guardrails),
        hooks=bool(fired),
        governance=governance_of(ctx, fired),
        price=price_of(ctx, model),
    )
    return RunEnv(
        spec,
        model,
        tools or {},
        instructions,
        ctx,
        run_id,
        deadline,
        actions or Actions(),
        machine=machine,
        children=children or {},
        path=path,
        hooks=fired,
        input_guardrails=input_guardrails,
        output_guardrails=output_guardrails,
        timeout_s=timeout_s,
    )


__all__ = [
    "InstructionsFn",
    "price_of",
    "Limits",
    "RunEnv",
    "build_env",
    "governance_of",
    "hook_name",
    "inherit",
    "permission_settings",
    "run_secrets",
]
