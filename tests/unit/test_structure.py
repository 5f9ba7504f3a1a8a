"""The quick structure path gives what the converter gives, or refuses.

:func:`helikon._structure.quick` must agree with :func:`helikon.codec.structure`
on every value: the same value where the converter accepts one, an exception
where it refuses (the trace reader then asks the converter for its words).
Checked on every record of the committed traces, and on each of them with
one value replaced by a value of another JSON type (or removed).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from helikon import codec, trace
from helikon._structure import quick, typed
from helikon.effects import CallModel, Effect, EffectResult
from helikon.events import AgentEvent
from helikon.items import Item
from helikon.model import ModelRequest
from helikon.trace import Trace, TraceHeader

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(
    [
        *(ROOT / "tests/golden/traces").glob("*.jsonl"),
        *(ROOT / "tests/fixtures/traces_v4").glob("*.jsonl"),
        *(ROOT / "examples/golden_project/tests/goldens").glob("*.jsonl"),
    ]
)
EVENTS: Any = tuple[AgentEvent, ...]
#: Values of every JSON type, put in place of a value to see both paths refuse it (or agree).
OTHERS: tuple[Any, ...] = (
    *(None, True, False, 0, 1, -3, 1.5),
    *("", "x", "tool_calls", [], [1], {}, {"type": "Nope"}),
)


def _fields() -> Iterator[tuple[Any, Any]]:
    """Every (raw value, type) the reader structures, from the committed traces."""
    for path in TRACES:
        lines = [msgspec.json.decode(line) for line in path.read_bytes().splitlines() if line.strip()]
        texts = {r["id"]: r["text"] for r in lines if r.get("kind") == "text"}
        for raw in lines:
            record = trace._resolve(raw, texts)
            if record.get("kind") == "header":
                yield {k: v for k, v in record.items() if k != "kind"}, TraceHeader
            if record.get("kind") == "step":
                yield record["result"], EffectResult
                yield record["events"], EVENTS
                yield record.get("live", []), EVENTS
                effect = record["effect"]
                request = effect.get("request") if type(effect) is dict else None
                if type(request) is dict and "kept" not in request:
                    yield effect, Effect
                    yield request, ModelRequest
                elif type(request) is dict:
                    yield request.get("messages"), tuple[Item, ...]
                else:
                    yield effect, Effect
            if record.get("kind") == "end":
                yield record["events"], EVENTS


FIELDS = list(_fields())


def _agree(value: Any, as_type: Any) -> str:
    """How both paths answer ``value``: "value" when both give the same
    value, "refused" when both refuse, "strict" when only the quick path
    refuses (the reader then takes the converter's value: slower, not
    wrong); a quick value that differs from the converter's, or a value
    the converter refuses, fails the test."""
    try:
        expected = codec.structure(copy.deepcopy(value), as_type)
    except Exception:
        expected = None
        refused = True
    else:
        refused = False
    _typed_agrees(value, as_type, refused, expected)
    try:
        got = quick(as_type)(copy.deepcopy(value))
    except Exception:
        return "refused" if refused else "strict"
    assert not refused, f"the quick path took what the converter refuses: {value!r:.300} as {as_type}"
    assert got == expected and type(got) is type(expected), f"{got!r:.300} != {expected!r:.300}"
    return "value"


def _typed_agrees(value: Any, as_type: Any, refused: bool, expected: Any) -> None:
    """The typed path (a line decoded by msgspec as mirrors of the carriers,
    then built) takes only what the converter takes, as the same value; what
    it refuses the reader reads the other ways."""
    mirror, build = typed(as_type)
    try:
        decoded = msgspec.json.decode(msgspec.json.encode(value), type=mirror)
        got = decoded if build is None else build(decoded)
    except Exception:
        return
    assert not refused, f"the typed path took what the converter refuses: {value!r:.300} as {as_type}"
    assert got == expected and type(got) is type(expected), f"{got!r:.300} != {expected!r:.300}"


def _skeleton(value: Any) -> Any:
    """A value's shape: its keys and class tags, not its data (one value of
    each shape is enough to corrupt)."""
    if type(value) is dict:
        return tuple((k, v if k == "type" else _skeleton(v)) for k, v in sorted(value.items()))
    if type(value) is list:
        return tuple(dict.fromkeys(_skeleton(v) for v in value))
    return type(value).__name__


def _places(value: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (itself included)."""
    yield where
    if type(value) is dict:
        for key, item in value.items():
            yield from _places(item, (*where, key))
    elif type(value) is list:
        for n, item in enumerate(value):
            yield from _places(item, (*where, n))


def _replaced(value: Any, where: tuple[Any, ...], other: Any) -> Any:
    if not where:
        return other
    out = copy.deepcopy(value)
    target = out
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = other
    return out


def _removed(value: Any, where: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(value)
    target = out
    for key in where[:-1]:
        target = target[key]
    del target[where[-1]]
    return out


def test_there_are_traces_to_check() -> None:
    assert len(TRACES) >= 15
    kinds = {tp for _, tp in FIELDS}
    assert {EffectResult, EVENTS, Effect, TraceHeader, ModelRequest} <= kinds


@pytest.mark.parametrize(("value", "as_type"), FIELDS[:: max(1, len(FIELDS) // 400)])
def test_the_quick_path_reads_every_recorded_value_as_the_converter_does(value: Any, as_type: Any) -> None:
    assert _agree(value, as_type) == "value"


def test_a_value_of_another_type_anywhere_is_refused_or_read_alike() -> None:
    answers = {"value": 0, "refused": 0, "strict": 0}
    seen: set[str] = set()
    for value, as_type in FIELDS:
        shape = repr((as_type, _skeleton(value)))
        if shape in seen:
            continue
        seen.add(shape)
        places = list(_places(value))
        for where in places[:: max(1, len(places) // 40)]:  # at most about 40 places of each shape
            for other in OTHERS:
                answers[_agree(_replaced(value, where, other), as_type)] += 1
            if where and type(where[-1]) is str:
                answers[_agree(_removed(value, where), as_type)] += 1
    # Both kinds of answer occur (a test of agreement that only ever saw refusals would prove little).
    assert answers["refused"] > 500 and answers["value"] > 500, answers


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_a_trace_reads_the_same_the_quick_way_and_the_strict_way(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = path.read_bytes()
    quickly = Trace.from_bytes(data)

    def refuse(value: Any, as_type: Any, field: str) -> Any:
        raise RuntimeError("strict way only")

    monkeypatch.setattr(trace, "_fast_step", lambda record, last: None)
    monkeypatch.setattr(trace, "_typed_step", lambda line, last: None)
    quick_way = Trace.from_bytes(data)  # without the quickest way for a step line
    assert quickly == quick_way
    assert [type(s.effect.request.messages) for s in quickly.steps if type(s.effect) is CallModel] == [
        type(s.effect.request.messages) for s in quick_way.steps if type(s.effect) is CallModel
    ]
    monkeypatch.setattr(trace, "_quick_read", refuse)
    strictly = Trace.from_bytes(data)
    assert quickly == strictly
    assert quickly.header.definition == strictly.header.definition  # not part of ==
    assert quickly.to_bytes() == strictly.to_bytes()
