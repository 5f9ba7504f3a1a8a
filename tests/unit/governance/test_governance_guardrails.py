"""Guardrail verdicts: the fold in declaration order and errors as tripwires."""

from __future__ import annotations

import itertools

import pytest

from helikon import codec
from helikon.governance import (
    GuardrailVerdict,
    InputPolicy,
    OtherKind,
    OutputPolicy,
    Pass,
    Tripwire,
    fold_guardrails,
    kind_label,
    tripwire_from_error,
)


def test_all_pass_passes() -> None:
    assert fold_guardrails([Pass(), Pass()]) == Pass()
    assert fold_guardrails([]) == Pass()


def test_the_first_tripwire_in_declaration_order_is_reported() -> None:
    first = Tripwire(InputPolicy(), {"matched": "private key"})
    second = Tripwire(OutputPolicy())
    assert fold_guardrails([Pass(), first, second]) == first


def test_completion_order_does_not_matter() -> None:
    declared: list[GuardrailVerdict] = [
        Pass(),
        Tripwire(InputPolicy(), 1),
        Pass(),
        Tripwire(OutputPolicy(), 2),
    ]
    for order in itertools.permutations(range(len(declared))):
        slots: list[GuardrailVerdict | None] = [None] * len(declared)
        for index in order:  # results arrive in this completion order
            slots[index] = declared[index]
        assert fold_guardrails(v for v in slots if v is not None) == Tripwire(InputPolicy(), 1)


def test_settle_guardrails_is_a_deprecated_alias_that_still_works() -> None:
    import helikon.governance as governance

    with pytest.warns(DeprecationWarning, match="settle_guardrails is deprecated.*fold_guardrails"):
        settle = governance.settle_guardrails  # type: ignore[attr-defined]

    assert "settle_guardrails" not in governance.__all__
    assert settle([None, Tripwire(InputPolicy())]) is None
    assert settle([Pass(), None]) is None
    assert settle([Pass(), Tripwire(InputPolicy()), None]) == Tripwire(InputPolicy())
    assert settle([]) == Pass()


def test_a_guardrail_error_is_a_tripwire_of_kind_other() -> None:
    trip = tripwire_from_error("classifier unavailable")
    assert trip == Tripwire(OtherKind("classifier unavailable"), None)
    assert fold_guardrails([Pass(), trip]) == trip
    assert kind_label(trip.kind) == "other: classifier unavailable"
    assert kind_label(OutputPolicy()) == "output_policy"


def test_verdicts_are_data() -> None:
    for verdict in (Pass(), Tripwire(InputPolicy(), {"a": [1]}), tripwire_from_error("x")):
        assert codec.from_json(codec.to_json(verdict, GuardrailVerdict), GuardrailVerdict) == verdict
