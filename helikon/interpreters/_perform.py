"""The one performer of user code, for synchronous and asynchronous callers.

An effect that needs user code (a tool round, the turn hooks, the
guardrails, the observing hooks, the approval handler, the instructions
function) is performed by a *plan*: a generator that yields batches of
:class:`Call` (call these functions with these arguments; a batch may run
concurrently), is sent back what each call did (an
:data:`~helikon.loop.Answer`: ``Returned`` or ``Raised``, in batch order),
and returns the effect's result. What an answer means is the machine's
answer table (:mod:`helikon.loop._answers`); a plan only dispatches on the
effect's type and names the functions to call.

:func:`run_sync` drives a plan without an event loop (the scripted
interpreter); :func:`run_async` drives it under trio or asyncio (the live
interpreter and the Temporal worker), fanning a batch out under a limit. A
custom interpreter needs nothing more than "call this function with these
arguments and report what happened".
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from types import CoroutineType
from typing import Any, TypeAlias, TypeVar, final

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.context import Actions, RunContext
from helikon.effects import (
    ApprovalRequest,
    ApprovalsGiven,
    AskApprovals,
    AskPolicy,
    CallStep,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    FireHook,
    GuardrailsChecked,
    HooksNotified,
    HooksRan,
    InstructionsFailed,
    InstructionsRendered,
    InvokeTool,
    NotifyHooks,
    ReconcileTool,
    RenderInstructions,
    RunHooks,
    StepResult,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import StepError, ToolCrashed
from helikon.governance import HookEvent, ModelOutput, UserText
from helikon.ids import CallId
from helikon.loop import (
    Answer,
    MissingCallback,
    Raised,
    Returned,
    approval_decision,
    fold_turn_hooks,
    guardrails_checked,
    hook_step,
    instructions_result,
    policy_step,
    reconcile_step,
    tool_raised,
)
from helikon.tools import to_json

R = TypeVar("R")
_encode = msgspec.json.Encoder(order="sorted").encode


@final
@attrs.frozen
class Call:
    """Call ``fn(*args)``: one call of user code."""

    fn: Callable[..., object]
    args: tuple[object, ...] = ()


#: A plan: batches of calls out, their answers in, the effect's result at the end.
Plan: TypeAlias = Generator[tuple[Call, ...], tuple[Answer, ...], R]


def _missing(message: str) -> Call:
    def missing() -> object:
        raise MissingCallback(message)

    return Call(missing)


@final
@attrs.frozen
class Callbacks:
    """The user code a run's effects call, as an interpreter provides it.

    Args:
        ctx: the run context hooks, policies and guardrails receive.
        hooks: every hook in fire order.
        policy: the permission policy ``(ctx, tool, args)``, if any.
        approval_handler: the approval handler ``(request)``, if any.
        input_guardrails: the input guardrails ``(ctx, UserText)``.
        output_guardrails: the output guardrails ``(ctx, ModelOutput)``.
        instructions: the call that renders a turn's instructions, if any.
        tool: the call of a tool ``(call_id, name, args, actions)``, or None
            when the tool has no implementation.
        reconcile: the call of a tool's reconcile callback ``(call_id,
            name, args, actions)``, or None when it has none.
    """

    ctx: RunContext[Any]
    hooks: tuple[Any, ...] = ()
    policy: Any = None
    approval_handler: Any = None
    input_guardrails: tuple[Any, ...] = ()
    output_guardrails: tuple[Any, ...] = ()
    instructions: Callable[[int], Call] | None = None
    tool: Callable[[CallId, str, JsonValue, Actions], Call | None] | None = None
    reconcile: Callable[[CallId, str, JsonValue, Actions], Call | None] | None = None

    def hook(self, index: int, event: object) -> Call:
        if index >= len(self.hooks):
            return _missing(f"no hook number {index} (the run has {len(self.hooks)})")
        return Call(self.hooks[index], (self.ctx, event))

    def step(self, step: CallStep, actions: Actions) -> Call:
        """The call one step of a tool call's pipeline makes."""
        if type(step) is InvokeTool and self.tool is not None:  # the hot path: run a tool
            call = self.tool(step.call_id, step.tool, step.args, actions)
            return call if call is not None else _missing(f"tool {step.tool!r} has no implementation")
        match step:
            case FireHook(hook=index, event=event):
                return self.hook(index, event)
            case AskPolicy(tool=tool, args=args):
                if self.policy is None:
                    return _missing("no permission policy is installed")
                return Call(self.policy, (self.ctx, tool, args))
            case InvokeTool(call_id=call_id, tool=name, args=args):
                call = None if self.tool is None else self.tool(call_id, name, args, actions)
                return call if call is not None else _missing(f"tool {name!r} has no implementation")
            case ReconcileTool(call_id=call_id, tool=name, args=args):
                call = None if self.reconcile is None else self.reconcile(call_id, name, args, actions)
                return call if call is not None else _missing(f"tool {name!r} has no reconcile callback")


# -- what a tool's value becomes -------------------------------------------------------------


def tool_returned(call_id: CallId, value: object, tool: str | None = None) -> StepResult:
    """A tool's return value as JSON data in normal form (text stays text).
    A value with no JSON form (binary data included; NaN, a lone surrogate, a
    non-string key) is a crash of the tool the model sees, named when
    ``tool`` is given."""
    try:
        output: JsonValue = to_json(value)
    except (TypeError, msgspec.EncodeError) as exc:
        who = "the tool" if tool is None else f"tool {tool!r}"
        return ToolRaised(call_id, ToolCrashed(f"{who} returned a value with no JSON form: {exc}"))
    return ToolReturned(call_id, output)


def tool_answered(call_id: CallId, output: JsonValue) -> StepResult:
    """What :meth:`FunctionTool.invoke <helikon.tools.FunctionTool.invoke>`
    returned, already in normal form (``tool_returned`` of it is itself)."""
    return ToolReturned(call_id, output)


def step_result(step: CallStep, answer: Answer) -> StepResult:
    """What one pipeline step's answer becomes (the answer table's row)."""
    if type(step) is InvokeTool and type(answer) is Returned:  # the hot path: a tool answered
        return tool_returned(step.call_id, answer.value, step.tool)
    match step:
        case FireHook(call_id=call_id):
            return hook_step(call_id, answer)
        case AskPolicy(call_id=call_id):
            return policy_step(call_id, answer)
        case InvokeTool(call_id=call_id, tool=name):
            match answer:
                case Returned(value=value):
                    return tool_returned(call_id, value, name)
                case Raised(error=error):
                    return tool_raised(call_id, error)
        case ReconcileTool(call_id=call_id):
            return reconcile_step(call_id, answer)


# -- plans ------------------------------------------------------------------------------------


def tool_round(steps: Sequence[CallStep], cb: Callbacks) -> Plan[ToolsExecuted]:
    """A round of tool-call pipeline steps, all at once. Escalation is this
    round's (a fresh :class:`Actions`), so the flag is the state's to keep."""
    actions = Actions()
    answers = yield tuple(cb.step(s, actions) for s in steps)
    results = tuple(step_result(s, a) for s, a in zip(steps, answers, strict=True))
    return ToolsExecuted(results, actions.escalated)


def one_step(step: CallStep, cb: Callbacks, actions: Actions) -> Plan[StepResult]:
    """One step of a tool call's pipeline (the Temporal worker's activity)."""
    (answer,) = yield (cb.step(step, actions),)
    return step_result(step, answer)


def turn_hooks(turn: int, cb: Callbacks) -> Plan[HooksRan]:
    """The turn-start hooks, one after another, folded by the machine's table."""
    fold = fold_turn_hooks(turn, len(cb.hooks))
    try:
        index, event = next(fold)
        while True:
            (answer,) = yield (cb.hook(index, event),)
            index, event = fold.send(answer)
    except StopIteration as done:
        result: HooksRan = done.value
        return result


def guardrails(stage: str, text: str, cb: Callbacks) -> Plan[GuardrailsChecked]:
    """The stage's guardrails at once; the first tripwire in declaration order."""
    subject: object
    if stage == "input":
        checks, subject = (*cb.input_guardrails, *cb.ctx.hooks.input_guardrails), UserText(text)
    else:
        checks, subject = (*cb.output_guardrails, *cb.ctx.hooks.output_guardrails), ModelOutput(text)
    answers = yield tuple(Call(g, (cb.ctx, subject)) for g in checks)
    return guardrails_checked(answers, lambda raw: _encode(raw).decode())


def notify(event: HookEvent, cb: Callbacks) -> Plan[HooksNotified]:
    """The hooks that only observe, in order; their answers are ignored
    (a failure is logged, never fatal: the book's OnRunComplete)."""
    for index in range(len(cb.hooks)):
        (answer,) = yield (cb.hook(index, event),)
        if type(answer) is Raised:
            logging.getLogger("helikon.hooks").warning(
                "a %s hook failed: %s", type(event).__name__, answer.error
            )
    return HooksNotified()


def approvals(requests: Sequence[ApprovalRequest], cb: Callbacks) -> Plan[ApprovalsGiven]:
    """The approval handler asked about every request at once."""
    handler = cb.approval_handler
    calls = tuple(
        Call(handler, (r,)) if handler is not None else _missing("no approval handler is installed")
        for r in requests
    )
    answers = yield calls
    pairs = zip(requests, answers, strict=True)
    return ApprovalsGiven(tuple(approval_decision(r.call_id, a, r.path) for r, a in pairs))


def instructions(turn: int, cb: Callbacks) -> Plan[InstructionsRendered | InstructionsFailed]:
    """A turn's dynamic instructions."""
    if cb.instructions is None:
        raise StepError("the agent has no instructions function")
    (answer,) = yield (cb.instructions(turn),)
    return instructions_result(answer)


def plan_for(effect: Effect, cb: Callbacks, limit: int | None = None) -> Plan[EffectResult] | None:
    """The plan that performs ``effect``, if it calls user code (None for a
    model call, a tree's effects, a stored output, ...): what a custom
    interpreter drives with :func:`run_sync` or :func:`run_async` (or its
    own loop: call each :class:`Call`, report :class:`~helikon.loop.Returned`
    or :class:`~helikon.loop.Raised`)."""
    match effect:
        case ExecuteTools(steps=steps):
            return tool_round(steps, cb)
        case AskApprovals(requests=requests):
            return approvals(requests, cb)
        case CheckGuardrails(stage=stage, text=text):
            return guardrails(stage, text, cb)
        case RunHooks(turn=turn):
            return turn_hooks(turn, cb)
        case NotifyHooks(event=event):
            return notify(event, cb)
        case RenderInstructions(turn=turn):
            return instructions(turn, cb)
    return None


# -- drivers ----------------------------------------------------------------------------------


def answer_sync(call: Call) -> Answer:
    """Call user code synchronously and report what happened.

    Raises:
        StepError: the callback is asynchronous (there is no event loop here).
    """
    try:
        value = call.fn(*call.args)
    except Exception as exc:
        return Raised(exc)
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        raise StepError(
            "the test interpreter calls only synchronous hooks, policies, guardrails and handlers"
        )
    return Returned(value)


async def answer_async(call: Call) -> Answer:
    """Call user code (sync or async) and report what happened; a
    cancellation is not an answer and propagates."""
    try:
        value = call.fn(*call.args)
        # a coroutine (an ``async def``'s call) or nothing (a hook's usual
        # answer) told apart without ``inspect.isawaitable``'s checks
        if isinstance(value, CoroutineType) or (value is not None and inspect.isawaitable(value)):
            value = await value
    except Exception as exc:
        return Raised(exc)
    return Returned(value)


def run_sync(plan: Plan[R]) -> R:
    """Drive ``plan`` calling user code one call after another."""
    try:
        batch = next(plan)
        while True:
            batch = plan.send(tuple(answer_sync(c) for c in batch))
    except StopIteration as done:
        result: R = done.value
        return result


async def run_async(plan: Plan[R], limit: int | None = None) -> R:
    """Drive ``plan``, each batch's calls concurrently (at most ``limit`` at once)."""
    try:
        batch = next(plan)
        while True:
            if len(batch) == 1:
                batch = plan.send((await answer_async(batch[0]),))
            else:
                batch = plan.send(tuple(await _fan_out([_bind(c) for c in batch], limit)))
    except StopIteration as done:
        result: R = done.value
        return result


async def run_tool_round(steps: Sequence[CallStep], cb: Callbacks, limit: int | None = None) -> ToolsExecuted:
    """``run_async(tool_round(steps, cb), limit)``; a round of one step (the
    common case) without driving a plan generator."""
    if len(steps) != 1:
        return await run_async(tool_round(steps, cb), limit)
    (step,) = steps
    actions = Actions()
    answer = await answer_async(cb.step(step, actions))
    return ToolsExecuted((step_result(step, answer),), actions.escalated)


def _bind(call: Call) -> Callable[[], Awaitable[Answer]]:
    return lambda: answer_async(call)


async def _fan_out(work: list[Callable[[], Awaitable[R]]], limit: int | None) -> list[R]:
    """Run ``work`` concurrently (at most ``limit`` at once); results in the
    order of ``work``, whatever order they finish in."""
    if len(work) == 1:
        return [await work[0]()]
    if not work:
        return []
    import anyio

    done: list[R | None] = [None] * len(work)
    limiter = anyio.CapacityLimiter(limit) if limit is not None else None

    async def one(index: int) -> None:
        if limiter is None:
            done[index] = await work[index]()
        else:
            async with limiter:
                done[index] = await work[index]()

    async with anyio.create_task_group() as group:
        for index in range(len(work)):
            group.start_soon(one, index)
    return [item for item in done if item is not None]  # every task ran to its end


__all__ = [
    "Call",
    "Callbacks",
    "Plan",
    "answer_async",
    "answer_sync",
    "approvals",
    "guardrails",
    "instructions",
    "notify",
    "one_step",
    "plan_for",
    "run_async",
    "run_sync",
    "run_tool_round",
    "step_result",
    "tool_answered",
    "tool_returned",
    "tool_round",
    "turn_hooks",
]
