"""The trace format: header, steps, end line; versioned and byte-stable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from helikon import LlmAgent, Trace, codec, tool
from helikon.effects import Effect
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.testing import MockModel, call_tools, say
from helikon.trace import (
    FORMAT,
    TEXT_MIN,
    VERSION,
    TraceFormatError,
    TraceVersionWarning,
    _resolve,
    fingerprint,
    main,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def make_agent(**kw: Any) -> LlmAgent[Any]:
    model = MockModel([call_tools(("add", {"a": 1, "b": 2})), say("3")])
    return LlmAgent(name="calc", model=model, instructions="Add.", tools=[add], **kw)


def record(agent: LlmAgent[Any]) -> Trace:
    recorder = RecordingInterpreter(LiveInterpreter("run-1"))

    async def go() -> None:
        async for _ in agent.run(None, "1+2?", interpreter=recorder):
            pass

    trio.run(go)
    return recorder.trace


def plain(trace: Trace) -> list[dict[str, Any]]:
    """The trace's records, text lines left out and text references
    replaced by their texts (what a reader of the format does)."""
    records = [msgspec.json.decode(line) for line in trace.to_lines()]
    texts = {r["id"]: r["text"] for r in records if r["kind"] == "text"}
    return [_resolve(r, texts) for r in records if r["kind"] != "text"]


def test_a_trace_is_a_header_then_steps_then_an_end_line() -> None:
    lines = plain(record(make_agent()))

    assert [line["kind"] for line in lines] == ["header", "step", "step", "step", "end"]
    header = lines[0]
    assert header["format"] == FORMAT and header["version"] == VERSION
    assert header["agent"] == "calc" and header["run_id"] == "run-1"
    assert header["definition"]["tools"][0]["name"] == "add"
    assert [line["effect"]["type"] for line in lines[1:-1]] == ["CallModel", "ExecuteTools", "CallModel"]
    assert lines[-1]["events"][-1]["type"] == "RunCompleted"


def test_lines_have_sorted_keys_and_records_are_byte_stable() -> None:
    first, second = record(make_agent()).to_bytes(), record(make_agent()).to_bytes()

    assert first == second
    for line in first.splitlines():
        keys = list(msgspec.json.decode(line))
        assert keys == sorted(keys)


def test_events_are_the_runs_events_in_order() -> None:
    recorder = RecordingInterpreter(LiveInterpreter("run-1"))
    agent = make_agent()

    async def go() -> list[Any]:
        return [event async for event in agent.run(None, "1+2?", interpreter=recorder)]

    events = trio.run(go)
    assert recorder.trace.events == tuple(events)


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    trace = record(make_agent())
    path = tmp_path / "sub" / "t.jsonl"

    trace.dump(path)

    assert Trace.load(path) == trace
    assert path.read_bytes() == trace.to_bytes()


def test_the_fingerprint_follows_the_definition() -> None:
    base = make_agent().spec
    assert fingerprint(base) == fingerprint(make_agent().spec)
    assert fingerprint(base) != fingerprint(make_agent(description="x").with_instructions("Other.").spec)
    assert fingerprint(base) != fingerprint(make_agent().with_tools().spec)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no header line"),
        (b"not json\n", "not JSON"),
        (b'{"kind": "step"}\n', "no header line"),
        (b'{"kind": "header", "format": "other", "version": 1}\n', "is not 'helikon-trace'"),
        (b'{"kind": "header", "format": "helikon-trace", "version": 2}\n', "version 2 is not supported"),
        (
            b'{"kind": "header", "format": "helikon-trace", "version": 3, "agent": "a", "run_id": "r", '
            b'"fingerprint": "f", "input": []}\n{"kind": "step", "index": 0}\n'
            b'{"kind": "end", "events": []}\n',
            "<trace>:2: malformed trace line: missing key 'effect'",
        ),
        (
            b'{"kind": "header", "format": "helikon-trace", "version": 4, "agent": "a", "run_id": "r", '
            b'"fingerprint": "f", "input": [{"$text": 7}]}\n{"kind": "end", "events": []}\n',
            "<trace>:1: malformed trace line: it refers to text 7",
        ),
    ],
)
def test_unreadable_traces_fail_with_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message):
        Trace.from_bytes(data)


def test_trace_before_any_run_is_an_error() -> None:
    from helikon import StepError

    with pytest.raises(StepError, match="nothing was recorded"):
        RecordingInterpreter().trace  # noqa: B018


def test_long_strings_are_written_once_on_text_lines() -> None:
    prompt = "Please add one and two, and explain the result in plain words."
    agent = make_agent().with_instructions("You are a careful calculator. " * 3)
    recorder = RecordingInterpreter(LiveInterpreter("run-1"))

    async def go() -> None:
        async for _ in agent.run(None, prompt, interpreter=recorder):
            pass

    trio.run(go)
    data = recorder.trace.to_bytes()
    texts = [msgspec.json.decode(line) for line in data.splitlines() if b'"kind":"text"' in line]

    assert data.count(prompt.encode()) == 1  # the header's input and both model requests refer to it
    assert [t["text"] for t in texts].count(prompt) == 1
    assert all(len(t["text"]) >= TEXT_MIN for t in texts)
    assert Trace.from_bytes(data) == recorder.trace


def test_a_one_word_prompt_change_changes_one_line() -> None:
    def lines_for(prompt: str) -> list[bytes]:
        recorder = RecordingInterpreter(LiveInterpreter("run-1"))

        async def go() -> None:
            async for _ in make_agent().run(None, prompt, interpreter=recorder):
                pass

        trio.run(go)
        return recorder.trace.to_lines()

    before = lines_for("What do you get when you add one and two?")
    after = lines_for("What do you get when you add one and three?")

    assert len(before) == len(after)
    assert sum(a != b for a, b in zip(before, after, strict=True)) == 1


def test_objects_that_look_like_text_references_survive() -> None:
    from helikon.trace import _Texts

    texts = _Texts()
    value = {"$text": 3, "nested": [{"$object": "x" * 30}], "plain": "short"}
    interned = texts.intern(value)
    table = {n: t for n, t in enumerate(texts.refs)}

    assert _resolve(msgspec.json.decode(msgspec.json.encode(interned)), table) == value


def test_a_truncated_trace_names_the_file_and_line(tmp_path: Path) -> None:
    lines = record(make_agent()).to_bytes().splitlines(keepends=True)
    path = tmp_path / "golden.jsonl"

    path.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(
        TraceFormatError, match=rf"golden.jsonl:{len(lines) - 1}: the trace ends without its end line"
    ):
        Trace.load(path)

    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    with pytest.raises(TraceFormatError, match=rf"golden.jsonl:{len(lines)}: not JSON .* truncated"):
        Trace.load(path)


def test_a_trace_from_a_newer_helikon_warns() -> None:
    newer = f'"version":{VERSION + 1}'.encode()
    data = record(make_agent()).to_bytes().replace(f'"version":{VERSION}'.encode(), newer, 1)

    with pytest.warns(TraceVersionWarning, match="written by a newer helikon"):
        trace = Trace.from_bytes(data)
    assert trace.header.version == VERSION + 1 and len(trace.steps) == 3


def test_upgrade_rewrites_a_version_3_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = record(make_agent())
    v3 = [dict(r) for r in plain(trace)]
    v3[0]["version"] = 3
    for record_, step in zip(v3[1:], trace.steps, strict=False):  # version 3 holds every request whole
        record_["effect"] = codec.unstructure(step.effect, Effect)
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join(msgspec.json.encode(r, order="sorted") + b"\n" for r in v3))

    assert Trace.load(path).steps == trace.steps
    assert main(["upgrade", str(path)]) == 0
    assert f"upgraded to version {VERSION}" in capsys.readouterr().out
    assert Trace.load(path).header.version == VERSION
    assert main(["upgrade", str(path)]) == 0
    assert "already current" in capsys.readouterr().out
    assert main(["upgrade"]) == 2
