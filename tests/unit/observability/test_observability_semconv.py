"""The spans are what the GenAI semantic conventions say (issue 32, defects 4
and 5): runs report to the globally installed tracer provider without any
wiring; the inference span carries the model that answered (as the real
replies name it), ``gen_ai.request.stream``, ``gen_ai.output.type``,
``server.address``/``server.port``, the cache-creation tokens, the time to
the first chunk; Gemini's operation is ``generate_content``; the duration
metric carries only its listed attributes; an inline image is a blob part.

Every attribute name helikon sets is checked against the registry of the
``opentelemetry-semantic-conventions`` package.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from otel_support import Pipeline, attributes, label, named, one, run

from helikon import LlmAgent, RunContext, collect, run_sync, tool
from helikon.context import TracerHandle
from helikon.items import ImagePart, TextPart, UserMessage
from helikon.observability import Telemetry
from helikon.observability import _semconv as sc
from helikon.providers.anthropic import AnthropicModel
from helikon.providers.gemini import GeminiModel
from helikon.providers.openai import OpenAIModel
from helikon.testing import MockModel, call_tools, say

WIRE = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "provider-wire"
needs_wire = pytest.mark.skipif(not WIRE.is_dir(), reason="the recorded provider replies are not here")


@tool
async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: found"


class Answer(msgspec.Struct):
    city: str


def replaying(path: Path) -> httpx.AsyncClient:
    """A client whose every request is answered with the recorded reply at ``path``."""
    body = path.read_bytes()
    kind = "text/event-stream" if path.suffix == ".sse" else "application/json"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": kind}, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


def observed(otel: Pipeline, agent: LlmAgent[Any], text: str = "Hi?", **kw: Any) -> tuple[ReadableSpan, ...]:
    handle = TracerHandle(Telemetry(otel.tracer_provider, otel.meter_provider, **kw))
    run_sync(agent, text, ctx=RunContext.ephemeral(None).with_tracer(handle))
    return otel.finished()


# -- defect 4: the global provider by default ------------------------------------------


def test_a_plain_tracer_handle_reports_to_the_globally_installed_provider(
    otel: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", otel.tracer_provider)
    model = MockModel([say("Hello."), say("Hello again.")], model_id="m-1")
    agent: LlmAgent[None] = LlmAgent(name="plain", model=model)

    result = run(lambda: collect(agent.run(RunContext.ephemeral(None), "Hi?")))
    assert result.final_output == "Hello."
    handle = TracerHandle.builder().with_session_id("s-global").build()
    run(lambda: collect(agent.run(RunContext.ephemeral(None).with_tracer(handle), "Hi?")))

    roots = named(otel.finished(), "invoke_agent plain")
    assert len(roots) == 2
    assert attributes(roots[1])["session.id"] == "s-global"
    assert len(named(otel.finished(), "chat m-1")) == 2


def test_without_a_configured_provider_a_run_is_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    sentinel = object()
    assert TracerHandle().instrument(sentinel) is sentinel


# -- defect 5: the attributes, from the real replies ------------------------------------


CASES: dict[str, tuple[Callable[[httpx.AsyncClient], Any], str, dict[str, object]]] = {
    "openai-chat": (
        lambda client: OpenAIModel.chat("gpt-4o-mini", api_key="sk-test", http_client=client),
        "openai_chat/stream_text_after_tool_gpt-4o-mini.sse",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.request.stream": True,
            "server.address": "api.openai.com",
            "server.port": 443,
        },
    ),
    "openai-responses": (
        lambda client: OpenAIModel.responses(
            "gpt-4o", api_key="sk-test", http_client=client, base_url="http://127.0.0.1:8089/v1"
        ),
        "openai_responses/stream_text_gpt-4o.sse",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.request.stream": True,
            "server.address": "127.0.0.1",
            "server.port": 8089,
        },
    ),
    "anthropic": (
        lambda client: AnthropicModel.messages(
            "claude-sonnet-4-5", api_key="sk-ant-test", http_client=client, stream=False
        ),
        "anthropic/nonstream_cache_read_write_usage_claude-sonnet-4-5.json",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.response.model": "claude-sonnet-4-5-20250929",
            "gen_ai.request.stream": False,
            "gen_ai.usage.cache_creation.input_tokens": 418,
            "server.address": "api.anthropic.com",
            "server.port": 443,
        },
    ),
    "gemini": (
        lambda client: GeminiModel.developer(
            "gemini-2.5-flash", api_key="AIza-test", http_client=client, stream=False
        ),
        "gemini/nonstream_cached_content_usage_gemini-2.5-flash.json",
        {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.response.model": "gemini-2.5-flash",
            "gen_ai.request.stream": False,
            "server.address": "generativelanguage.googleapis.com",
        },
    ),
}


@needs_wire
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_inference_span_says_what_the_reply_said(otel: Pipeline, case: str) -> None:
    make, fixture, expected = CASES[case]
    agent: LlmAgent[None] = LlmAgent(
        name="asker", description="Answers questions.", model=make(replaying(WIRE / fixture))
    )

    spans = observed(otel, agent)

    [chat] = [s for s in spans if attributes(s).get("gen_ai.operation.name") in ("chat", "generate_content")]
    got = attributes(chat)
    assert {k: got.get(k) for k in expected} == expected
    assert got["gen_ai.output.type"] == "text"
    assert chat.name == f"{expected['gen_ai.operation.name']} {got['gen_ai.request.model']}"
    assert attributes(one(spans, "invoke_agent asker"))["gen_ai.agent.description"] == "Answers questions."
    if got["gen_ai.request.stream"]:
        first = got["gen_ai.response.time_to_first_chunk"]
        assert isinstance(first, float) and 0 <= first <= (chat.end_time - chat.start_time) / 1e9  # type: ignore[operator]
    # The duration metric: only the attributes the conventions list for it.
    for point in otel.metric_points("gen_ai.client.operation.duration"):
        assert set(point.attributes or {}) <= sc.METRIC_ATTRIBUTES
    [chat_point] = [
        p
        for p in otel.metric_points("gen_ai.client.operation.duration")
        if label(p, "gen_ai.operation.name") == expected["gen_ai.operation.name"]
    ]
    assert label(chat_point, "gen_ai.response.model") == expected["gen_ai.response.model"]


def test_a_structured_turn_says_json_and_a_tool_round_keeps_the_duration_attributes_listed(
    otel: Pipeline,
) -> None:
    script = [call_tools(("lookup", {"city": "Oslo"})), say("Oslo."), say('{"city": "Oslo"}')]
    model = MockModel(script, model_id="m-1")
    agent: LlmAgent[None] = LlmAgent(name="typed", model=model, tools=[lookup], output_type=Answer)

    spans = observed(otel, agent)

    # The answering turns ask for text; the last one, the structured answer, for JSON.
    types = [attributes(s)["gen_ai.output.type"] for s in named(spans, "chat m-1")]
    assert types[-1] == "json"
    points = otel.metric_points("gen_ai.client.operation.duration")
    assert {label(p, "gen_ai.operation.name") for p in points} >= {"chat", "execute_tool"}
    for point in points:
        assert set(point.attributes or {}) <= sc.METRIC_ATTRIBUTES
    # The tool's name stays on helikon's own counter.
    assert {label(p, "gen_ai.tool.name") for p in otel.metric_points("helikon.tool.calls")} == {"lookup"}


def test_an_inline_image_is_recorded_as_a_blob_part() -> None:
    system, history = sc.input_messages(
        (UserMessage((TextPart("What is it?"), ImagePart(data="aGk=", media_type="image/png"))),)
    )
    assert system == []
    assert history == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "What is it?"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "aGk="},
            ],
        }
    ]
    _, by_url = sc.input_messages((UserMessage((ImagePart(url="https://example.invalid/a.png"),)),))
    assert by_url[0]["parts"] == [
        {"type": "uri", "modality": "image", "uri": "https://example.invalid/a.png"}
    ]


# -- the registry -----------------------------------------------------------------------

#: What the conventions make conditionally required on an inference span and
#: helikon always knows for a real provider model (the error type only on failure).
INFERENCE_REQUIRED = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.stream",
    "gen_ai.output.type",
    "server.port",
)
#: The same on an ``invoke_agent`` span (the agent has a description here).
AGENT_REQUIRED = ("gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.agent.description")


def registered() -> set[str]:
    names = {
        value
        for module in (gen_ai_attributes, server_attributes, error_attributes)
        for key, value in vars(module).items()
        if key.isupper() and isinstance(value, str)
    }
    return names


#: helikon's own names, and the trace attributes Langfuse reads (see _semconv).
OWN_PREFIXES = ("helikon.", "session.id", "user.id", "langfuse.")


@needs_wire
def test_every_attribute_helikon_sets_is_a_registered_name(otel: Pipeline) -> None:
    registry = registered()
    client = replaying(WIRE / "anthropic/nonstream_cache_read_write_usage_claude-sonnet-4-5.json")
    agent: LlmAgent[None] = LlmAgent(
        name="asker",
        description="Answers questions.",
        model=AnthropicModel.messages(
            "claude-sonnet-4-5", api_key="sk-ant-test", http_client=client, stream=False
        ),
        instructions="Be brief.",
    )
    handle = TracerHandle(
        Telemetry(otel.tracer_provider, otel.meter_provider, capture_content=True),
        session_id="s-1",
        user_id="u-1",
    )
    run_sync(agent, "Hi?", ctx=RunContext.ephemeral(None).with_tracer(handle))
    model = MockModel([call_tools(("lookup", {"city": "Oslo"})), say("Done.")], model_id="m-1")
    tooling: LlmAgent[None] = LlmAgent(name="tooling", model=model, tools=[lookup])
    run_sync(tooling, "Go.", ctx=RunContext.ephemeral(None).with_tracer(handle))

    spans = otel.finished()
    used = {key for span in spans for key in attributes(span)}
    unknown = {k for k in used if k not in registry and not k.startswith(OWN_PREFIXES)}
    assert unknown == set()
    # Every name _semconv declares is a registered one too (or helikon's own).
    declared = {
        v
        for k, v in vars(sc).items()
        if k.isupper() and isinstance(v, str) and "." in v and v != sc.TURN_SPAN
    }
    assert {v for v in declared if v not in registry and not v.startswith(OWN_PREFIXES)} == {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
    }
    assert {sc.TOKEN_USAGE, sc.OPERATION_DURATION} <= {
        v for k, v in vars(gen_ai_metrics).items() if k.isupper() and isinstance(v, str)
    }
    chat = attributes(one(spans, "chat claude-sonnet-4-5"))
    assert [k for k in INFERENCE_REQUIRED if k not in chat] == []
    # Recommended ones it knows here.
    assert {"server.address", "gen_ai.response.model", "gen_ai.response.id"} <= set(chat)
    assert json.loads(str(chat["gen_ai.input.messages"]))[0]["role"] == "user"
    agent_span = attributes(one(spans, "invoke_agent asker"))
    assert [k for k in AGENT_REQUIRED if k not in agent_span] == []
    tool_span = attributes(one(spans, "execute_tool lookup"))
    assert {"gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type"} <= set(tool_span)
