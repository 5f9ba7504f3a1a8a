"""The answer table: what user code answered or raised, as the result the machine folds.

Every call of user code (a tool, a hook of any kind, a guardrail, the
permission policy, the approval handler, an instructions function) is
performed by an interpreter, which reports only what happened: the callback
returned a value (:class:`Returned`) or raised (:class:`Raised`). What that
means is decided here, once, for every interpreter (live, scripted,
Temporal, a user's own):

=====================  ======================  ==============================  ==========================
callback               ``None``                a value of the wrong type       an exception
=====================  ======================  ==============================  ==========================
PreToolUse/PostToolUse ``Allow()``             ``CallbackRaised`` (deny)       ``CallbackRaised`` (deny)
turn hook              ``Allow()``             ``Deny`` (the turn is denied)   ``Deny`` (fails closed)
observing hook         ignored                 ignored                         ignored
permission policy      ``CallbackRaised``      ``CallbackRaised`` (deny)       ``CallbackRaised`` (deny)
approval handler       denied                  denied                          denied
guardrail              ``Pass()``              tripwire (kind Other)           tripwire (kind Other)
instructions function  the text ``"None"``     ``str(value)``                  ``InstructionsFailed``
tool                   JSON ``null``           a crashed tool (no JSON form)   ``ToolError``: its failure;
                                                                               else a crashed tool
=====================  ======================  ==============================  ==========================

A callback the run does not have (a hook number out of range, no policy
installed, no approval handler, a tool with no implementation) is reported
as :class:`Raised` of :class:`MissingCallback`, and described by its message
alone. Everything here is pure: no IO, no clock, no calls of user code.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TypeAlias, final

import attrs

from helikon.effects import (
    ApprovalDecision,
    CallbackRaised,
    GuardrailsChecked,
    HookAnswered,
    HooksRan,
    InstructionsFailed,
    InstructionsRendered,
    PolicyAnswered,
    StepResult,
    ToolRaised,
)
from helikon.errors import GuardrailTripped, ToolCrashed, ToolError
from helikon.governance import (
    Allow,
    AskUser,
    Deny,
    GuardrailVerdict,
    HookDecision,
    HookEvent,
    HookVerdict,
    InjectSystemMessage,
    OnRunStart,
    OnTurnStart,
    Pass,
    Replace,
    ReplaceInput,
    ReplaceOutput,
    Tripwire,
    fold_guardrails,
    kind_label,
    tripwire_from_error,
)
from helikon.ids import CallId

_HOOK_DECISIONS = (Allow, Deny, ReplaceInput, ReplaceOutput, InjectSystemMessage)
_POLICY_DECISIONS = (Allow, Deny, AskUser, Replace)


class NoAnswer(Exception):
    """User code gave no answer: the interpreter could not call it, or the
    call did not complete (a Temporal activity that failed for good, say).
    An interpreter reports it as :class:`Raised`; it is described by its
    message alone."""


class MissingCallback(NoAnswer, LookupError):
    """The run has no callback to call for a step (a hook number out of
    range, no permission policy, no approval handler, a tool with no
    implementation); an interpreter reports it as :class:`Raised`."""


@final
@attrs.frozen
class Returned:
    """User code returned ``value``."""

    value: object


@final
@attrs.frozen
class Raised:
    """User code raised ``error``."""

    error: BaseException


#: What happened when user code was called.
Answer: TypeAlias = Returned | Raised


def described(error: BaseException) -> str:
    """How an exception from user code is described in a result.

    >>> described(ValueError("bad"))
    'ValueError: bad'
    >>> described(MissingCallback("no permission policy is installed"))
    'no permission policy is installed'
    """
    if isinstance(error, NoAnswer):
        return str(error)
    return f"{type(error).__name__}: {error}"


def hook_step(call_id: CallId, answer: Answer) -> StepResult:
    """A PreToolUse/PostToolUse hook's answer as a step result.

    >>> hook_step(CallId("c"), Returned(None))
    HookAnswered(call_id='c', decision=Allow())
    >>> hook_step(CallId("c"), Returned(3))
    CallbackRaised(call_id='c', message='an answer that is not a hook decision: 3')
    """
    match answer:
        case Returned(value=None):
            return HookAnswered(call_id, Allow())
        case Returned(value=value) if isinstance(value, _HOOK_DECISIONS):
            return HookAnswered(call_id, value)
        case Returned(value=value):
            return CallbackRaised(call_id, f"an answer that is not a hook decision: {value!r}")
        case Raised(error=error):
            return CallbackRaised(call_id, described(error))


def policy_step(call_id: CallId, answer: Answer) -> StepResult:
    """A permission policy's answer as a step result (anything but a
    permission decision denies the call: governance fails closed)."""
    match answer:
        case Returned(value=value) if isinstance(value, _POLICY_DECISIONS):
            return PolicyAnswered(call_id, value)
        case Returned(value=value):
            return CallbackRaised(call_id, f"an answer that is not a permission decision: {value!r}")
        case Raised(error=error):
            return CallbackRaised(call_id, described(error))


def approval_decision(
    call_id: CallId, answer: Answer, path: tuple[str, ...] = ()
) -> ApprovalDecision:
    """An approval handler's answer: only ``Allow()`` approves. ``path`` is
    the asking member's (the request's), so the answer reaches that call only.

    >>> approval_decision(CallId("c"), Returned(Allow()))
    ApprovalDecision(call_id='c', approved=True, reason='', path=())
    >>> approval_decision(CallId("c"), Raised(MissingCallback("no approval handler is installed")))
    ApprovalDecision(call_id='c', approved=False, reason='no approval handler is installed', path=())
    """
    match answer:
        case Returned(value=Allow()):
            return ApprovalDecision(call_id, True, path=path)
        case Returned(value=Deny(reason=reason)):
            return ApprovalDecision(call_id, False, reason, path=path)
        case Returned(value=value):
            return ApprovalDecision(call_id, False, f"the approval handler answered {value!r}", path=path)
        case Raised(error=NoAnswer() as error):
            return ApprovalDecision(call_id, False, described(error), path=path)
        case Raised(error=error):
            why = f"the approval handler raised {described(error)}"
            return ApprovalDecision(call_id, False, why, path=path)


def tool_raised(call_id: CallId, error: BaseException) -> StepResult:
    """An exception from a tool: a ``ToolError`` is the failure the model
    sees; anything else is a crashed tool (the run goes on).

    >>> tool_raised(CallId("c"), RuntimeError("boom")).failure
    ToolCrashed(message='RuntimeError: boom')
    """
    if isinstance(error, ToolError):
        return ToolRaised(call_id, error.failure)
    return ToolRaised(call_id, ToolCrashed(described(error)))


def turn_hook_decision(answer: Answer) -> HookDecision:
    """A turn hook's answer as a decision: ``None`` allows; anything that is
    not a decision, or an exception, denies the turn (governance fails
    closed, as for a PreToolUse hook).

    >>> turn_hook_decision(Returned(None))
    Allow()
    >>> turn_hook_decision(Raised(RuntimeError("down")))
    Deny(reason='a hook raised RuntimeError: down')
    """
    match answer:
        case Returned(value=None):
            return Allow()
        case Returned(value=value) if isinstance(value, _HOOK_DECISIONS):
            return value
        case Returned(value=value):
            return Deny(f"a hook answered something that is not a hook decision: {value!r}")
        case Raised(error=NoAnswer() as error):
            return Deny(described(error))
        case Raised(error=error):
            return Deny(f"a hook raised {described(error)}")


def guardrail_verdict(answer: Answer) -> GuardrailVerdict:
    """A guardrail's answer as a verdict: ``None`` passes; anything else that
    is not a verdict, or an exception, trips (the book: a failing guardrail
    trips).

    >>> guardrail_verdict(Returned(None))
    Pass()
    >>> guardrail_verdict(Returned(3))
    Tripwire(kind=OtherKind(reason='a guardrail answered something that is not a verdict: 3'), info=None)
    """
    match answer:
        case Returned(value=None):
            return Pass()
        case Returned(value=Pass() | Tripwire() as verdict):
            return verdict
        case Returned(value=value):
            return tripwire_from_error(f"a guardrail answered something that is not a verdict: {value!r}")
        case Raised(error=error):
            return tripwire_from_error(described(error))


def guardrails_checked(answers: Sequence[Answer], encode: Callable[[object], str]) -> GuardrailsChecked:
    """The guardrails' answers (in declaration order) folded: the first
    tripwire, else a pass. ``encode`` renders a tripwire's JSON info as text."""
    folded = fold_guardrails([guardrail_verdict(a) for a in answers])
    if isinstance(folded, Tripwire):
        raw = folded.info
        info = raw if isinstance(raw, str) else "" if raw is None else encode(raw)
        return GuardrailsChecked(GuardrailTripped(kind_label(folded.kind), info))
    return GuardrailsChecked()


def instructions_result(answer: Answer) -> InstructionsRendered | InstructionsFailed:
    """An instructions function's answer: its text, or why the turn cannot start.

    >>> instructions_result(Returned("Be brief."))
    InstructionsRendered(text='Be brief.')
    >>> instructions_result(Raised(KeyError("user")))
    InstructionsFailed(message="KeyError: 'user'")
    """
    match answer:
        case Returned(value=value):
            return InstructionsRendered(value if isinstance(value, str) else str(value))
        case Raised(error=error):
            return InstructionsFailed(described(error))


def hooks_unanswered(message: str) -> HooksRan:
    """The turn hooks, when they gave no answer at all (``message`` says
    why): the turn is denied, as governance fails closed.

    >>> hooks_unanswered("the worker is gone")
    HooksRan(denied='the worker is gone', injected=())
    """
    return HooksRan(described(NoAnswer(message)))


#: Fires hook ``index`` on ``event`` and is sent back its answer.
TurnHookFold: TypeAlias = Generator[tuple[int, HookEvent], Answer, HooksRan]


def fold_turn_hooks(turn: int, count: int) -> TurnHookFold:
    """The turn-start hooks of ``turn`` (OnRunStart first on turn 1, then
    OnTurnStart), as a generator an interpreter drives: it yields which hook
    to fire on which event, is sent what the hook answered, and returns the
    folded :class:`HooksRan` (the first deny stops every later hook).

    >>> fold = fold_turn_hooks(2, 1)
    >>> next(fold)
    (0, OnTurnStart(turn=2))
    >>> try:
    ...     fold.send(Raised(RuntimeError("down")))
    ... except StopIteration as done:
    ...     done.value
    HooksRan(denied='a hook raised RuntimeError: down', injected=())
    """
    verdict = HookVerdict()
    events: list[HookEvent] = [OnRunStart(), OnTurnStart(turn)] if turn == 1 else [OnTurnStart(turn)]
    for event in events:
        inner = HookVerdict()
        for index in range(count):
            inner = inner.add(turn_hook_decision((yield index, event)))
            if inner.denied:
                break
        verdict = verdict.then(inner)
        if verdict.denied:
            break
    denial = verdict.denial
    return HooksRan(denial.reason if denial is not None else None, tuple(verdict.injections))


#: The answer table by callback kind (see the module docstring).
ANSWERS = {
    "hook": hook_step,
    "turn_hook": turn_hook_decision,
    "policy": policy_step,
    "approval": approval_decision,
    "guardrail": guardrail_verdict,
    "instructions": instructions_result,
    "tool_raised": tool_raised,
}

__all__ = [
    "ANSWERS",
    "Answer",
    "MissingCallback",
    "NoAnswer",
    "hooks_unanswered",
    "Raised",
    "Returned",
    "TurnHookFold",
    "approval_decision",
    "described",
    "fold_turn_hooks",
    "guardrail_verdict",
    "guardrails_checked",
    "hook_step",
    "instructions_result",
    "policy_step",
    "tool_raised",
    "turn_hook_decision",
]
