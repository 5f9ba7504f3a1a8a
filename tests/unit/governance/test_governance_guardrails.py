"""Guardrail verdicts: the fold in declaration order and errors as tripwires."""

from __future__ import annotations

import itertools

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
    settle_guardrails,
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
        settled: GuardrailVerdict | None = None
        for index in order:  # results arrive in this completion order
            slots[index] = declared[index]
            settled = settle_guardrails(slots)
            if settled is not None:
                break
        assert settled == Tripwire(InputPolicy(), 1)


def test_settling_waits_for_earlier_guardrails() -> None:
    assert settle_guardrails([None, Tripwire(InputPolicy())]) is None
    assert settle_guardrails([Pass(), None]) is None
    assert settle_guardrails([]) == Pass()


def test_a_guardrail_error_is_a_tripwire_of_kind_other() -> None:
    trip = tripwire_from_error("classifier unavailable")
    assert trip == Tripwire(OtherKind("classifier unavailable"), None)
    assert fold_guardrails([Pass(), trip]) == trip
    assert kind_label(trip.kind) == "other: classifier unavailable"
    assert kind_label(OutputPolicy()) == "output_policy"


def test_verdicts_are_data() -> None:
    for verdict in (Pass(), Tripwire(InputPolicy(), {"a": [1]}), tripwire_from_error("x")):
        assert codec.from_json(codec.to_json(verdict, GuardrailVerdict), GuardrailVerdict) == verdict
