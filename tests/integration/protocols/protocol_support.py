"""Shared pieces of the protocol tests: an agent answering by rule (for any
number of runs, in any process), and a real Hypercorn server on loopback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs

from helikon import LlmAgent
from helikon.items import ToolResult, UserMessage, text_of
from helikon.model import ModelRequest
from helikon.testing import FunctionModel, Pause, call_tools, say
from helikon.testing._function import ModelReply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.loopback import free_port as free_port
from _support.loopback import serving as serving
from _support.paying import approving_context as approving_context
from _support.paying import get_weather as get_weather
from _support.paying import pay as pay


def _last_user_text(request: ModelRequest) -> str:
    for item in reversed(request.messages):
        if isinstance(item, UserMessage):
            return text_of(item.content)
    return ""


def answer(request: ModelRequest) -> ModelReply:
    """``weather`` calls get_weather; ``pay N`` calls pay; ``locate`` calls
    the client's ``where_am_i``; after a tool: ``The tool said: ...``; else
    ``echo: <text>``; ``slow`` waits 30 s; ``report`` answers JSON;
    ``transfer ...`` hands off (when it can), and the target answers ``...``."""
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResult) and not last.name.startswith("transfer_to_"):
        return f"The tool said: {last.content}"
    text = _last_user_text(request)
    words = text.split()
    if words[:1] == ["transfer"]:
        targets = [t.name for t in request.tools if t.name.startswith("transfer_to_")]
        if targets:
            return call_tools((targets[0], {}))
        words = words[1:]
        text = " ".join(words)
    if words[:1] == ["weather"]:
        return call_tools(("get_weather", {"city": "Paris"}))
    if words[:1] == ["pay"] and len(words) == 2:
        return call_tools(("pay", {"amount": int(words[1])}))
    if words[:1] == ["slow"]:
        return [Pause(30.0), *say("too late")]
    if words[:1] == ["report"]:
        return '{"city": "Paris", "sunny": true}'
    if words[:1] == ["locate"] and any(t.name == "where_am_i" for t in request.tools):
        return call_tools(("where_am_i", {"precision": "city"}))
    return f"echo: {text}"


def assistant(name: str = "assistant") -> LlmAgent[Any]:
    return LlmAgent(
        name=name,
        model=FunctionModel(answer),
        instructions="Help.",
        tools=[get_weather, pay],
        description="Answers questions about the weather and pays bills.",
    )


@attrs.frozen
class Report:
    """A weather report."""

    city: str
    sunny: bool


def reporter() -> LlmAgent[Any]:
    """An agent with structured output."""
    return LlmAgent(name="reporter", model=FunctionModel(answer), output_type=Report, description="Reports.")


