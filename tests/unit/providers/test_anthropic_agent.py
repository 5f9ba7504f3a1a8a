"""AnthropicModel inside the agent loop: a real ``LlmAgent`` with a ``@tool``
runs a tool round over an ``httpx.MockTransport`` and answers; the second
request carries the first turn back (thinking with its signature, tool_use,
tool_result)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anyio
import httpx
import pytest
from test_anthropic_support import OWN, Pieces

from helikon import LlmAgent, RunCompleted, RunError, RunResult, ToolCallItem, Usage, collect, run_sync, tool
from helikon.errors import ModelFailed, Unavailable
from helikon.providers.anthropic import AnthropicModel, CacheStrategy, ExtendedThinking


@tool
async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


class Script:
    """Answers the n-th request with the n-th body; keeps the request bodies."""

    def __init__(self, *names: str) -> None:
        self.bodies = [(OWN / name).read_bytes() for name in names]
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        body = self.bodies[len(self.sent) - 1]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Pieces(body, 5))

    def model(self, **kwargs: Any) -> AnthropicModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return AnthropicModel.messages(
            "claude-sonnet-4-5", api_key="sk-ant-test", http_client=client, **kwargs
        )


def test_an_agent_runs_a_tool_round_and_answers() -> None:
    script = Script("stream_thinking_tool_use.sse", "stream_cache_usage.sse")
    model = script.model(thinking=ExtendedThinking(1024), cache=CacheStrategy.SYSTEM_AND_TOOLS)
    agent: LlmAgent[None] = LlmAgent(
        name="weather", model=model, instructions="You report the weather.", tools=[get_weather]
    )

    result = run_sync(agent, "Weather in Oslo?")

    assert result.final_output == "Cached answer."
    assert result.usage == Usage(610, 88, 0, 0) + Usage(2310, 9, 2048, 0, cache_creation_input_tokens=250)
    calls = [e for e in result.events if isinstance(e, ToolCallItem)]
    assert [(c.item.name, c.item.arguments) for c in calls] == [("get_weather", '{"city": "Oslo"}')]
    assert isinstance(result.events[-1], RunCompleted)

    first, second = script.sent
    assert first["system"] == [
        {"type": "text", "text": "You report the weather.", "cache_control": {"type": "ephemeral"}}
    ]
    assert first["tools"][0]["name"] == "get_weather" and first["thinking"]["budget_tokens"] == 1024
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]}]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The user wants Oslo's weather; I should call get_weather.",
                    "signature": "EqQBCkgIBxABGAIqQHelikonSignatureForTests0123456789==",
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01HelikonOslo",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01HelikonOslo", "content": "sunny in Oslo"}
            ],
        },
    ]


@dataclasses.dataclass
class Category:
    category: str
    recurring: bool


def test_an_agent_with_an_output_type_gets_native_structured_output() -> None:
    script = Script("stream_json_answer.sse", "stream_json_answer.sse")
    agent: LlmAgent[None] = LlmAgent(name="categorizer", model=script.model(), output_type=Category)

    result = run_sync(agent, "NETFLIX.COM 866-579-7172 CA - $15.49")

    assert result.final_output == Category("Subscriptions", True)
    finalizing = [body for body in script.sent if "output_config" in body]
    assert finalizing, "the finalizing turn asks for the schema"
    schema = finalizing[-1]["output_config"]["format"]
    assert schema["type"] == "json_schema" and set(schema["schema"]["properties"]) == {
        "category",
        "recurring",
    }


def test_a_stream_that_fails_mid_run_fails_the_run_with_the_model_error() -> None:
    script = Script("stream_overloaded_error_event.sse")
    agent: LlmAgent[None] = LlmAgent(name="a", model=script.model())

    with pytest.raises(RunError) as info:
        run_sync(agent, "hi")

    assert isinstance(info.value.error, ModelFailed) and isinstance(info.value.error.failure, Unavailable)


def test_the_same_run_works_under_asyncio() -> None:
    script = Script("stream_thinking_tool_use.sse", "stream_cache_usage.sse")
    agent: LlmAgent[None] = LlmAgent(name="weather", model=script.model(), tools=[get_weather])

    async def main() -> RunResult[Any]:
        return await collect(agent.run(None, "Weather in Oslo?"))

    result = anyio.run(main, backend="asyncio")

    assert result.final_output == "Cached answer." and len(script.sent) == 2
