"""GeminiModel inside the agent loop: a real ``LlmAgent`` with a ``@tool`` runs
a tool round over ``httpx.MockTransport`` and answers. The second request
carries the first turn back (the thought text, the signed ``functionCall``,
the ``functionResponse`` matched by name), and a structured-output run ends
with a ``responseSchema`` turn that offers no tools."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from helikon import LlmAgent, RunCompleted, RunError, ToolCallItem, Usage, run_sync, tool
from helikon.errors import ModelFailed, Unavailable
from helikon.providers.gemini import GeminiModel

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gemini"


@tool
async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


@attrs.frozen
class Forecast:
    city: str
    sky: str


class Pieces(httpx.AsyncByteStream):
    def __init__(self, data: bytes, size: int = 7) -> None:
        self.data, self.size = data, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.size):
            yield self.data[start : start + self.size]

    async def aclose(self) -> None:
        pass


class Script:
    """Answers the n-th request with the n-th fixture; keeps the request bodies."""

    def __init__(self, *names: str, status: int = 200) -> None:
        self.bodies = [(FIXTURES / name).read_bytes() for name in names]
        self.status = status
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["x-goog-api-key"] == "AIza-test"
        self.sent.append(json.loads(request.content))
        body = self.bodies[len(self.sent) - 1]
        content_type = "text/event-stream" if self.status == 200 else "application/json"
        return httpx.Response(self.status, headers={"content-type": content_type}, stream=Pieces(body))

    def model(self) -> GeminiModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return GeminiModel.developer("gemini-2.5-flash", api_key="AIza-test", http_client=client)


def test_an_agent_runs_a_tool_round_and_answers() -> None:
    script = Script("agent_turn1_call.sse", "agent_turn2_text.sse")
    agent: LlmAgent[None] = LlmAgent(
        name="weather", model=script.model(), instructions="You report the weather.", tools=[get_weather]
    )

    result = run_sync(agent, "Weather in Oslo?")

    assert result.final_output == "It is sunny in Oslo."
    assert result.usage == Usage(60, 8 + 20, 0, 20) + Usage(95, 6, 32, 0)
    calls = [e.item for e in result.events if isinstance(e, ToolCallItem)]
    # Gemini gives no call ids: the loop derives one, deterministically.
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city":"Oslo"}')]
    assert calls[0].call_id.startswith("call_")
    assert isinstance(result.events[-1], RunCompleted)

    first, second = script.sent
    assert first["systemInstruction"] == {"parts": [{"text": "You report the weather."}]}
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_weather"
    assert declaration["parameters"]["properties"]["city"]["type"] == "string"
    assert "additionalProperties" not in json.dumps(declaration)
    assert first["contents"] == [{"role": "user", "parts": [{"text": "Weather in Oslo?"}]}]
    assert second["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Oslo?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "The user wants Oslo's weather; call get_weather.", "thought": True},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": "c2lnLW9zbG8=",
                },
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny in Oslo"}}}],
        },
    ]


def test_a_structured_output_run_finalises_without_tools() -> None:
    script = Script("agent_turn1_call.sse", "agent_turn2_text.sse", "agent_turn3_json.sse")
    agent: LlmAgent[None] = LlmAgent(
        name="weather", model=script.model(), tools=[get_weather], output_type=Forecast
    )

    result = run_sync(agent, "Weather in Oslo?")

    assert result.final_output == Forecast("Oslo", "sunny")
    assert len(script.sent) == 3
    final = script.sent[2]
    assert "tools" not in final and "toolConfig" not in final
    config = final["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"]["type"] == "object"
    assert set(config["responseSchema"]["properties"]) == {"city", "sky"}
    assert "additionalProperties" not in json.dumps(config)
    # The history still carries the tool round.
    kinds = [next(iter(p)) for c in final["contents"] for p in c["parts"]]
    assert "functionCall" in kinds and "functionResponse" in kinds


def test_a_provider_failure_fails_the_run() -> None:
    script = Script("error_503_unavailable.json", status=503)
    agent: LlmAgent[None] = LlmAgent(name="weather", model=script.model(), tools=[get_weather])
    with pytest.raises(RunError) as info:
        run_sync(agent, "Weather in Oslo?")
    error = info.value.error
    assert isinstance(error, ModelFailed) and isinstance(error.failure, Unavailable)
    assert "gcp.gemini gemini-2.5-flash" in error.failure.message
