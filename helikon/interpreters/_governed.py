"""Performing the run-level governance effects: turn hooks, guardrails and
the hooks that only observe.

Every decision is a pure fold from :mod:`helikon.governance`; this module
calls the user's code those folds need. A tool call's own pipeline is the
machine's (:mod:`helikon.loop._calls`); its steps are performed by
:mod:`helikon.interpreters._steps`.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import msgspec

from helikon.effects import (
    GuardrailsChecked,
    HooksRan,
)
from helikon.errors import GuardrailTripped
from helikon.governance import (
    Allow,
    HookDecision,
    HookEvent,
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

_encode = msgspec.json.Encoder(order="sorted").encode


async def call_user(fn: Any, *args: Any) -> Any:
    """Call user code that may be sync or async (or an object with ``__call__``)."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


def tool_output_text(value: object) -> str:
    """The text the model sees for a tool's return value (JSON with sorted
    keys unless a str: the same text the machine makes of a tool's output).

    msgspec encodes attrs classes, dataclasses, Structs, enums and datetimes
    directly; a value it cannot encode raises ``TypeError``.
    """
    if isinstance(value, str):
        return value
    return _encode(value).decode()


#: Fires hook ``index`` on ``event`` and is sent back its decision.
TurnHookFold = Generator[tuple[int, HookEvent], HookDecision, HooksRan]


def fold_turn_hooks(turn: int, count: int) -> TurnHookFold:
    """The turn-start hooks of ``turn`` (OnRunStart first on turn 1, then
    OnTurnStart), as a generator the interpreter drives: it yields which
    hook to fire on which event, is sent the decision, and returns the
    folded :class:`HooksRan` (the first deny stops every later hook).
    Shared by the live and scripted interpreters, which differ only in how
    they call a hook."""
    verdict = HookVerdict()
    events: list[HookEvent] = [OnRunStart(), OnTurnStart(turn)] if turn == 1 else [OnTurnStart(turn)]
    for event in events:
        inner = HookVerdict()
        for index in range(count):
            inner = inner.add((yield index, event))
            if inner.denied:
                break
        verdict = verdict.then(inner)
        if verdict.denied:
            break
    denial = verdict.denial
    return HooksRan(denial.reason if denial is not None else None, tuple(verdict.injections))


async def run_turn_hooks(turn: int, env: RunEnv) -> HooksRan:
    """Fire OnRunStart (turn 1) and OnTurnStart hooks; fold their decisions."""
    fold = fold_turn_hooks(turn, len(env.hooks))
    try:
        index, event = next(fold)
        while True:
            decision = await call_user(env.hooks[index], env.ctx, event)
            index, event = fold.send(Allow() if decision is None else decision)
    except StopIteration as done:
        result: HooksRan = done.value
        return result


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


__all__ = [
    "TurnHookFold",
    "call_user",
    "check_guardrails",
    "fold_turn_hooks",
    "notify_hooks",
    "run_turn_hooks",
    "tool_output_text",
]
