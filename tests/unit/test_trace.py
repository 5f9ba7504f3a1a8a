"""The trace format: header, steps, end line; versioned and byte-stable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from helikon import LlmAgent, Trace, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.testing import MockModel, call_tools, say
from helikon.trace import FORMAT, VERSION, TraceFormatError, fingerprint


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


def test_a_trace_is_a_header_then_steps_then_an_end_line() -> None:
    lines = [msgspec.json.decode(line) for line in record(make_agent()).to_lines()]

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
        (b'{"kind": "header", "format": "helikon-trace", "version": 99}\n', "version 99 is not supported"),
        (
            b'{"kind": "header", "format": "helikon-trace", "version": 3, "agent": "a", "run_id": "r", '
            b'"fingerprint": "f", "input": []}\n{"kind": "step", "index": 0}\n',
            "malformed trace",
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
