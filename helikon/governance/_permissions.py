"""The permission pipeline for one tool call, as a pure, resumable fold.

The book's order, evaluated top to bottom; the first stage that decides wins:

1. **deny rules**: a matching :class:`~helikon.governance.DenyRule` denies, in
   every mode (even ``BYPASS``); a Bash deny rule on a line the matcher
   cannot read in full asks the approval handler (an approval clears that
   rule only);
2. **guard rules**: a matching :class:`~helikon.governance.GuardRule` denies
   (``DENY``) or asks the approval handler (``ASK``); on a line that cannot be
   read in full it asks whatever its action; an approval clears that
   one guard only and the pipeline continues with the next guard;
3. **allow rules**: a matching :class:`~helikon.governance.AllowRule` allows,
   in every mode (even ``PLAN`` and ``DONT_ASK``), and the policy is not asked;
4. **mode**: ``BYPASS`` allows; ``DONT_ASK`` denies; ``PLAN`` denies a tool
   that is not ``READ_ONLY``; ``ACCEPT_EDITS`` allows a ``WRITE`` tool;
   otherwise (and always in ``DEFAULT``) go on;
5. **policy**: with a permission policy installed, its answer (Allow, Deny,
   AskUser or Replace) decides; with none, the call is allowed (the book:
   ``DEFAULT`` is "permissive when no policy");
6. **AskUser**: the approval handler decides (Allow or Deny, it cannot ask
   again); with no handler installed the ask resolves to deny.

Calling the policy and the approval handler is user code, so the fold stops
there and says so as data: :func:`fold_permissions` returns a
:data:`PermissionStep`, either :class:`Decided` or a request
(:class:`PolicyNeeded`, :class:`ApprovalNeeded`) that the caller performs as
an effect and feeds back through :func:`after_policy` / :func:`after_approval`
(or :func:`resolve_without_handler` when no handler is installed). Every step
is plain data, so a run can be suspended while an approval is pending.

Two choices the book leaves open, made here:

- Under ``DONT_ASK`` ("deny-by-default headless lockdown") a guard's ASK is a
  deny at once: nobody is asked, and only an allow rule can permit a call.
- A policy's ``Replace(args)`` is final: the call runs with those arguments,
  which are not checked again (the policy is trusted code that runs after
  the rules). A PreToolUse hook's rewrite, by contrast, happens *before* this
  pipeline, which then judges the rewritten call.

The mode itself is tighten-only on a run context (:func:`tighten`).
"""

from __future__ import annotations

import enum
from typing import TypeAlias, assert_never, final

import attrs

from helikon._json import JsonValue
from helikon._normal import normal_form, normal_text
from helikon.config import PermissionMode
from helikon.governance._bash import Verdict, resolve
from helikon.governance._decisions import Allow, Deny
from helikon.governance._guards import GuardAction, GuardRule
from helikon.governance._rules import DEFAULT_TOOL_ARGUMENTS, AllowRule, ArgumentRole, DenyRule, ToolArguments
from helikon.model import ToolEffect


@final
@attrs.frozen
class AskUser:
    """Ask a human (through the approval handler) with ``prompt``."""

    prompt: str = attrs.field(converter=normal_text)


@final
@attrs.frozen
class Replace:
    """Run the call with ``args`` instead (sanitize it), taken in normal form
    (:func:`helikon.normal_form`: a tuple becomes a list; a value with no
    JSON form raises ``NormalFormError``)."""

    args: JsonValue = attrs.field(converter=normal_form)


#: What a permission policy (the book's canUseTool) answers.
PermissionDecision: TypeAlias = Allow | Deny | AskUser | Replace

#: What an approval handler answers: it cannot ask again.
ApprovalOutcome: TypeAlias = Allow | Deny


class PermissionStage(enum.Enum):
    """The pipeline stage that decided a call."""

    #: A deny rule matched.
    DENY_RULE = "deny_rule"
    #: A guard rule denied (or asked where asking is impossible).
    GUARD_RULE = "guard_rule"
    #: An allow rule matched.
    ALLOW_RULE = "allow_rule"
    #: The permission mode decided (including DEFAULT with no policy: allow).
    MODE = "mode"
    #: The permission policy decided.
    POLICY = "policy"
    #: The approval handler decided, or there was none to ask.
    APPROVAL = "approval"


@final
@attrs.frozen
class Decided:
    """The pipeline is done: run the call (``Allow``, ``Replace``) or refuse it (``Deny``)."""

    decision: Allow | Deny | Replace
    stage: PermissionStage


@final
@attrs.frozen
class PolicyNeeded:
    """Ask the permission policy about the call; feed its answer to :func:`after_policy`."""


@final
@attrs.frozen
class FromGuard:
    """The guard rule at ``index`` of the settings' guard rules asked; ``index``
    equal to the number of guard rules: the guards could not read the whole
    command line (one ask for all of them, after every definite guard)."""

    index: int


@final
@attrs.frozen
class FromPolicy:
    """The permission policy answered AskUser."""


@final
@attrs.frozen
class FromDenyRule:
    """The deny rules could not tell (part of a command line cannot be read):
    one ask for all of them, after every definite deny. ``index`` is the
    number of deny rules."""

    index: int


#: Who asked for an approval (where the pipeline resumes after an Allow).
AskOrigin: TypeAlias = FromGuard | FromPolicy | FromDenyRule


@final
@attrs.frozen
class ApprovalNeeded:
    """Ask the approval handler with ``prompt``; feed its outcome to :func:`after_approval`,
    or call :func:`resolve_without_handler` when none is installed."""

    prompt: str
    origin: AskOrigin


#: One step of the pipeline: decided, or a request the caller performs.
PermissionStep: TypeAlias = Decided | PolicyNeeded | ApprovalNeeded


@final
@attrs.frozen(cache_hash=True)
class PermissionSettings:
    """The data the pipeline reads: the run context's permission configuration.

    ``guard_rules`` is the full list in force, built-in defaults included (a
    context built ``without_default_guards()`` passes only its own);
    ``has_policy`` says whether a permission policy is installed.
    """

    mode: PermissionMode = PermissionMode.DEFAULT
    deny_rules: tuple[DenyRule, ...] = ()
    guard_rules: tuple[GuardRule, ...] = attrs.field(factory=GuardRule.destructive_defaults)
    allow_rules: tuple[AllowRule, ...] = ()
    has_policy: bool = False
    arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS


def _by_mode(mode: PermissionMode, tool: str, effect: ToolEffect) -> Decided | None:
    match mode:
        case PermissionMode.BYPASS:
            return Decided(Allow(), PermissionStage.MODE)
        case PermissionMode.DONT_ASK:
            return Decided(Deny(f"dont-ask mode: no allow rule permits {tool!r}"), PermissionStage.MODE)
        case PermissionMode.PLAN:
            if effect is ToolEffect.READ_ONLY:
                return None
            reason = f"plan mode allows only read-only tools; {tool!r} is {effect.value}"
            return Decided(Deny(reason), PermissionStage.MODE)
        case PermissionMode.ACCEPT_EDITS:
            return Decided(Allow(), PermissionStage.MODE) if effect is ToolEffect.WRITE else None
        case PermissionMode.DEFAULT:
            return None
        case _:
            assert_never(mode)


def _unreadable(tool: str, args: JsonValue, arguments: ToolArguments) -> str:
    reasons = [
        r for line in arguments.values(tool, ArgumentRole.COMMAND, args) for r in resolve(line).reasons
    ]
    return "; ".join(dict.fromkeys(reasons)) or "part of the command cannot be read"


def _fold_from(
    tool: str,
    effect: ToolEffect,
    args: JsonValue,
    settings: PermissionSettings,
    first_guard: int,
    first_deny: int = 0,
) -> PermissionStep:
    arguments = settings.arguments
    deny_rules, guards = settings.deny_rules, settings.guard_rules
    if first_deny <= len(deny_rules):
        verdicts = [rule.check(tool, args, arguments) for rule in deny_rules]
        for index in range(first_deny, len(deny_rules)):
            if verdicts[index] is Verdict.YES:
                reason = f"denied by deny rule: {deny_rules[index].describe()}"
                return Decided(Deny(reason), PermissionStage.DENY_RULE)
        unsure = [deny_rules[i].describe() for i, v in enumerate(verdicts) if v is Verdict.UNKNOWN]
        if unsure:
            prompt = (
                f"the command may run what a deny rule forbids ({', '.join(unsure)}), "
                f"but the matcher cannot see all of it: {_unreadable(tool, args, arguments)}"
            )
            if settings.mode is PermissionMode.DONT_ASK:
                return Decided(Deny(f"{prompt} (dont-ask mode asks no one)"), PermissionStage.DENY_RULE)
            return ApprovalNeeded(prompt, FromDenyRule(len(deny_rules)))
    if first_guard <= len(guards):
        verdicts = [guard.check(tool, args, arguments) for guard in guards]
        for index in range(first_guard, len(guards)):
            guard = guards[index]
            if verdicts[index] is not Verdict.YES:
                continue
            match guard.action:
                case GuardAction.DENY:
                    return Decided(Deny(guard.message), PermissionStage.GUARD_RULE)
                case GuardAction.ASK if settings.mode is PermissionMode.DONT_ASK:
                    reason = f"{guard.message} (dont-ask mode asks no one)"
                    return Decided(Deny(reason), PermissionStage.GUARD_RULE)
                case GuardAction.ASK:
                    return ApprovalNeeded(guard.message, FromGuard(index))
                case _:
                    assert_never(guard.action)
        unsure = [guards[i].message for i, v in enumerate(verdicts) if v is Verdict.UNKNOWN]
        if unsure:
            prompt = (
                f"the command may trip a guard ({'; '.join(unsure)}), "
                f"but the matcher cannot see all of it: {_unreadable(tool, args, arguments)}"
            )
            if settings.mode is PermissionMode.DONT_ASK:
                return Decided(Deny(f"{prompt} (dont-ask mode asks no one)"), PermissionStage.GUARD_RULE)
            return ApprovalNeeded(prompt, FromGuard(len(guards)))
    if any(rule.matches(tool, args, arguments) for rule in settings.allow_rules):
        return Decided(Allow(), PermissionStage.ALLOW_RULE)
    by_mode = _by_mode(settings.mode, tool, effect)
    if by_mode is not None:
        return by_mode
    if settings.has_policy:
        return PolicyNeeded()
    return Decided(Allow(), PermissionStage.MODE)


def fold_permissions(
    tool: str, effect: ToolEffect, args: JsonValue, settings: PermissionSettings
) -> PermissionStep:
    """Run the pipeline for one call up to its decision or its first request.

    Args:
        tool: the tool's name.
        effect: the tool's declared effect (an undeclared tool is SIDE_EFFECT).
        args: the call's arguments, after any PreToolUse rewrite.
        settings: the run context's permission configuration.

    Returns:
        :class:`Decided`, or :class:`PolicyNeeded` / :class:`ApprovalNeeded`.

    >>> from helikon.governance import DenyRule
    >>> bypass = PermissionSettings(PermissionMode.BYPASS, deny_rules=(DenyRule.tool("Bash"),))
    >>> fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": "ls"}, bypass)
    Decided(decision=Deny(reason="denied by deny rule: tool 'Bash'"), stage=<PermissionStage.DENY_RULE: \
'deny_rule'>)
    >>> fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": "rm -rf ~"}, PermissionSettings())
    ApprovalNeeded(prompt='destructive command: recursive remove of / or ~', origin=FromGuard(index=0))
    >>> fold_permissions("Read", ToolEffect.READ_ONLY, {"path": "a"}, PermissionSettings(has_policy=True))
    PolicyNeeded()
    """
    return _fold_from(tool, effect, args, settings, 0)


def after_policy(decision: PermissionDecision) -> PermissionStep:
    """The step after the policy answered ``decision``.

    >>> after_policy(AskUser("Allow WebFetch?"))
    ApprovalNeeded(prompt='Allow WebFetch?', origin=FromPolicy())
    >>> after_policy(Replace({"url": "https://example.org"})).decision
    Replace(args={'url': 'https://example.org'})
    """
    match decision:
        case Allow() | Deny() | Replace():
            return Decided(decision, PermissionStage.POLICY)
        case AskUser(prompt):
            return ApprovalNeeded(prompt, FromPolicy())
        case _:
            assert_never(decision)


def after_approval(
    tool: str,
    effect: ToolEffect,
    args: JsonValue,
    settings: PermissionSettings,
    pending: ApprovalNeeded,
    outcome: ApprovalOutcome,
) -> PermissionStep:
    """The step after the approval handler answered ``outcome`` to ``pending``.

    A denial is final. An approval of the policy's ask allows the call; an
    approval of a guard's ask clears that guard only, and the pipeline goes on
    with the next guard, the allow rules, the mode and the policy.

    >>> settings = PermissionSettings(PermissionMode.PLAN)
    >>> pending = fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": "rm -rf /"}, settings)
    >>> after_approval("Bash", ToolEffect.SIDE_EFFECT, {"command": "rm -rf /"}, settings, pending, Allow())
    Decided(decision=Deny(reason="plan mode allows only read-only tools; 'Bash' is side_effect"), \
stage=<PermissionStage.MODE: 'mode'>)
    """
    match outcome:
        case Deny():
            return Decided(outcome, PermissionStage.APPROVAL)
        case Allow():
            match pending.origin:
                case FromPolicy():
                    return Decided(outcome, PermissionStage.APPROVAL)
                case FromGuard(index):
                    return _fold_from(tool, effect, args, settings, index + 1, len(settings.deny_rules) + 1)
                case FromDenyRule(index):
                    return _fold_from(tool, effect, args, settings, 0, index + 1)
                case _:
                    assert_never(pending.origin)
        case _:
            assert_never(outcome)


def resolve_without_handler(pending: ApprovalNeeded) -> Decided:
    """With no approval handler installed, an ask resolves to deny.

    >>> resolve_without_handler(ApprovalNeeded("Allow WebFetch?", FromPolicy())).decision
    Deny(reason='needs approval and no approval handler is installed: Allow WebFetch?')
    """
    reason = f"needs approval and no approval handler is installed: {pending.prompt}"
    return Decided(Deny(reason), PermissionStage.APPROVAL)


# -- the mode is tighten-only ------------------------------------------------------------


def strictness(mode: PermissionMode) -> int:
    """The mode's rank from loosest to strictest:
    ``BYPASS < ACCEPT_EDITS < DEFAULT < PLAN < DONT_ASK``.

    Each mode decides every call at least as strictly as the one before it,
    given the same rules and policy: BYPASS allows what ACCEPT_EDITS allows; ACCEPT_EDITS
    allows WRITE tools DEFAULT would ask the policy about; PLAN denies what is not
    READ_ONLY and otherwise acts as DEFAULT; DONT_ASK denies what PLAN would leave to the policy.

    >>> sorted(PermissionMode, key=strictness)[0], sorted(PermissionMode, key=strictness)[-1]
    (<PermissionMode.BYPASS: 'bypass'>, <PermissionMode.DONT_ASK: 'dont_ask'>)
    """
    match mode:
        case PermissionMode.BYPASS:
            return 0
        case PermissionMode.ACCEPT_EDITS:
            return 1
        case PermissionMode.DEFAULT:
            return 2
        case PermissionMode.PLAN:
            return 3
        case PermissionMode.DONT_ASK:
            return 4
        case _:
            assert_never(mode)


def tighten(current: PermissionMode, requested: PermissionMode) -> PermissionMode:
    """The mode a context in ``current`` moves to when ``requested`` is set.

    The book's rule: ``BYPASS`` is sticky and may only be tightened to
    ``DONT_ASK``; ``DONT_ASK`` is terminal; the other three modes
    (``DEFAULT``, ``ACCEPT_EDITS``, ``PLAN``) may be set freely, as the book's
    own ``ephemeral(()).with_permission_mode(AcceptEdits)`` does. A refused
    request leaves ``current``. Sub-agents inherit through the same function,
    which is how BYPASS and DONT_ASK propagate.

    >>> tighten(PermissionMode.BYPASS, PermissionMode.DEFAULT)
    <PermissionMode.BYPASS: 'bypass'>
    >>> tighten(PermissionMode.BYPASS, PermissionMode.DONT_ASK)
    <PermissionMode.DONT_ASK: 'dont_ask'>
    >>> tighten(PermissionMode.DEFAULT, PermissionMode.ACCEPT_EDITS)
    <PermissionMode.ACCEPT_EDITS: 'accept_edits'>
    """
    match current:
        case PermissionMode.DONT_ASK:
            return current
        case PermissionMode.BYPASS:
            return requested if requested is PermissionMode.DONT_ASK else current
        case PermissionMode.DEFAULT | PermissionMode.ACCEPT_EDITS | PermissionMode.PLAN:
            return requested
        case _:
            assert_never(current)


def mode_change_allowed(current: PermissionMode, requested: PermissionMode) -> bool:
    """Whether setting ``requested`` on a context in ``current`` takes effect.

    >>> mode_change_allowed(PermissionMode.DONT_ASK, PermissionMode.PLAN)
    False
    """
    return tighten(current, requested) is requested


__all__ = [
    "ApprovalNeeded",
    "ApprovalOutcome",
    "AskOrigin",
    "AskUser",
    "Decided",
    "FromDenyRule",
    "FromGuard",
    "FromPolicy",
    "PermissionDecision",
    "PermissionSettings",
    "PermissionStage",
    "PermissionStep",
    "PolicyNeeded",
    "Replace",
    "after_approval",
    "after_policy",
    "fold_permissions",
    "mode_change_allowed",
    "resolve_without_handler",
    "strictness",
    "tighten",
]
