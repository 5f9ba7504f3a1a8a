"""Guardrail verdicts and their fold.

A guardrail checks content: input guardrails gate the user's text before the
loop starts, output guardrails gate the final model text. It answers a
:data:`GuardrailVerdict`: :class:`Pass`, or a :class:`Tripwire` with a
:data:`GuardrailKind` and free-form JSON ``info``; a tripwire halts the run
(the run emits ``GuardrailTriggered`` and fails). A tripwire is a successful
verdict; a guardrail that *fails* (raises) counts as a tripwire of kind
:class:`OtherKind` (:func:`tripwire_from_error`).

Guardrails of one kind run concurrently, so they complete in any order. The
fold is order-independent by construction: verdicts are laid out in
*declaration* order and the first tripwire in that order is reported, whatever
order they completed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias, assert_never, final

import attrs

from helikon._json import JsonValue

# -- what a guardrail checks ---------------------------------------------------


@final
@attrs.frozen
class UserText:
    """Text entering the agent (checked by input guardrails)."""

    text: str


@final
@attrs.frozen
class ModelOutput:
    """The final text leaving the agent (checked by output guardrails)."""

    text: str


#: The content a guardrail is asked about.
GuardrailInput: TypeAlias = UserText | ModelOutput

# -- kinds and verdicts --------------------------------------------------------------


@final
@attrs.frozen
class InputPolicy:
    """The input broke a policy."""


@final
@attrs.frozen
class OutputPolicy:
    """The output broke a policy."""


@final
@attrs.frozen
class OtherKind:
    """Anything else, such as the guardrail itself failing; ``reason`` says what."""

    reason: str


#: Why a tripwire fired (the book's GuardrailKind).
GuardrailKind: TypeAlias = InputPolicy | OutputPolicy | OtherKind


@final
@attrs.frozen
class Pass:
    """All clear; the run goes on."""


@final
@attrs.frozen
class Tripwire:
    """Halt the run: ``kind`` says why, ``info`` is free-form JSON."""

    kind: GuardrailKind
    info: JsonValue = None


#: A guardrail's answer.
GuardrailVerdict: TypeAlias = Pass | Tripwire


def tripwire_from_error(message: str) -> Tripwire:
    """The tripwire a failed guardrail counts as (kind Other, the error as reason).

    >>> tripwire_from_error("moderation API timed out")
    Tripwire(kind=OtherKind(reason='moderation API timed out'), info=None)
    """
    return Tripwire(OtherKind(message))


def fold_guardrails(verdicts: Iterable[GuardrailVerdict]) -> GuardrailVerdict:
    """The verdict of guardrails given in *declaration* order: the first tripwire, else Pass.

    >>> fold_guardrails([Pass(), Tripwire(OutputPolicy(), {"n": 2}), Tripwire(InputPolicy())])
    Tripwire(kind=OutputPolicy(), info={'n': 2})
    >>> fold_guardrails([])
    Pass()
    """
    for verdict in verdicts:
        if isinstance(verdict, Tripwire):
            return verdict
    return Pass()


def deprecated_settle_guardrails(slots: Sequence[GuardrailVerdict | None]) -> GuardrailVerdict | None:
    """Deprecated (nothing in helikon uses it; served as ``helikon.governance.settle_guardrails``
    until that alias goes): the fold as soon as it is decided; ``slots`` are in declaration
    order, None for a guardrail still running. Returns None while undecided.

    A tripwire decides once every guardrail declared before it passed, so the
    reported tripwire never depends on completion order.

    >>> deprecated_settle_guardrails([None, Tripwire(InputPolicy())]) is None
    True
    >>> deprecated_settle_guardrails([Pass(), Tripwire(InputPolicy()), None])
    Tripwire(kind=InputPolicy(), info=None)
    """
    for slot in slots:
        match slot:
            case None:
                return None
            case Tripwire():
                return slot
            case Pass():
                continue
            case _:
                assert_never(slot)
    return Pass()


def kind_label(kind: GuardrailKind) -> str:
    """A short label for events and errors (``GuardrailTriggered.kind``).

    >>> kind_label(InputPolicy()), kind_label(OtherKind("boom"))
    ('input_policy', 'other: boom')
    """
    match kind:
        case InputPolicy():
            return "input_policy"
        case OutputPolicy():
            return "output_policy"
        case OtherKind(reason):
            return f"other: {reason}"
        case _:
            assert_never(kind)


__all__ = [
    "GuardrailInput",
    "GuardrailKind",
    "GuardrailVerdict",
    "InputPolicy",
    "ModelOutput",
    "OtherKind",
    "OutputPolicy",
    "Pass",
    "Tripwire",
    "UserText",
    "fold_guardrails",
    "kind_label",
    "tripwire_from_error",
]
