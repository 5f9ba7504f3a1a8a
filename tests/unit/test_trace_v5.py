"""Trace format 5: a model request records only what is new since its agent
path's previous one, and reads back whole (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from helikon import LlmAgent, RunConfig, Trace, codec, tool
from helikon.effects import (
    AllPerformed,
    AtPath,
    CallModel,
    Effect,
    EffectResult,
    ModelResponded,
    PerformAll,
)
from helikon.events import AgentEvent
from helikon.ids import CallId
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.items import ToolCall, ToolResult, system_text, user_text
from helikon.model import Finish, FinishReason, ModelRequest, ModelSettings, TextChunk, ToolDef
from helikon.testing import MockModel, call_tools, say
from helikon.trace import VERSION, TraceFormatError, TraceHeader, TraceStep, _resolve, _Texts, main


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def run_of(turns: int, **kw: Any) -> Trace:
    script = [call_tools((f"c{n}", "add", {"a": n, "b": 1})) for n in range(turns)] + [say("done")]
    agent = LlmAgent(
        name="calc",
        model=MockModel(script),
        tools=[add],
        config=RunConfig(max_turns=turns + 1),
        **{"instructions": "You add numbers, carefully and always with the tool.", **kw},
    )
    recorder = RecordingInterpreter(LiveInterpreter("run-5"))

    async def go() -> None:
        async for _ in agent.run(None, "Add them all.", interpreter=recorder):
            pass

    trio.run(go)
    return recorder.trace


def records(trace: Trace) -> list[dict[str, Any]]:
    lines = [msgspec.json.decode(line) for line in trace.to_lines()]
    texts = {r["id"]: r["text"] for r in lines if r["kind"] == "text"}
    return [_resolve(r, texts) for r in lines if r["kind"] == "step"]


def as_version_4(trace: Trace) -> bytes:
    """``trace`` as version 4 wrote it: every model request whole."""
    texts = _Texts()
    header = codec.unstructure(trace.header)
    header.pop("started", None)
    header.update(kind="header", version=4)
    out = [msgspec.json.encode(texts.intern(header), order="sorted")]
    out.extend(texts.flush())
    for step in trace.steps:
        record = {
            "kind": "step",
            "index": step.index,
            "path": list(step.path),
            "effect": codec.unstructure(step.effect, Effect),
            "result": codec.unstructure(step.result, EffectResult),
            "events": [codec.unstructure(e, AgentEvent) for e in step.events],
            "live": [codec.unstructure(e, AgentEvent) for e in step.live],
        }
        interned = texts.intern(record)
        out.extend(texts.flush())
        out.append(msgspec.json.encode(interned, order="sorted"))
    end = {"kind": "end", "events": [codec.unstructure(e, AgentEvent) for e in trace.final_events]}
    interned = texts.intern(end)
    out.extend(texts.flush())
    out.append(msgspec.json.encode(interned, order="sorted"))
    return b"".join(line + b"\n" for line in out)


def test_a_later_request_records_only_its_new_messages() -> None:
    trace = run_of(3)
    calls = [r["effect"] for r in records(trace) if r["effect"]["type"] == "CallModel"]

    first, *later = (c["request"] for c in calls)
    assert set(first) == {"messages", "tools", "settings", "instructions"}  # the first is whole
    assert first["instructions"] == "You add numbers, carefully and always with the tool."
    for request in later:  # then: how many are kept, the two new messages; nothing unchanged
        assert set(request) == {"kept", "messages"}
        assert [m["type"] for m in request["messages"]] == ["ToolCall", "ToolResult"]
    assert [r["kept"] for r in later] == [1, 3, 5]


def test_requests_read_back_whole_and_the_run_replays_strictly() -> None:
    trace = run_of(4)
    back = Trace.from_bytes(trace.to_bytes())

    assert back.steps == trace.steps
    last = [s.effect for s in back.steps if type(s.effect) is CallModel][-1]
    assert len(last.request.messages) == 1 + 4 * 2
    earlier = [s.effect for s in back.steps if type(s.effect) is CallModel][-2]
    assert last.request.messages[0] is earlier.request.messages[0]  # shared, not copied

    agent = LlmAgent(
        name="calc",
        model=MockModel([]),
        tools=[add],
        config=RunConfig(max_turns=5),
        instructions="You add numbers, carefully and always with the tool.",
    )

    async def replay() -> None:
        async for _ in agent.run(None, "Add them all.", interpreter=ReplayInterpreter(back)):
            pass

    trio.run(replay)


def _call(messages: tuple[Any, ...], **kw: Any) -> CallModel:
    return CallModel(ModelRequest(messages, **kw), 1)


HI = user_text("Hi")
CALL = ToolCall(CallId("c1"), "f", "{}")
DONE = ToolResult(CallId("c1"), "f", "ok")
REPLY = ModelResponded((TextChunk("x"), Finish(FinishReason.STOP)))
F = ToolDef("f", "A tool.", {"type": "object"})


def synthetic(*effects: Effect) -> Trace:
    header = TraceHeader(agent="a", run_id="r", fingerprint="f", input=(HI,))
    answers = [AllPerformed(()) if type(e) is PerformAll else REPLY for e in effects]
    steps = tuple(TraceStep(n, e, a, ()) for n, (e, a) in enumerate(zip(effects, answers, strict=True)))
    return Trace(header, steps, ())


def test_changed_tools_settings_and_instructions_are_written_and_read_back() -> None:
    trace = synthetic(
        _call((HI,), tools=(F,), instructions="One."),
        _call((HI, CALL, DONE), tools=(F,), instructions="Two."),
        _call((HI, CALL, DONE), settings=ModelSettings(temperature=0.5), instructions="Two."),
        _call((user_text("Other"),), settings=ModelSettings(temperature=0.5), instructions="Two."),
    )
    written = [r["effect"]["request"] for r in records(trace)]

    assert written[1] == {"kept": 1, "messages": written[1]["messages"], "instructions": "Two."}
    assert set(written[2]) == {"kept", "messages", "tools", "settings"} and written[2]["tools"] == []
    assert written[3]["kept"] == 0 and len(written[3]["messages"]) == 1  # a conversation that restarts
    assert Trace.from_bytes(trace.to_bytes()).steps == trace.steps


def test_each_path_of_a_wave_continues_its_own_previous_request() -> None:
    a1, b1 = _call((HI,)), _call((user_text("B"),))
    a2, b2 = _call((HI, CALL, DONE)), _call((user_text("B"), CALL))
    trace = synthetic(
        PerformAll((AtPath(("a",), a1), AtPath(("b",), b1))),
        PerformAll((AtPath(("b",), b2), AtPath(("a",), a2))),
        a2,  # the root path has asked nothing yet: whole
    )
    written = [r["effect"] for r in records(trace)]

    second = {tuple(at["path"]): at["effect"]["request"] for at in written[1]["effects"]}
    assert second[("a",)]["kept"] == 1 and second[("b",)]["kept"] == 1
    assert "kept" not in written[2]["request"]
    back = Trace.from_bytes(trace.to_bytes())
    assert back.steps == trace.steps


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"kept": 0, "messages": []}, "continues no earlier one"),
        ({"kept": 7, "messages": []}, "counts no prefix"),
        ({"kept": "1", "messages": []}, "counts no prefix"),
    ],
)
def test_a_malformed_continuation_is_named(request_: dict[str, Any], message: str) -> None:
    trace = synthetic(_call((HI,)), _call((HI, CALL)))
    lines = trace.to_bytes().splitlines()
    step = next(n for n, line in enumerate(lines) if b'"kept"' in line)
    record = msgspec.json.decode(lines[step])
    record["effect"]["request"] = request_
    if message == "continues no earlier one":
        first = next(n for n, line in enumerate(lines) if b'"kind":"step"' in line)
        lines[first : step + 1] = [msgspec.json.encode({**record, "index": 0})]
    else:
        lines[step] = msgspec.json.encode(record)
    with pytest.raises(TraceFormatError, match=message):
        Trace.from_bytes(b"\n".join(lines))


def test_version_4_reads_and_upgrades_to_5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = run_of(3)
    old = as_version_4(trace)
    assert b'"kept"' not in old
    assert Trace.from_bytes(old).steps == trace.steps

    path = tmp_path / "v4.jsonl"
    path.write_bytes(old)
    assert main(["upgrade", str(path)]) == 0
    assert f"upgraded to version {VERSION}" in capsys.readouterr().out
    upgraded = path.read_bytes()
    assert upgraded == trace.to_bytes() and len(upgraded) < len(old)
    assert Trace.load(path).steps == trace.steps


def test_trace_bytes_per_turn_stay_flat_as_a_run_grows() -> None:
    """Issue 29: 400 turns <= 1 MB, and bytes per turn at 400 <= 1.2x at 100
    (format 4 wrote 3.6x and 14 MB: every request repeated the conversation)."""
    per_turn = {}
    for turns in (100, 400):
        size = len(run_of(turns).to_bytes())
        per_turn[turns] = size / turns
        if turns == 400:
            assert size <= 1_000_000, size
    assert per_turn[400] <= 1.2 * per_turn[100], per_turn


V4 = Path(__file__).parents[1] / "fixtures" / "traces_v4"
GOLDEN = Path(__file__).parents[1] / "golden"


@pytest.mark.parametrize("name", sorted(p.stem for p in V4.glob("*.jsonl")))
def test_a_version_4_golden_upgrades_to_the_golden_recorded_now(name: str, tmp_path: Path) -> None:
    """The format-4 goldens of helikon before issue 29 (every request whole,
    the instructions as its first message) upgrade byte for byte to the
    goldens this helikon records, and replay strictly as they are."""
    import sys

    sys.path.insert(0, str(GOLDEN))
    from scenarios import SCENARIOS

    from helikon.testing import GoldenTraces

    old = V4 / f"{name}.jsonl"
    assert b'"version":4' in old.read_bytes()
    golden = _as_format_4_knew((GOLDEN / "traces" / f"{name}.jsonl").read_bytes())
    assert _as_format_4_knew(Trace.load(old).to_bytes()) == golden

    agent, input, ctx = SCENARIOS[name]()
    GoldenTraces().check(agent, old, input=input, ctx=ctx)  # strict replay of the old file
    copy = tmp_path / old.name
    copy.write_bytes(old.read_bytes())
    assert main(["upgrade", str(copy)]) == 0
    assert _as_format_4_knew(copy.read_bytes()) == golden


def _as_format_4_knew(data: bytes) -> bytes:
    """``data`` (a trace) without what the format-4 goldens could not hold
    and an upgrade cannot invent: the emitting path on events (issue 27) and
    the request and tool-call counts in usage (issue 36). Everything else
    must match byte for byte."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            out = {k: strip(v) for k, v in value.items()}
            if "input_tokens" in out and "output_tokens" in out:  # a Usage
                out.pop("requests", None)
                out.pop("tool_calls", None)
            for key in ("events", "live"):
                events = out.get(key)
                if isinstance(events, list):
                    out[key] = [
                        {k: v for k, v in e.items() if k != "path"} if isinstance(e, dict) else e
                        for e in events
                    ]
            return out
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    lines = [
        json.dumps(strip(json.loads(line)), separators=(",", ":"), ensure_ascii=False)
        for line in data.decode().splitlines()
    ]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(("instructions", "lifted"), [("Be brief.", True), (None, False)])
def test_a_version_4_request_gives_up_its_first_message_only_for_an_agent_with_instructions(
    instructions: str | None, lifted: bool
) -> None:
    request = _call((system_text("Be brief."), HI))
    definition = {"name": "a", "instructions": instructions, "dynamic_instructions": False}
    header = TraceHeader(agent="a", run_id="r", fingerprint="f", input=(HI,), definition=definition)
    old = as_version_4(Trace(header, (TraceStep(0, request, REPLY, ()),), ()))

    (step,) = Trace.from_bytes(old).steps
    assert isinstance(step.effect, CallModel)
    if lifted:
        assert step.effect.request == ModelRequest((HI,), instructions="Be brief.")
    else:
        assert step.effect.request == request.request
