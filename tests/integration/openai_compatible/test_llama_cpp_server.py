"""helikon against a real OpenAI-compatible server: llama-cpp-python's own
server with SmolLM2-135M-Instruct, on loopback (see ``conftest.py``).

Every test goes through ``OpenAIModel.chat(..., profile="llama.cpp")`` and
the live interpreter, as a user's agent would. The model is tiny: tests
assert what the server and helikon guarantee (grammar-constrained tool
calls and JSON, finish reasons, errors), never the quality of its prose.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
import httpx
import pytest

from conftest import LlamaServer
from helikon import AgentInput, LlmAgent, MemorySession, RunConfig, RunContext, collect, tool
from helikon.cancel import CancellationToken
from helikon.errors import MaxTurnsExceeded, ModelError, OtherModelFailure, RunError, TransportFailure
from helikon.ids import CallId
from helikon.items import ToolCall, ToolResult, user_text
from helikon.model import (
    Finish,
    FinishReason,
    ModelRequest,
    ModelSettings,
    TextChunk,
    ToolChoiceNamed,
    ToolChoiceNone,
    Usage,
)
from helikon.providers.openai import OpenAIModel
from helikon.providers.retry import RetryingModel, RetryPolicy

pytestmark = pytest.mark.integration

#: Greedy decoding, so a run is the same each time.
GREEDY = {"temperature": 0.0, "seed": 7}


@attrs.frozen
class City:
    name: str
    population: int


@tool
async def lookup(city: str) -> str:
    """Look up facts about a city.

    Args:
        city: the city's name.
    """
    return f"{city} has 700000 people."


class Counting(httpx.AsyncClient):
    """An httpx client that keeps the JSON bodies it sent."""

    def __init__(self) -> None:
        super().__init__(timeout=httpx.Timeout(300.0))
        self.bodies: list[dict[str, Any]] = []

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return await super().send(request, **kwargs)


def chat(server: LlamaServer, client: httpx.AsyncClient | None = None, **options: Any) -> OpenAIModel:
    options.setdefault("profile", "llama.cpp")
    return OpenAIModel.chat("smollm2", base_url=server.base_url, extra_body=GREEDY,
                            http_client=client or Counting(), **options)


def run(agent: LlmAgent[None], text: str, session: MemorySession | None = None) -> Any:
    async def main() -> Any:
        ctx = RunContext.ephemeral(None).with_session(session)
        return await collect(agent.run(ctx, text))

    return anyio.run(main)


def forcing(model: OpenAIModel, *, keep: bool = False, **extra: Any) -> LlmAgent[None]:
    return LlmAgent(
        name="facts", model=model,
        instructions="Use the lookup tool once, then answer in one short sentence.", tools=[lookup],
        settings=ModelSettings(tool_choice=ToolChoiceNamed("lookup", keep=keep), max_output_tokens=40),
        config=RunConfig(max_turns=2), **extra,
    )


def test_a_plain_turn_streamed_and_not(llama_server: LlamaServer) -> None:
    for stream in (True, False):
        agent = LlmAgent(name="plain", model=chat(llama_server, stream=stream),
                         settings=ModelSettings(max_output_tokens=16))
        result = run(agent, "Say hello.")
        assert result.final_output.strip()
        if not stream:  # this server reports no usage in a stream (the profile asks for none)
            assert result.usage.input_tokens > 0 and 0 < result.usage.output_tokens <= 16


def test_the_turn_after_a_tool_round_is_accepted_in_a_run_and_across_a_session(
    llama_server: LlamaServer,
) -> None:
    """Defect 1: the tool-call-only message's ``content: null`` was a 500 on
    the turn after every tool round. The tool stays forced (``keep=True``:
    grammar-constrained, so the test does not depend on what a 135M model
    chooses; the reset of a forced choice, defect 5, is the loop's and is
    tested in ``tests/unit/test_tool_choice_reset.py``), so each run is
    two accepted tool rounds ending at ``max_turns``."""
    client = Counting()
    agent = forcing(chat(llama_server, client), keep=True)
    session = MemorySession()

    async def main() -> None:  # one event loop: the client keeps its connections
        for question in ("How many people live in Oslo?", "And in Rome?"):
            ctx = RunContext.ephemeral(None).with_session(session)
            with pytest.raises(RunError) as caught:
                await collect(agent.run(ctx, question))
            assert isinstance(caught.value.error, MaxTurnsExceeded), caught.value

    anyio.run(main)
    assert len(client.bodies) == 4
    sent = [m for b in client.bodies[1:] for m in b["messages"]]
    tool_only = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")]
    assert tool_only and all(m["content"] == "" for m in tool_only)
    assert any(m["role"] == "tool" for m in client.bodies[-1]["messages"])  # the session's history went along
    assert all(b["max_tokens"] == 40 and "max_completion_tokens" not in b for b in client.bodies)


def test_the_reference_null_content_is_what_this_server_refuses_and_it_is_not_retried(
    llama_server: LlamaServer,
) -> None:
    """The profile matters (defect 1), and the refusal is not transient (defect 6)."""
    client = Counting()
    model = RetryingModel(chat(llama_server, client, profile="openai", max_tokens_param="max_tokens"),
                          RetryPolicy(max_attempts=3, base_delay=0.01))
    agent = forcing(model)  # type: ignore[arg-type]
    with pytest.raises(RunError) as caught:
        run(agent, "How many people live in Oslo?")
    assert "content" in str(caught.value) or "valid" in str(caught.value).lower()
    # one first turn, then the refused second turn sent once: no retry
    assert len(client.bodies) == 2
    assert client.bodies[1]["messages"][-2]["content"] is None


def test_max_output_tokens_reaches_the_server(llama_server: LlamaServer) -> None:
    """Defect 3: ``max_completion_tokens`` is unknown to this server."""

    async def main() -> list[Any]:
        model = chat(llama_server, stream=False)
        request = ModelRequest((user_text("Write a long story about a dragon."),), (),
                               ModelSettings(max_output_tokens=8))
        return [e async for e in model.invoke(request, CancellationToken())]

    events = anyio.run(main)
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.output_tokens <= 8
    assert isinstance(events[-1], Finish) and events[-1].reason is FinishReason.LENGTH


@pytest.mark.parametrize("mode", ["json_object", "tool"])
def test_structured_output_over_tool_history_in_each_constrained_mode(
    llama_server: LlamaServer, mode: str
) -> None:
    """Defect 4: an ``output_type`` on an agent with tools, answered after a
    tool round (the round is in the run's input, so the test does not wait
    on the model's choice), in every mode this server constrains;
    ``prompted`` is checked for its request shape in the unit tests."""
    client = Counting()
    model = chat(llama_server, client, structured_output=mode)
    agent = LlmAgent(
        name="facts", model=model, instructions="Answer briefly.", tools=[lookup], output_type=City,
        settings=ModelSettings(tool_choice=ToolChoiceNone(), max_output_tokens=60),
        config=RunConfig(max_turns=3),
    )
    history = AgentInput((
        user_text("How many people live in Oslo? Give the city and its population."),
        ToolCall(CallId("call_1"), "lookup", '{"city": "Oslo"}'),
        ToolResult(CallId("call_1"), "lookup", "Oslo has 700000 people."),
    ))

    async def main() -> Any:
        return await collect(agent.run(RunContext.ephemeral(None), history))

    result = anyio.run(main)
    city = json.loads(result.final_output)
    assert isinstance(city["name"], str) and isinstance(city["population"], int)
    final = client.bodies[-1]
    assert any(m.get("tool_calls") for m in final["messages"])
    if mode == "json_object":
        assert final["response_format"]["type"] == "json_object" and "schema" in final["response_format"]
    else:
        assert final["tools"][-1]["function"]["name"] == "final_result"
        assert final["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}


def test_a_stream_interrupted_by_another_request_is_not_a_clean_finish(own_llama_server: LlamaServer) -> None:
    """Defect 2: llama-cpp-python ends the stream in progress with ``[DONE]``
    and no ``finish_reason`` when another request arrives."""
    model = chat(own_llama_server)
    long = ModelRequest((user_text("Write a very long story about a dragon."),), (),
                        ModelSettings(max_output_tokens=400))
    outcome: dict[str, Any] = {}

    async def first() -> None:
        seen: list[Any] = []
        try:
            async for event in model.invoke(long, CancellationToken()):
                seen.append(event)
                if isinstance(event, TextChunk) and "started" not in outcome:
                    outcome["started"] = True
        except ModelError as error:
            outcome["error"] = error.failure
        outcome["events"] = seen

    async def second() -> None:
        while "started" not in outcome:
            await anyio.sleep(0.05)
        request = ModelRequest((user_text("Hi"),), (), ModelSettings(max_output_tokens=4))
        outcome["second"] = [e async for e in model.invoke(request, CancellationToken())]

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            group.start_soon(second)

    anyio.run(main)
    assert "second" in outcome
    failure = outcome.get("error")
    assert isinstance(failure, TransportFailure) and "cut short" in failure.message, outcome.get("events")


def test_a_server_killed_mid_stream_is_a_transport_failure(own_llama_server: LlamaServer) -> None:
    model = chat(own_llama_server)
    request = ModelRequest((user_text("Write a very long story about a dragon."),), (),
                           ModelSettings(max_output_tokens=400))

    async def main() -> Any:
        seen = 0
        with pytest.raises(ModelError) as caught:
            async for event in model.invoke(request, CancellationToken()):
                if isinstance(event, TextChunk):
                    seen += 1
                    if seen == 3:
                        own_llama_server.process.kill()
        return caught.value.failure

    failure = anyio.run(main)
    assert isinstance(failure, TransportFailure)


def test_a_tool_choice_this_server_lacks_is_refused_by_name(llama_server: LlamaServer) -> None:
    from helikon.model import ToolChoiceRequired

    agent = LlmAgent(name="req", model=chat(llama_server), tools=[lookup],
                     settings=ModelSettings(tool_choice=ToolChoiceRequired()))
    with pytest.raises(RunError) as caught:
        run(agent, "Oslo?")
    failure = caught.value.error.failure  # type: ignore[attr-defined]
    assert isinstance(failure, OtherModelFailure) and "'llama.cpp'" in failure.message
