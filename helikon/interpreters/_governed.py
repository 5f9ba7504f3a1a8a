"""Performing the run-level governance effects: turn hooks, guardrails and
the hooks that only observe.

Every decision is a pure fold from :mod:`helikon.governance`; this module
calls the user's code those folds need. A tool call's own pipeline is the
machine's (:mod:`helikon.loop._calls`); its steps are performed by
:mod:`helikon.interpreters._steps`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import msgspec

from helikon.context import RunContext
from helikon.effects import (
    GuardrailsChecked,
    HooksRan,
)
from helikon.errors import GuardrailTripped
from helikon.governance import (
    Allow,
    HookVerdict,
    ModelOutput,
    OnRunStart,
    OnTurnStart,
    Pass,
    Tripwire,
    UserText,
    fold_guardrails,
    kind_label,
    tripwire_from_error,
)
from helikon.interpreters._env import RunEnv

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
    hooks = env.hooks
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
    hooks = env.hooks
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


__all__ = ["call_user", "check_guardrails", "notify_hooks", "run_turn_hooks", "tool_output_text"]
