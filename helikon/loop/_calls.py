"""One tool call's pipeline, as a small pure machine.

The book's order for one call (``docs/governance.md``, "How they compose")::

    PreToolUse hooks -> permissions (deny > guard > allow > mode > policy >
    approval) -> the tool -> PostToolUse hooks -> redaction

A :class:`ToolCallState` says where a call is in it. Every decision is made
here, from the folds of :mod:`helikon.governance`: hook verdicts (first deny
wins, last rewrite wins, injections accumulate), the permission steps, the
check of rewritten arguments against the tool's schema, and the redaction of
the output. Every call of user code is a step the interpreter performs for
this call (:data:`~helikon.effects.CallStep`), and the step a call waits on is
a function of its state (:func:`pending_step`), so a state saved anywhere
resumes through the same pure steps.

A call whose tool was asked to run is *started* (:class:`Running`): a state
saved from then on says so, and is saved before the tool runs by any driver
that stores the state after every step (the outcome that moves a call to
:class:`Running` is the one whose effect runs the tool). Resuming such a
state never silently runs the tool again (:func:`resumed_step`): a tool that
may be re-run (declared idempotent, or read-only) runs again with the same
call id; any other is *reconciled*: its ``reconcile`` callback says whether
it happened and with what result, and without one the model is told that
the outcome is unknown. The same holds when an interpreter reports that a
started call did not come back (:class:`~helikon.effects.ToolOutcomeUnknown`).

An approval stands in for the "ask" step of the call's permission pipeline
and nothing else: it is fed to :func:`~helikon.governance.after_approval`,
after which the remaining guards, the allow rules, the mode and the policy
still apply.
"""

from __future__ import annotations

import functools
from typing import Final, TypeAlias, assert_never, final

import attrs
import msgspec

from helikon._json import JsonValue
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
    ReconcileTool,
    StepResult,
    ToolNotPerformed,
    ToolOutcomeUnknown,
    ToolRaised,
    ToolReturned,
)
from helikon.errors import Denied, InvalidArgs, ToolCrashed, ToolFailure, describe
from helikon.events import AgentEvent, PermissionDenied
from helikon.governance import (
    MIN_SECRET_LENGTH,
    Allow,
    ApprovalNeeded,
    AskUser,
    Decided,
    Deny,
    HookVerdict,
    InjectSystemMessage,
    PermissionSettings,
    PermissionStep,
    PolicyNeeded,
    PostToolUse,
    PreToolUse,
    Replace,
    ReplaceInput,
    ReplaceOutput,
    after_approval,
    after_policy,
    fold_permissions,
    redact,
    redact_json,
    replaced_value,
    resolve_without_handler,
)
from helikon.items import ToolCall, ToolResult
from helikon.loop._spec import AgentSpec, ApprovalRoute, Governance
from helikon.loop._validate import parse_json, schema_errors
from helikon.model import ToolDef, ToolEffect

# -- stages ------------------------------------------------------------------------------


@attrs.frozen
class PreHooks:
    """PreToolUse hooks fire; hook number ``hook`` was asked."""

    hook: int = 0
    verdict: HookVerdict = HookVerdict()


@attrs.frozen
class Permitting:
    """The permission pipeline waits for the policy (``PolicyNeeded``) or a
    human (``ApprovalNeeded``)."""

    step: PolicyNeeded | ApprovalNeeded


@attrs.frozen
class Running:
    """The tool was asked to run: the call is *started*. Resumed from a
    stored state, it is re-run or reconciled, never silently run again
    (:func:`resumed_step`). ``reconciles`` counts the times its
    ``reconcile`` callback answered that it had not happened (each time it
    was run again): at :data:`MAX_RECONCILES` it is not run again."""

    reconciles: int = 0


@attrs.frozen
class Reconciling:
    """The call was started and did not come back (``reason`` says how): its
    ``reconcile`` callback is asked what became of it (``reconciles`` as
    :class:`Running`'s)."""

    reason: str = ""
    reconciles: int = 0


#: The most times one started call is reconciled as "not performed" and run
#: again: a call whose workers keep dying would otherwise be reconciled and
#: run forever. The answer that reaches it settles the call with the
#: "outcome unknown" error result instead (the model decides what next).
MAX_RECONCILES: Final = 3


@attrs.frozen
class PostHooks:
    """PostToolUse hooks fire on the tool's ``output``; hook ``hook`` was asked."""

    output: JsonValue
    hook: int = 0
    verdict: HookVerdict = HookVerdict()


@attrs.frozen
class Settled:
    """The call is over: ``result`` joins the conversation. ``invalid`` holds
    the schema errors when the tool itself refused the arguments."""

    result: ToolResult
    invalid: tuple[str, ...] = ()


#: A call that runs (its first run): stages are frozen values, so one serves all.
RUNNING: Final = Running()

#: Where a call is in its pipeline.
CallStage: TypeAlias = PreHooks | Permitting | Running | Reconciling | PostHooks | Settled


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class ToolCallState:
    """One tool call of a round and where its pipeline is.

    Args:
        call: the call as the model made it.
        args: its arguments now (after any rewrite by a hook or the policy).
        stage: where the pipeline is.
        injected: system messages its hooks asked for, in fire order.
    """

    call: ToolCall
    args: JsonValue
    stage: CallStage
    injected: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        return type(self.stage) is Settled

    def at(self, stage: CallStage) -> ToolCallState:
        """This call, moved to ``stage`` (the hot path: no ``attrs.evolve``)."""
        return ToolCallState(self.call, self.args, stage, self.injected)


#: A call's new state and the events its step emitted.
Advanced: TypeAlias = tuple[ToolCallState, tuple[AgentEvent, ...]]

# -- the steps ---------------------------------------------------------------------------


def settled(call: ToolCall, result: ToolResult) -> ToolCallState:
    """A call the loop answered itself (unknown tool, invalid arguments)."""
    return ToolCallState(call, None, Settled(result))


@final
class _Unparsed:
    """The arguments of a call not parsed yet."""


UNPARSED: Final = _Unparsed()


def open_call(
    call: ToolCall, spec: AgentSpec, args: JsonValue | _Unparsed = UNPARSED, tool: ToolDef | None = None
) -> Advanced:
    """A runnable call entering its pipeline: up to its first step
    (``args`` and ``tool``: its parsed arguments and its tool, when known).

    >>> from helikon.ids import CallId
    >>> from helikon.model import ToolDef
    >>> spec = AgentSpec("a", tools=(ToolDef("t", "", {}),))
    >>> state, events = open_call(ToolCall(CallId("c1"), "t", "{}"), spec)
    >>> pending_step(state)
    InvokeTool(call_id='c1', tool='t', args={})
    """
    if type(args) is _Unparsed:  # ``args``: the call's arguments, when parsed already
        args, _ = parse_json(call.arguments or "{}")
    governance = spec.governance
    if not governance.hooks:
        # The hot path: a tool the rules allow whatever its arguments goes
        # straight to running (one state, not one per stage on the way).
        name = call.name
        if tool is None:
            tool = spec.tool(name)
        effect = tool.effect if tool is not None else ToolEffect.SIDE_EFFECT
        folded = argument_free_fold(name, effect, governance.permissions)
        if type(folded) is Decided and type(folded.decision) is Allow:
            return ToolCallState(call, args, RUNNING), ()
    state = ToolCallState(call, args, PreHooks())
    if governance.hooks:
        return state, ()
    return _permit(state, spec)


def pending_step(state: ToolCallState) -> CallStep | None:
    """The step of user code ``state`` waits on (None: settled, or waiting
    for a human)."""
    stage = state.stage
    call = state.call
    kind = type(stage)
    if kind is Running:  # the hot path: a call about to run
        return InvokeTool(call.call_id, call.name, state.args)
    if kind is Settled:
        return None
    match stage:
        case PreHooks(hook=hook):
            return FireHook(call.call_id, hook, PreToolUse(call.name, state.args))
        case Permitting(step=PolicyNeeded()):
            return AskPolicy(call.call_id, call.name, state.args)
        case Running():
            return InvokeTool(call.call_id, call.name, state.args)
        case Reconciling():
            return ReconcileTool(call.call_id, call.name, state.args)
        case PostHooks(output=output, hook=hook):
            return FireHook(call.call_id, hook, PostToolUse(call.name, state.args, output))
        case Permitting() | Settled():
            return None
        case _:
            assert_never(stage)


#: Why a started call of a stored state is reconciled.
RESUMED = "it was started before the run was resumed"


def may_rerun(spec: AgentSpec, name: str) -> bool:
    """Whether a started call of tool ``name`` whose result was lost may
    simply run again (with the same call id): the tool is declared
    idempotent, or only reads.

    >>> from helikon.model import ToolDef, ToolEffect
    >>> spec = AgentSpec("a", tools=(ToolDef("look", "", {}, effect=ToolEffect.READ_ONLY),
    ...                              ToolDef("pay", "", {})), idempotent_tools=("put",))
    >>> may_rerun(spec, "look"), may_rerun(spec, "pay"), may_rerun(spec, "put")
    (True, False, True)
    """
    if name in spec.idempotent_tools:
        return True
    tool = spec.tool(name)
    return tool is not None and tool.effect is ToolEffect.READ_ONLY


def resumed_step(state: ToolCallState, spec: AgentSpec) -> CallStep | None:
    """The step a call of a *stored* state waits on: :func:`pending_step`,
    except that a started call (:class:`Running`) is run again only if its
    tool :func:`may_rerun`; otherwise its outcome is reconciled
    (:class:`~helikon.effects.ReconcileTool`). The tool step the state's
    own outcome asked for may have run already: nothing says it did not.

    >>> from helikon.ids import CallId
    >>> from helikon.model import ToolDef
    >>> spec = AgentSpec("a", tools=(ToolDef("pay", "", {}),))
    >>> started, _ = open_call(ToolCall(CallId("c1"), "pay", "{}"), spec)
    >>> pending_step(started), resumed_step(started, spec)
    (InvokeTool(call_id='c1', tool='pay', args={}), ReconcileTool(call_id='c1', tool='pay', args={}))
    """
    if type(state.stage) is Running and not may_rerun(spec, state.call.name):
        call = state.call
        return ReconcileTool(call.call_id, call.name, state.args)
    return pending_step(state)


def waits_on_step(state: ToolCallState) -> bool:
    """Whether :func:`pending_step` of ``state`` is a step (cheaper than making it)."""
    stage = state.stage
    if isinstance(stage, Permitting):
        return type(stage.step) is not ApprovalNeeded
    return type(stage) is not Settled


def approval_request(state: ToolCallState) -> ApprovalRequest | None:
    """The question ``state`` waits on a human for, if any."""
    stage = state.stage
    if type(stage) is Permitting and type(stage.step) is ApprovalNeeded:
        call = state.call
        return ApprovalRequest(call.call_id, call.name, _encode(state.args), stage.step.prompt)
    return None


def feed_step(state: ToolCallState, result: StepResult, spec: AgentSpec) -> Advanced | str:
    """Feed the result of the call's pending step: its next state and events,
    or why the result does not answer that step."""
    stage = state.stage
    if type(result) is ToolReturned and type(stage) is Running and not spec.governance.hooks:
        return _finish(state, result.output, spec)  # the hot path: a tool answered
    result = _checked_answer(result)
    match stage, result:
        case PreHooks(hook=hook, verdict=verdict), HookAnswered(decision=decision):
            verdict = verdict.add(decision)
            if verdict.denial is None and hook + 1 < len(spec.governance.hooks):
                return state.at(PreHooks(hook + 1, verdict)), ()
            state = attrs.evolve(state, injected=(*state.injected, *verdict.injections))
            if verdict.denial is not None:
                return _deny(state, verdict.denial.reason, spec)
            if verdict.replacement is None:
                return _permit(state, spec)
            return _rewritten(state, replaced_value(verdict, state.args), "a PreToolUse hook", spec)
        case Permitting(step=PolicyNeeded()), PolicyAnswered(decision=decision):
            return _decide(state, after_policy(decision), spec)
        case Running() | Reconciling(), ToolReturned(output=output):
            if spec.governance.hooks:
                return state.at(PostHooks(output)), ()
            return _finish(state, output, spec)
        case Running() | Reconciling(), ToolRaised(failure=failure):
            errors = failure.schema_errors if type(failure) is InvalidArgs else ()
            return _settle(state, describe(_scrubbed(failure, spec)), spec, errors)
        case Running(reconciles=count) | Reconciling(reconciles=count), ToolNotPerformed():
            if count + 1 < MAX_RECONCILES:
                return state.at(Running(count + 1)), ()  # it did not happen: run it now
            why = f"it was started and did not come back {MAX_RECONCILES} times"
            message = f"reconciled {MAX_RECONCILES} times, the most for one call: it is not run again"
            return _settle(state, _clean(unknown_outcome(state.call, why, message), spec), spec)
        case Running(reconciles=count), ToolOutcomeUnknown(reason=reason):
            return state.at(Reconciling(reason, count)), ()
        case Running() | Reconciling(), CallbackRaised(message=message):
            # Only a reconcile step of a started call answers CallbackRaised.
            why = stage.reason if type(stage) is Reconciling else RESUMED
            return _settle(state, _clean(unknown_outcome(state.call, why, message), spec), spec)
        case PostHooks(output=output, hook=hook, verdict=verdict), HookAnswered(decision=decision):
            verdict = verdict.add(decision)
            if verdict.denial is None and hook + 1 < len(spec.governance.hooks):
                return state.at(PostHooks(output, hook + 1, verdict)), ()
            state = attrs.evolve(state, injected=(*state.injected, *verdict.injections))
            if verdict.denial is not None:
                return _deny(state, verdict.denial.reason, spec)
            return _finish(state, replaced_value(verdict, output), spec)
        case PreHooks() | PostHooks() | Permitting(step=PolicyNeeded()), CallbackRaised(message=message):
            who = "the permission policy" if type(stage) is Permitting else "a hook"
            return _deny(state, f"{who} raised {message}", spec)
    expected = pending_step(state)
    wanted = type(expected).__name__ if expected is not None else "no step result"
    return f"tool call {state.call.call_id!r} waits for {wanted}, not {type(result).__name__}"


def unknown_outcome(call: ToolCall, why: str, message: str) -> str:
    """The error result the model receives for a call whose outcome is unknown.

    >>> from helikon.ids import CallId
    >>> unknown_outcome(ToolCall(CallId("c1"), "pay", "{}"), RESUMED, "tool 'pay' has no reconcile callback")
    "the outcome of tool call 'c1' (pay) is unknown: it was started before the run was resumed, \
and it may or may not have taken effect (tool 'pay' has no reconcile callback)"
    """
    return (
        f"the outcome of tool call {call.call_id!r} ({call.name}) is unknown: {why}, "
        f"and it may or may not have taken effect ({message})"
    )


_HOOK_DECISIONS = (Allow, Deny, ReplaceInput, ReplaceOutput, InjectSystemMessage)
_POLICY_DECISIONS = (Allow, Deny, AskUser, Replace)


def _checked_answer(result: StepResult) -> StepResult:
    """A hook's or policy's answer as the fold takes it: ``None`` from a hook
    allows; anything that is not a decision (fed through the step API, say)
    counts as a failed callback, which denies the call."""
    kind = type(result)
    if kind is HookAnswered:
        assert isinstance(result, HookAnswered)
        decision = result.decision
        if decision is None:
            return HookAnswered(result.call_id, Allow())
        if not isinstance(decision, _HOOK_DECISIONS):
            return CallbackRaised(result.call_id, f"an answer that is not a hook decision: {decision!r}")
    elif kind is PolicyAnswered:
        assert isinstance(result, PolicyAnswered)
        if not isinstance(result.decision, _POLICY_DECISIONS):
            message = f"an answer that is not a permission decision: {result.decision!r}"
            return CallbackRaised(result.call_id, message)
    return result


def feed_approval(state: ToolCallState, decision: ApprovalDecision, spec: AgentSpec) -> Advanced:
    """Feed a human's answer to the call's pending ask (see :func:`approval_request`)."""
    stage = state.stage
    assert type(stage) is Permitting and type(stage.step) is ApprovalNeeded
    if not decision.approved:
        return _deny(state, decision.reason or "the user declined", spec)
    name, effect = _tool(state, spec)
    settings = spec.governance.permissions
    return _decide(state, after_approval(name, effect, state.args, settings, stage.step, Allow()), spec)


# -- helpers -----------------------------------------------------------------------------


def _tool(state: ToolCallState, spec: AgentSpec) -> tuple[str, ToolEffect]:
    """The call's tool name and declared effect (an undeclared tool is SIDE_EFFECT)."""
    name = state.call.name
    tool = spec.tool(name)
    return name, tool.effect if tool is not None else ToolEffect.SIDE_EFFECT


def _permit(state: ToolCallState, spec: AgentSpec) -> Advanced:
    """Run the permission pipeline from its start."""
    name, effect = _tool(state, spec)
    settings = spec.governance.permissions
    folded = argument_free_fold(name, effect, settings)
    if folded is None:
        return _decide(state, fold_permissions(name, effect, state.args, settings), spec)
    return _decide(state, folded, spec)


@functools.lru_cache(maxsize=1024)
def argument_free_fold(name: str, effect: ToolEffect, settings: PermissionSettings) -> PermissionStep | None:
    """The pipeline for a tool none of whose arguments the rules read (paths,
    commands): it cannot depend on them, so it is folded once per (tool,
    settings). None when a rule can read them. The hot path of a tool loop
    (a pure function, memoised)."""
    if any(entry.tool == name for entry in settings.arguments.entries):
        return None
    return fold_permissions(name, effect, None, settings)


def _decide(state: ToolCallState, step: PermissionStep, spec: AgentSpec) -> Advanced:
    match step:
        case Decided(decision=decision):
            match decision:
                case Allow():
                    return state.at(RUNNING), ()
                case Deny(reason=reason):
                    return _deny(state, reason, spec)
                case Replace(args=args):
                    return _rewritten(state, args, "the permission policy", spec, permit=False)
                case _:
                    assert_never(decision)
        case PolicyNeeded():
            return state.at(Permitting(step)), ()
        case ApprovalNeeded():
            if spec.governance.approvals is ApprovalRoute.DENY:
                return _decide(state, resolve_without_handler(step), spec)
            return state.at(Permitting(step)), ()
        case _:
            assert_never(step)


def _rewritten(
    state: ToolCallState, args: JsonValue, who: str, spec: AgentSpec, *, permit: bool = True
) -> Advanced:
    """Arguments rewritten by ``who`` must still fit the tool's schema; a hook's
    rewrite is then judged by the permission pipeline, a policy's runs."""
    tool = spec.tool(state.call.name)
    errors = schema_errors(args, tool.parameters) if tool is not None else ()
    if errors:
        text = f"invalid arguments after a rewrite by {who}: " + "; ".join(errors)
        return _settle(state, text, spec)
    state = attrs.evolve(state, args=args)
    if permit:
        return _permit(state, spec)
    return state.at(Running()), ()


def _deny(state: ToolCallState, reason: str, spec: AgentSpec) -> Advanced:
    reason = _clean(reason, spec)
    event = PermissionDenied(state.call.name, reason)
    out, _ = _settle(state, describe(Denied(reason)), spec)
    return out, (event,)


def _finish(state: ToolCallState, output: JsonValue, spec: AgentSpec) -> Advanced:
    """The last transform: the output as text, scrubbed of secrets (a structured
    output is scrubbed as a value first, then as encoded text)."""
    text = output_text(output, spec.governance)
    call = state.call
    return ToolCallState(
        call, state.args, Settled(ToolResult(call.call_id, call.name, text)), state.injected
    ), ()


def output_text(output: JsonValue, governance: Governance) -> str:
    """A tool's output as the text the model sees: encoded, scrubbed of secrets
    (a structured output is scrubbed as a value first, then as encoded text)."""
    if isinstance(output, str):
        text = output
    elif output is None or type(output) in _NUMBERS:
        text = _encode(output)  # nothing to scrub in the value (``redact_json`` returns it as it is)
    else:
        text = _encode(redact_json(output, governance.secrets) if governance.redact else output)
    if governance.redact and (":" in text or "=" in text or len(text) >= MIN_SECRET_LENGTH):
        # (``redact`` returns a shorter text with neither as it is: not called for it)
        text = redact(text, governance.secrets)
    return text


_NUMBERS: Final = frozenset({int, float, bool})


def _settle(state: ToolCallState, error: str, spec: AgentSpec, invalid: tuple[str, ...] = ()) -> Advanced:
    call = state.call
    result = ToolResult(call.call_id, call.name, error, is_error=True)
    return state.at(Settled(result, invalid)), ()


def _clean(text: str, spec: AgentSpec) -> str:
    governance = spec.governance
    return redact(text, governance.secrets) if governance.redact else text


def _scrubbed(failure: ToolFailure, spec: AgentSpec) -> ToolFailure:
    """A tool failure with secrets redacted from its message (it reaches the
    model and the session like any tool output)."""
    match failure:
        case ToolCrashed(message=message):
            return ToolCrashed(_clean(message, spec))
        case Denied(reason=reason):
            return Denied(_clean(reason, spec))
        case InvalidArgs():
            return failure
        case _:
            assert_never(failure)


_encoder = msgspec.json.Encoder(order="sorted")


def _encode(value: JsonValue) -> str:
    return _encoder.encode(value).decode()


__all__ = [
    "MAX_RECONCILES",
    "CallStage",
    "Permitting",
    "PostHooks",
    "PreHooks",
    "RESUMED",
    "Reconciling",
    "Running",
    "Settled",
    "ToolCallState",
    "approval_request",
    "feed_approval",
    "feed_step",
    "open_call",
    "output_text",
    "may_rerun",
    "pending_step",
    "resumed_step",
    "settled",
    "unknown_outcome",
    "waits_on_step",
]
