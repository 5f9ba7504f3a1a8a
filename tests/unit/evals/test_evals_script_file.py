"""``ScriptFile`` and ``MockModel.from_script_file``: one JSON file of scripts for a whole dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from helikon import LlmAgent, collect
from helikon.cancel import CancellationToken
from helikon.errors import ModelError, OtherModelFailure
from helikon.evals import ScriptFile, ScriptFileError
from helikon.items import user_text
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.testing import MockModel, Pause, call_tools, say

EVERY_EVENT = [
    {"type": "reasoning", "text": "thinking", "signature": "sig"},
    {"type": "text", "text": "Hel"},
    {"type": "text_break"},
    {"type": "text", "text": "lo"},
    {"type": "tool_call", "name": "f", "arguments": {"a": 1}, "call_id": "c1"},
    {"type": "tool_call", "name": "g", "arguments": "{broken"},
    {"type": "usage", "input_tokens": 3, "output_tokens": 2},
    {"type": "pause", "seconds": 0},
    {"type": "error", "message": "boom"},
    {"type": "finish", "reason": "tool_calls", "response_id": "r1"},
]


def test_every_event_type_parses_to_its_script_item() -> None:
    (script,) = ScriptFile.from_data({"default": [EVERY_EVENT]}).default
    assert script[:8] == (
        ReasoningChunk("thinking", "sig"),
        TextChunk("Hel"),
        TextBreak(),
        TextChunk("lo"),
        ToolCallChunk(index=0, call_id="c1", name="f", arguments='{"a":1}'),
        ToolCallChunk(index=1, call_id=None, name="g", arguments="{broken"),
        Usage(3, 2),
        Pause(0.0),
    )
    error = script[8]
    assert isinstance(error, ModelError) and error.failure == OtherModelFailure("boom")
    assert script[9] == Finish(FinishReason.TOOL_CALLS, "r1")


def test_the_shorthands_are_say_and_call_tools() -> None:
    file = ScriptFile.from_data(
        {
            "default": [
                {"say": "Hi there"},
                {
                    "call": [{"name": "f", "arguments": {"x": 1}}, {"name": "g", "call_id": "id-2"}],
                    "text": "Let me",
                },
            ]
        }
    )
    assert file.default == (
        tuple(say("Hi there")),
        tuple(call_tools(("f", {"x": 1}), ("id-2", "g", {}), text="Let me")),
    )


def test_cases_have_their_own_scripts_and_others_play_the_defaults() -> None:
    file = ScriptFile.from_json(
        '{"default": [{"say": "default"}], "cases": {"a": [{"say": "for a"}, {"say": "again"}], "b": []}}'
    )
    assert file.case_ids == ("a", "b")
    assert file.scripts_for("a") == (tuple(say("for a")), tuple(say("again")))
    assert file.scripts_for("b") == ()
    assert file.scripts_for("zzz") == file.scripts_for(None) == (tuple(say("default")),)


def test_a_model_from_a_script_file_plays_its_case(tmp_path: Path) -> None:
    path = tmp_path / "scripts.json"
    path.write_text(json.dumps({"default": [{"say": "default"}], "cases": {"a": [{"say": "for a"}]}}))

    async def answer(model: MockModel) -> str:
        result = await collect(LlmAgent(name="bot", model=model).run(None, "hi"))
        return result.final_output

    assert trio.run(answer, MockModel.from_script_file(path, "a")) == "for a"
    assert trio.run(answer, MockModel.from_script_file(str(path))) == "default"
    loaded = ScriptFile.load(path)
    model = MockModel.from_script_file(loaded, "a", model_id="scripted")
    assert model.model_id == "scripted" and len(model.remaining) == 1


def test_each_model_is_fresh_and_runs_out_rather_than_looping() -> None:
    file = ScriptFile.from_json('{"default": [{"say": "once"}]}')
    first, second = file.model_for("x"), file.model_for("x")
    request = ModelRequest((user_text("hi"),))

    async def drain(model: MockModel) -> list[ModelEvent]:
        return [e async for e in model.invoke(request, CancellationToken())]

    assert trio.run(drain, first) == say("once")
    assert trio.run(drain, second) == say("once")
    with pytest.raises(ModelError, match="no script left"):
        trio.run(drain, first)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "the file: must be a JSON object, not a list"),
        ({"defaults": []}, "the file: unknown key 'defaults'"),
        ({"default": {"say": "x"}}, "default: must be a list of scripts (one per model call), not an object"),
        ({"default": ["hello"]}, 'default[0]: must be a list of events, {"say": ...} or {"call": [...]}'),
        ({"default": [{"say": 3}]}, "default[0].say: must be a string, not a number"),
        ({"default": [{"say": "x", "extra": 1}]}, "default[0]: unknown key 'extra'"),
        ({"default": [[{"text": "x"}]]}, 'default[0][0]: must be an event object with a "type"'),
        ({"default": [[{"type": "txt", "text": "x"}]]}, "default[0][0]: unknown event type 'txt'"),
        ({"default": [[{"type": "text"}]]}, "default[0][0]: missing 'text'"),
        ({"default": [[{"type": "text", "text": "x", "txt": 1}]]}, "default[0][0]: unknown key 'txt'"),
        (
            {"default": [[{"type": "finish", "reason": "done"}]]},
            "default[0][0].reason: unknown finish reason 'done'",
        ),
        (
            {"default": [[{"type": "usage", "input_tokens": True}]]},
            "input_tokens: must be an integer, not a boolean",
        ),
        (
            {"default": [[{"type": "pause", "seconds": "1"}]]},
            "default[0][0].seconds: must be a number, not a string",
        ),
        ({"cases": []}, "cases: must be an object of case id -> scripts, not a list"),
        ({"cases": {"a": [{"call": [{"arguments": {}}]}]}}, "cases['a'][0].call[0]: missing 'name'"),
        ({"cases": {"a": [{"call": "f"}]}}, "cases['a'][0].call: must be a list of tool calls, not a string"),
    ],
)
def test_an_invalid_file_is_an_error_naming_the_place(data: object, problem: str) -> None:
    with pytest.raises(ScriptFileError) as info:
        ScriptFile.from_data(data, source="s.json")
    assert str(info.value).startswith("s.json: ")
    assert problem in str(info.value)


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(ScriptFileError, match="cannot read the script file"):
        ScriptFile.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScriptFileError, match=r"bad.json: not JSON"):
        MockModel.from_script_file(tmp_path / "bad.json")


def test_the_example_script_file_loads() -> None:
    root = Path(__file__).resolve().parents[3]
    file = ScriptFile.load(root / "examples" / "evals" / "support_scripts.json")
    assert file.default and file.case_ids
