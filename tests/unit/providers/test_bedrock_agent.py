"""BedrockModel inside the agent loop: an LlmAgent runs a tool round over the
real recorded Bedrock streams."""

from __future__ import annotations

from typing import Any

import httpx
from test_bedrock_support import WIRE, body_of, event_stream, model, needs_wire, verify_signature

from helikon import LlmAgent, run_sync, tool
from helikon.model import Usage

# -- inside the agent loop ------------------------------------------------------------------------


@tool
async def get_temperature(city: str) -> str:
    """The current temperature of a city.

    Args:
        city: the city's name.
    """
    return f"18 degrees in {city}"


@needs_wire
def test_an_agent_runs_a_tool_round_over_recorded_bedrock_streams() -> None:
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        verify_signature(request)
        bodies.append(body_of(request))
        name = (
            "converse_stream_text_tool_use_nova-micro.bin"
            if len(bodies) == 1
            else "converse_stream_text_nova-micro.bin"
        )
        return event_stream((WIRE / name).read_bytes())

    agent: LlmAgent[None] = LlmAgent(
        name="weather",
        model=model(handler),
        instructions="Answer briefly.",
        tools=[get_temperature],
    )

    result = run_sync(agent, "How warm is it in the capital of France?")

    assert result.final_output.startswith("The capital of France is Paris.")
    assert len(bodies) == 2
    first, second = bodies
    assert first["system"] == [{"text": "Answer briefly."}]
    assert first["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_temperature"
    assert second["messages"][1]["content"][-1] == {
        "toolUse": {
            "toolUseId": "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
            "name": "get_temperature",
            "input": {"city": "Paris"},
        }
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
                    "content": [{"text": "18 degrees in Paris"}],
                }
            }
        ],
    }
    assert result.usage == Usage(471 + 13, 91 + 82)
