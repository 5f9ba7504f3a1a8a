"""Hook events, hook decisions and the fold of several hooks' decisions.

A hook observes a :data:`HookEvent` and answers a :data:`HookDecision`. When
several hooks fire for one event, their decisions fold into one
:class:`HookVerdict`, the book's rule:

- the first ``Deny`` short-circuits: later hooks do not fire, and their
  decisions (if the caller has them anyway) are ignored;
- ``ReplaceInput`` / ``ReplaceOutput`` is last-writer-wins (one slot for both:
  the event says what is replaced, the args of a PreToolUse, the output of a
  PostToolUse; other events ignore it);
- ``InjectSystemMessage`` texts accumulate in fire order, and reach the next
  model call.

Fire order is the caller's: agent-level hooks fire before run-level ones
(the ``HookRegistry`` on the run context), so fold
``fire_order(agent_hooks, run_hooks)``. Because the fold is a monoid
(:meth:`HookVerdict.then`, identity ``HookVerdict()``), folding the agent's
decisions and the run's decisions separately and combining them gives the same
verdict as folding them all in order.

Firing a hook is user code: the interpreter performs it as an effect, and the
core feeds each answer to :meth:`HookVerdict.add`, stopping at
:attr:`HookVerdict.denied`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias, TypeVar, assert_never, final

import attrs

from helikon._json import JsonValue
from helikon._normal import normal_form, normal_text
from helikon.governance._decisions import Allow, Deny

T = TypeVar("T")

# -- events ------------------------------------------------------------------------


@final
@attrs.frozen
class OnRunStart:
    """A run is starting."""


@final
@attrs.frozen
class OnTurnStart:
    """Model turn ``turn`` is starting."""

    turn: int


@final
@attrs.frozen
class PreToolUse:
    """Tool ``tool`` is about to run with ``args`` (a hook may deny or rewrite them)."""

    tool: str
    args: JsonValue


@final
@attrs.frozen
class PostToolUse:
    """Tool ``tool`` ran with ``args`` and produced ``output`` (a hook may rewrite it)."""

    tool: str
    args: JsonValue
    output: JsonValue


@final
@attrs.frozen
class OnHandoff:
    """Agent ``from_agent`` is handing the conversation to ``to_agent``."""

    from_agent: str
    to_agent: str


@final
@attrs.frozen
class OnRunComplete:
    """The run completed (best-effort: a cancelled run may abort this hook)."""


@final
@attrs.frozen
class OnSubagentStop:
    """Sub-agent ``agent`` finished."""

    agent: str


#: A lifecycle event hooks observe.
HookEvent: TypeAlias = (
    OnRunStart | OnTurnStart | PreToolUse | PostToolUse | OnHandoff | OnRunComplete | OnSubagentStop
)

# -- decisions ---------------------------------------------------------------------


@final
@attrs.frozen
class ReplaceInput:
    """Rewrite the value the runner is about to use (a PreToolUse's args).

    ``args`` is taken in normal form (:func:`helikon.normal_form`: a tuple
    becomes a list); a value with no JSON form raises ``NormalFormError``.
    """

    args: JsonValue = attrs.field(converter=normal_form)


@final
@attrs.frozen
class ReplaceOutput:
    """Rewrite the value the runner just observed (a PostToolUse's output),
    taken in normal form like :class:`ReplaceInput`'s."""

    output: JsonValue = attrs.field(converter=normal_form)


@final
@attrs.frozen
class InjectSystemMessage:
    """Add ``text`` as a system message to the next model call."""

    text: str = attrs.field(converter=normal_text)


#: What a hook answers.
HookDecision: TypeAlias = Allow | Deny | ReplaceInput | ReplaceOutput | InjectSystemMessage


@final
@attrs.frozen
class HookVerdict:
    """Several hooks' decisions for one event, folded.

    Args:
        denial: the first ``Deny``, if any hook denied.
        replacement: the last ``ReplaceInput``/``ReplaceOutput`` before any denial.
        injections: injected system-message texts, in fire order, up to any denial.
    """

    denial: Deny | None = None
    replacement: ReplaceInput | ReplaceOutput | None = None
    injections: tuple[str, ...] = ()

    @property
    def denied(self) -> bool:
        """Whether a hook denied (no later hook fires)."""
        return self.denial is not None

    def add(self, decision: HookDecision | None) -> HookVerdict:
        """This verdict with one more hook's ``decision`` folded in (ignored
        once denied; ``None``, a hook that answered nothing, allows).

        >>> HookVerdict().add(InjectSystemMessage("be brief")).add(Deny("no")).add(ReplaceInput({}))
        HookVerdict(denial=Deny(reason='no'), replacement=None, injections=('be brief',))
        """
        if self.denial is not None:
            return self
        match decision:
            case Allow() | None:
                return self
            case Deny():
                return attrs.evolve(self, denial=decision)
            case ReplaceInput() | ReplaceOutput():
                return attrs.evolve(self, replacement=decision)
            case InjectSystemMessage(text):
                return attrs.evolve(self, injections=(*self.injections, text))
            case _:
                assert_never(decision)

    def then(self, later: HookVerdict) -> HookVerdict:
        """This verdict followed by the verdict of hooks that fire ``later`` (associative).

        >>> agent = fold_hooks([ReplaceInput(1), InjectSystemMessage("a")])
        >>> agent.then(fold_hooks([ReplaceInput(2)])) == fold_hooks([ReplaceInput(1),
        ...     InjectSystemMessage("a"), ReplaceInput(2)])
        True
        """
        if self.denial is not None:
            return self
        return HookVerdict(
            later.denial,
            later.replacement if later.replacement is not None else self.replacement,
            (*self.injections, *later.injections),
        )


def fold_hooks(decisions: Iterable[HookDecision]) -> HookVerdict:
    """Fold hook decisions given in fire order; stops reading at the first ``Deny``.

    >>> fold_hooks([ReplaceInput({"n": 1}), InjectSystemMessage("a"), ReplaceInput({"n": 2}),
    ...             InjectSystemMessage("b")])
    HookVerdict(denial=None, replacement=ReplaceInput(args={'n': 2}), injections=('a', 'b'))
    >>> fold_hooks([Allow(), Deny("blocked"), Deny("later")]).denial
    Deny(reason='blocked')
    """
    verdict = HookVerdict()
    for decision in decisions:
        verdict = verdict.add(decision)
        if verdict.denied:
            break
    return verdict


def replaced_value(verdict: HookVerdict, value: JsonValue) -> JsonValue:
    """``value`` after the verdict's replacement (the args of a PreToolUse, the output
    of a PostToolUse), or unchanged when no hook replaced it.

    >>> replaced_value(fold_hooks([ReplaceOutput("[redacted]")]), "secret"), replaced_value(HookVerdict(), 3)
    ('[redacted]', 3)
    """
    match verdict.replacement:
        case None:
            return value
        case ReplaceInput(args):
            return args
        case ReplaceOutput(output):
            return output
        case _:
            assert_never(verdict.replacement)


def fire_order(agent_hooks: Sequence[T], run_hooks: Sequence[T]) -> tuple[T, ...]:
    """The order hooks fire in: the agent's own hooks, then the run's registry.

    >>> fire_order(["audit"], ["global-log"])
    ('audit', 'global-log')
    """
    return (*agent_hooks, *run_hooks)


__all__ = [
    "HookDecision",
    "HookEvent",
    "HookVerdict",
    "InjectSystemMessage",
    "OnHandoff",
    "OnRunComplete",
    "OnRunStart",
    "OnSubagentStop",
    "OnTurnStart",
    "PostToolUse",
    "PreToolUse",
    "ReplaceInput",
    "ReplaceOutput",
    "fire_order",
    "fold_hooks",
    "replaced_value",
]
