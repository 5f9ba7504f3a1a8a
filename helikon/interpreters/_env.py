"""What an interpreter needs to perform a run's effects.

The pure machine sees an agent as an :class:`~helikon.loop.AgentSpec`; an
interpreter also needs the objects with behaviour it names: the model, the
tool implementations, an instructions function, the run context. A
:class:`RunEnv` bundles them for one run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, final

import attrs

from helikon.context import Actions, RunContext
from helikon.ids import RunId
from helikon.loop import AgentSpec
from helikon.protocols import Model, Tool

#: Dynamic instructions: a function of the run context, sync or async.
InstructionsFn = Callable[[RunContext[Any]], "str | Awaitable[str]"]


@final
@attrs.frozen
class RunEnv:
    """One run's world.

    Args:
        spec: the agent as data.
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
        hooks: the agent's own hooks (the run context's fire after them).
        input_guardrails: the agent's own input guardrails.
        output_guardrails: the agent's own output guardrails.
        secrets: secret values to redact from tool output (captured at start).
        timeout_s: the seconds of the timeout that set ``deadline``.
        permissions: the run's ``PermissionSettings`` (derived from ``ctx`` once).
        memo: per-run memo of argument-independent permission folds.
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
    secrets: tuple[str, ...] = ()
    timeout_s: float | None = None
    permissions: Any = None
    memo: dict[Any, Any] = attrs.field(factory=dict, eq=False, repr=False)


__all__ = ["InstructionsFn", "RunEnv"]
