"""The quick structure path gives what the converter gives, or refuses.

:func:`helikon._structure.quick` must agree with :func:`helikon.codec.structure`
on every value: the same value where the converter accepts one, an exception
where it refuses (the trace reader then asks the converter for its words).
Checked on every record of the committed traces, and on each of them with
one value replaced by a value of another JSON type (or removed).
"""

from __future__ import annotations

import copy
import linecache
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest

from helikon import codec, trace
from helikon._structure import exact, maker, quick, typed, typed_member
from helikon.effects import CallModel, Effect, EffectResult
from helikon.events import AgentEvent, RunCompleted, TokenDelta
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


def _strict_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the reader take every step line the strict way."""

    def refuse(value: Any, as_type: Any, field: str) -> Any:
        raise RuntimeError("strict way only")

    monkeypatch.setattr(trace, "_fast_step", lambda record, last: None)
    monkeypatch.setattr(trace, "_typed_step", lambda line, last: None)
    monkeypatch.setattr(trace, "_quick_read", refuse)


def _outcome(data: bytes) -> tuple[str, Any]:
    """What reading ``data`` gives: the trace (with its bytes and the types
    of its requests' messages) or the error's words."""
    try:
        read = Trace.from_bytes(data, "t.jsonl")
    except trace.TraceFormatError as exc:
        return "error", str(exc)
    kinds = [type(s.effect.request.messages) for s in read.steps if type(s.effect) is CallModel]
    return "trace", (read, read.to_bytes(), kinds)


def _corrupted_lines(data: bytes) -> Iterator[bytes]:
    """``data`` with one value of a step line's model request (or of its
    live events) replaced by a value of another JSON type, or removed: a
    sample of places of each shape."""
    lines = data.split(b"\n")
    seen: set[str] = set()
    for n, line in enumerate(lines):
        if not line.startswith(b'{"effect":{"request":') and b'"live":[{' not in line:
            continue
        record = msgspec.json.decode(line)
        for key in ("effect", "live"):
            shape = repr((key, _skeleton(record[key])))
            if shape in seen:
                continue
            seen.add(shape)
            places = [(key, *p) for p in _places(record[key])]
            for where in places[:: max(1, len(places) // 12)]:
                variants = [_replaced(record, where, other) for other in OTHERS]
                if type(where[-1]) is str:
                    variants.append(_removed(record, where))
                for variant in variants:
                    changed = msgspec.json.encode(variant, order="sorted")
                    yield b"\n".join([*lines[:n], changed, *lines[n + 1 :]])


@pytest.mark.parametrize(
    "path", [p for p in TRACES if b'"kept":' in p.read_bytes()][:4], ids=lambda p: p.name
)
def test_a_corrupted_step_line_reads_as_the_strict_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed way (a model request decoded as a Struct, live events
    compared in C, carriers made without ``__init__``) takes only what the
    strict way takes, as the same trace, and a line it refuses gets the
    strict way's error."""
    variants = list(_corrupted_lines(path.read_bytes()))
    assert variants
    fast = [_outcome(v) for v in variants]
    _strict_only(monkeypatch)
    strict = [_outcome(v) for v in variants]
    for got, expected in zip(fast, strict, strict=True):
        assert got[0] == expected[0], (got, expected)
        if got[0] == "error":
            assert got[1] == expected[1]
        else:
            assert got[1][0] == expected[1][0]
            assert got[1][1:] == expected[1][1:]
    kinds = {kind for kind, _ in fast}
    assert kinds == {"error", "trace"}, kinds


@pytest.mark.parametrize("path", TRACES[:6], ids=lambda p: p.name)
def test_line_ends_do_not_change_what_a_trace_reads(path: Path) -> None:
    """A file split at line feeds (no carriage return) reads as one split
    the general way (``splitlines``), with CRLF, with blank lines, without
    its last newline."""
    data = path.read_bytes()
    expected = Trace.from_lines(data.splitlines())
    for variant in (data, data.replace(b"\n", b"\r\n"), data.replace(b"\n", b"\n\n"), data.rstrip(b"\n")):
        assert Trace.from_bytes(variant) == expected
        assert Trace.from_bytes(variant).to_bytes() == expected.to_bytes()


def _carriers(value: Any, found: dict[type, Any]) -> None:
    """One instance of each attrs class inside ``value`` (the first met)."""
    if attrs.has(type(value)):
        found.setdefault(type(value), value)
        for field in attrs.fields(type(value)):
            _carriers(getattr(value, field.name), found)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            _carriers(item, found)


def test_a_carrier_made_without_init_is_the_one_the_class_makes() -> None:
    """:func:`maker` gives, for every carrier class a trace holds, an
    instance that equals, hashes, prints and pickles as calling the class
    does; for a class whose ``__init__`` does more, the class itself."""
    found: dict[type, Any] = {}
    for path in TRACES:
        _carriers(Trace.from_bytes(path.read_bytes()), found)
    bare = 0
    for cls, instance in found.items():
        values = [getattr(instance, f.name) for f in attrs.fields(cls)]
        made = maker(cls)(*values)
        called = cls(
            *[v for v, f in zip(values, attrs.fields(cls), strict=True) if not f.kw_only],
            **{f.name: v for v, f in zip(values, attrs.fields(cls), strict=True) if f.kw_only},
        )
        assert type(made) is cls
        assert made == called and repr(made) == repr(called)
        assert pickle.dumps(made) == pickle.dumps(called)
        assert getattr(made, "__dict__", None) == getattr(called, "__dict__", None)
        assert list(getattr(made, "__dict__", {})) == list(getattr(called, "__dict__", {}))
        try:
            expected_hash: Any = hash(called)
        except TypeError:  # a field holds raw JSON (a dict): neither hashes
            expected_hash = None
        if expected_hash is not None:
            assert hash(made) == expected_hash
        bare += maker(cls) is not cls
    assert bare > 20 and maker(TraceHeader) is TraceHeader  # a factory default: the class


def test_a_class_whose_init_does_more_is_called() -> None:
    @attrs.frozen
    class Checked:
        n: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Hooked:
        n: int

        def __attrs_post_init__(self) -> None:
            pass

    @attrs.frozen(cache_hash=True)
    class Cached:
        n: int

    @attrs.frozen
    class Converted:
        n: int = attrs.field(converter=int)

    @attrs.frozen
    class Private:
        _n: int

    for cls in (Checked, Hooked, Cached, Private):
        assert maker(cls) is cls
    assert maker(Converted) is not Converted
    assert maker(Converted)("3") == Converted("3") == Converted(3)


def test_a_stale_line_cache_never_stands_for_an_init() -> None:
    # The line cache is cleared and a class of the same name defined again:
    # attrs may give its ``__init__`` the same file name, so the text read
    # for the first class's ``__init__`` is the second's, which only stores.
    def define(checked: bool) -> type:
        if checked:

            @attrs.frozen
            class Twin:
                n: int = attrs.field(validator=attrs.validators.instance_of(int))

        else:

            @attrs.frozen  # type: ignore[no-redef]
            class Twin:
                n: int

        return Twin

    first = define(checked=True)
    linecache.clearcache()
    second = define(checked=False)

    assert maker(first) is first  # its validator runs
    with pytest.raises(TypeError):
        maker(first)("3")
    assert maker(second) is not second


def test_exact_mirrors() -> None:
    """Only mirrors whose equal values have one JSON text are compared with ``==``."""
    assert exact(str) and exact(tuple[int | str, ...]) and exact(str | None)
    assert not exact(float) and not exact(Any) and not exact(tuple[float, ...])
    assert exact(typed_member(TokenDelta)[0]) and not exact(typed_member(RunCompleted)[0])
