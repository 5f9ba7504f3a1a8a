"""OpenAIModel.responses: the Responses API over a mocked HTTP transport.

Every test goes through ``OpenAIModel.invoke`` and an ``httpx.MockTransport``;
streamed bodies arrive in 7-byte pieces. Real recorded bodies are read from
``../shared/fixtures/provider-wire/openai_responses/``; payloads written from
the API reference live in ``tests/fixtures/openai/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_support import Chunked, Server, failure_of, invoke, json_reply, reply_of

from helikon import LlmAgent, run_sync, tool
from helikon.errors import (
    OtherModelFailure,
    RateLimited,
    Refused,
    TransportFailure,
    Unavailable,
)
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
    Item,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.model import (
    Finish,
    FinishReason,
    JsonObjectFormat,
    JsonSchema,
    ModelRequest,
    ModelSettings,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolChoiceNamed,
    ToolChoiceRequired,
    ToolDef,
    Usage,
)
from helikon.providers.openai import OpenAIModel
from helikon.schema import strict

ROOT = Path(__file__).resolve().parents[3]
WIRE = ROOT.parent / "shared" / "fixtures" / "provider-wire" / "openai_responses"
OWN = ROOT / "tests" / "fixtures" / "openai"
needs_wire = pytest.mark.skipif(
    not WIRE.is_dir(), reason=f"the recorded provider bodies are not here ({WIRE} is absent)"
)

# -- the mock server -----------------------------------------------------------


def sse_reply(body: bytes | str) -> httpx.Response:
    raw = body.encode() if isinstance(body, str) else body
    return httpx.Response(
        200, headers={"content-type": "text/event-stream; charset=utf-8"}, stream=Chunked(raw)
    )


def responses_model(server: Server, model_id: str = "gpt-4o", **options: Any) -> OpenAIModel:
    options.setdefault("api_key", "sk-test")
    return OpenAIModel.responses(model_id, http_client=server.client(), **options)


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def response(status: str = "completed", rid: str = "resp_1", **fields: Any) -> dict[str, Any]:
    return {"id": rid, "object": "response", "status": status, "output": [], "usage": None, **fields}


def text_stream(text: str, rid: str = "resp_1", usage: tuple[int, int] = (10, 3)) -> str:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    words = text.split(" ")
    return sse(
        {"type": "response.created", "response": response("in_progress", rid)},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *(
            {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "delta": (" " if i else "") + w}
            for i, w in enumerate(words)
        ),
        {"type": "response.output_item.done", "output_index": 0,
         "item": {**item, "content": [{"type": "output_text", "text": text}]}},
        {"type": "response.completed", "response": response(
            rid=rid, usage={"input_tokens": usage[0], "output_tokens": usage[1]})},
    )  # fmt: skip


# -- the recorded bodies -----------------------------------------------------


@needs_wire
def test_streamed_function_call_keys_argument_deltas_by_item_id() -> None:
    server = Server([sse_reply((WIRE / "stream_function_call_gpt-4o.sse").read_bytes())])

    events = invoke(responses_model(server))

    calls = [e for e in events if isinstance(e, ToolCallChunk)]
    assert calls[0] == ToolCallChunk(0, "call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", "")
    assert [c.arguments for c in calls[1:]] == ['{"', "country", '":"', "France", '"}'] and len(calls) == 6
    assert events[-2:] == [
        Usage(255, 16, 0, 0),
        Finish(FinishReason.TOOL_CALLS, "resp_67e554a155508191900ee113293c4c830794405d35281ae2"),
    ]
    assert reply_of(events).calls == (
        ToolCall(CallId("call_kL0PCQV7M2WMoVX8V8OtYSAL"), "get_capital", '{"country":"France"}'),
    )


@needs_wire
def test_streamed_text() -> None:
    server = Server([sse_reply((WIRE / "stream_text_gpt-4o.sse").read_bytes())])

    events = invoke(responses_model(server))

    assert [e.text for e in events if isinstance(e, TextChunk)] == [
        "The", " capital", " of", " France", " is", " Paris", ".",
    ]  # fmt: skip
    assert events[-2:] == [
        Usage(278, 9, 0, 0),
        Finish(FinishReason.STOP, "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed"),
    ]


@needs_wire
def test_streamed_reasoning_then_a_forced_call_with_no_text() -> None:
    server = Server([sse_reply((WIRE / "stream_reasoning_function_call_gpt-5.sse").read_bytes())])

    events = invoke(responses_model(server, "gpt-5"))

    reply = reply_of(events)
    assert reply.text == "" and reply.reasoning == ()  # summary not requested: nothing to show
    assert reply.calls == (
        ToolCall(CallId("call_CWXgs68YprAjp6t0371hiPOI"), "final_result", '{"result":6666}'),
    )
    assert reply.usage == Usage(53, 469, 0, 448) and reply.finish is FinishReason.TOOL_CALLS
    assert reply.response_id == "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33"


@needs_wire
def test_streamed_reasoning_summary_parts_then_text() -> None:
    raw = (WIRE / "stream_reasoning_summary_o3-mini.sse").read_bytes()
    server = Server([sse_reply(raw)])

    events = invoke(responses_model(server, "o3-mini", reasoning_effort="high", reasoning_summary="detailed"))

    assert len([e for e in events if isinstance(e, ReasoningChunk)]) == 383
    reply = reply_of(events)
    (part,) = reply.reasoning
    done_texts = [
        json.loads(line[6:])["text"]
        for line in raw.decode().splitlines()
        if line.startswith('data: {"type":"response.reasoning_summary_text.done"')
    ]
    assert len(done_texts) == 4 and part.text == "".join(done_texts) and len(part.text) == 2022
    assert part.text.startswith("**Providing street crossing instructions**\n\nThe user is aski")
    assert part.signature is None
    assert reply.text.startswith("I'm not a road safety professional") and len(reply.text) == 1251
    assert reply.text.endswith("rules specific to your area. Stay safe!")
    assert reply.usage == Usage(13, 1680, 0, 1408) and reply.finish is FinishReason.STOP
    assert server.body()["reasoning"] == {"effort": "high", "summary": "detailed"}


@needs_wire
def test_streamed_preamble_text_then_a_call() -> None:
    server = Server([sse_reply((WIRE / "stream_text_then_function_call_gpt-5.5.sse").read_bytes())])

    reply = reply_of(invoke(responses_model(server, "gpt-5.5")))

    assert reply.text == "I\u2019ll check the capital lookup tool for \u201cPotatoLand.\u201d"
    assert reply.calls == (
        ToolCall(CallId("call_LabG58Uhrq9kZvR52BYKjToD"), "get_capital", '{"country":"PotatoLand"}'),
    )
    assert reply.usage == Usage(63, 69, 0, 26) and reply.finish is FinishReason.TOOL_CALLS


@needs_wire
def test_non_streamed_parallel_calls() -> None:
    server = Server([json_reply((WIRE / "nonstream_parallel_function_calls_gpt-4o.json").read_bytes())])

    events = invoke(responses_model(server, stream=False))

    reply = reply_of(events)
    assert reply.calls == (
        ToolCall(CallId("call_LWVp74L5HaH2KNvgVz9PJsrj"), "get_location", '{"loc_name":"Londos"}'),
        ToolCall(CallId("call_YnRAWeTyxI91m5uNa5bxXwVO"), "get_location", '{"loc_name":"London"}'),
    )
    assert reply.usage == Usage() and reply.finish is FinishReason.TOOL_CALLS  # recorded usage is all zeros
    assert reply.response_id == "resp_67e547c48c9481918c5c4394464ce0c60ae6111e84dd5c08"
    assert "stream" not in server.body()


@needs_wire
def test_non_streamed_structured_output() -> None:
    server = Server([json_reply((WIRE / "nonstream_json_schema_gpt-4o.json").read_bytes())])

    reply = reply_of(invoke(responses_model(server, stream=False)))

    assert reply.text == '{"city":"Mexico City","country":"Mexico"}'
    assert reply.usage == Usage(89, 16, 0, 0) and reply.finish is FinishReason.STOP


@needs_wire
def test_non_streamed_reasoning_summaries_join_without_separator() -> None:
    raw = (WIRE / "nonstream_reasoning_function_call_gpt-5.json").read_bytes()
    server = Server([json_reply(raw)])

    events = invoke(responses_model(server, "gpt-5", stream=False))

    reply = reply_of(events)
    (part,) = reply.reasoning
    assert len(part.text) == 2911
    assert part.text.startswith("**Creating a structured poem**\n\nI need to craft a ")
    assert part.text.endswith("coherent lines. I should use the update_plan tool for that!")
    (call,) = reply.calls
    assert call.call_id == "call_gL7JE6GDeGGsFubqO2XGytyO" and call.name == "update_plan"
    assert json.loads(call.arguments)["plan"].startswith("Plan:\n1) Determine required first-letter")
    assert reply.text == ""
    assert reply.usage == Usage(124, 1926, 0, 1792) and reply.finish is FinishReason.TOOL_CALLS


@needs_wire
def test_non_streamed_text_with_cached_tokens() -> None:
    server = Server([json_reply((WIRE / "nonstream_text_after_tool_cached_tokens_gpt-5.json").read_bytes())])

    reply = reply_of(invoke(responses_model(server, "gpt-5", stream=False)))

    assert reply.text.startswith("Softly old fountains illumine alleys\nDunes over harbor aglow\n")
    assert len(reply.text) == 499 and reply.calls == ()
    assert reply.usage == Usage(2087, 124, 2048, 0) and reply.finish is FinishReason.STOP


@needs_wire
def test_a_400_on_a_streamed_request_comes_back_as_json() -> None:
    server = Server([json_reply((WIRE / "error_400_invalid_temperature.json").read_bytes(), 400)])

    failure, seen = failure_of(
        responses_model(server), ModelRequest((user_text("hi"),), settings=ModelSettings(-1))
    )

    assert isinstance(failure, OtherModelFailure) and failure.status == 400 and not seen
    assert failure.message == (
        "openai gpt-4o: HTTP 400: Invalid 'temperature': decimal below minimum value. "
        "Expected a value >= 0, but got -1 instead. (invalid_request_error)"
    )
    assert server.body()["temperature"] == -1


# -- payloads written from the API reference -----------------------------------


def test_incomplete_for_max_output_tokens_finishes_with_length() -> None:
    server = Server([sse_reply((OWN / "responses_stream_incomplete_max_tokens.sse").read_bytes())])

    events = invoke(responses_model(server, "gpt-5-mini"))

    assert events == [
        TextChunk("Once"),
        TextChunk(" upon"),
        Usage(40, 2, 0, 0),
        Finish(FinishReason.LENGTH, "resp_test_1"),
    ]


def test_a_failed_response_is_an_error() -> None:
    server = Server([sse_reply((OWN / "responses_stream_failed.sse").read_bytes())])

    failure, _ = failure_of(responses_model(server, "gpt-5-mini"))

    assert isinstance(failure, Unavailable)
    assert failure.message == (
        "openai gpt-5-mini: HTTP 500: response failed: "
        "The model failed to generate a response. (server_error)"
    )


def test_an_error_event_is_an_error() -> None:
    server = Server([sse_reply((OWN / "responses_stream_error_event.sse").read_bytes())])

    failure, _ = failure_of(responses_model(server, "gpt-5-mini"))

    assert isinstance(failure, RateLimited) and "Rate limit reached for gpt-5-mini" in failure.message


def test_a_refusal_is_a_refused_error() -> None:
    server = Server([sse_reply((OWN / "responses_stream_refusal.sse").read_bytes())])

    failure, _ = failure_of(responses_model(server))

    assert isinstance(failure, Refused)
    assert failure.message == "openai gpt-4o: the model refused: I can't assist with that."


def test_raw_reasoning_text_and_interleaved_parallel_calls() -> None:
    server = Server([sse_reply((OWN / "responses_stream_reasoning_text_parallel_calls.sse").read_bytes())])

    events = invoke(responses_model(server, "openai/gpt-oss-20b", base_url="http://localhost:8000/v1"))

    reply = reply_of(events)
    assert reply.reasoning == (ReasoningPart("Two lookups."),)
    assert reply.calls == (
        ToolCall(CallId("call_a"), "get_weather", '{"city":"Paris"}'),
        ToolCall(CallId("call_b"), "get_time", '{"zone":"CET"}'),
    )
    assert [e.index for e in events if isinstance(e, ToolCallChunk)] == [0, 1, 0, 1, 1, 0]
    assert reply.usage == Usage(200, 50, 64, 10) and reply.finish is FinishReason.TOOL_CALLS


def test_items_only_in_their_done_events_are_not_lost_or_doubled() -> None:
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'}
    message = {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Hi"}]}  # fmt: skip
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {**message, "content": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": response()},
    )
    server = Server([sse_reply(body)])

    events = invoke(responses_model(server))

    assert events == [
        TextChunk("Hi"),
        ToolCallChunk(0, "call_1", "f", '{"a":1}'),
        Finish(FinishReason.TOOL_CALLS, "resp_1"),
    ]


def test_arguments_that_only_come_with_the_done_item_are_kept() -> None:
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": call},
        {"type": "response.output_item.done", "output_index": 0, "item": {**call, "arguments": '{"a":1}'}},
        {"type": "response.completed", "response": response()},
    )
    server = Server([sse_reply(body)])

    reply = reply_of(invoke(responses_model(server)))

    assert reply.calls == (ToolCall(CallId("call_1"), "f", '{"a":1}'),)


def test_an_error_event_without_a_code() -> None:
    body = sse({"type": "error", "code": None, "message": "boom", "param": None, "sequence_number": 0})
    server = Server([sse_reply(body)])

    failure, _ = failure_of(responses_model(server))

    assert failure == OtherModelFailure("openai gpt-4o: stream error: boom")


# -- malformed streams -------------------------------------------------------------


def test_a_stream_cut_off_mid_event_is_a_transport_error() -> None:
    body = text_stream("Hello brave new world")
    server = Server([sse_reply(body[: body.index('"delta": " new"') + 5])])

    failure, seen = failure_of(responses_model(server))

    assert isinstance(failure, TransportFailure) and "cut off" in failure.message
    assert seen == [TextChunk("Hello"), TextChunk(" brave")]


def test_a_stream_without_its_terminal_event_is_a_transport_error() -> None:
    body = text_stream("Hello world")
    server = Server([sse_reply(body[: body.index("event: response.completed")])])

    failure, seen = failure_of(responses_model(server))

    assert isinstance(failure, TransportFailure) and "no response.completed" in failure.message
    assert reply_of(seen).text == "Hello world"


def test_bad_json_in_a_data_line_is_a_clear_error() -> None:
    server = Server([sse_reply("event: response.created\ndata: {not json}\n\n")])

    failure, _ = failure_of(responses_model(server))

    assert isinstance(failure, OtherModelFailure) and "malformed JSON" in failure.message


# -- the request -----------------------------------------------------------------

CITY: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPTIONAL: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


def test_a_text_request_sends_instructions_and_input_items() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    request = ModelRequest((system_text("Be brief."), user_text("hi"), system_text("Use metric units.")))

    invoke(responses_model(server), request)

    sent = server.requests[0]
    assert str(sent.url) == "https://api.openai.com/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test" and sent.headers["accept"] == "text/event-stream"
    assert server.body() == {
        "model": "gpt-4o",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "instructions": "Be brief.\n\nUse metric units.",
        "stream": True,
    }


def test_tools_always_say_whether_they_are_strict() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    tools = (ToolDef("weather", "Current weather.", CITY), ToolDef("forecast", "Forecast.", OPTIONAL))
    settings = ModelSettings(tool_choice=ToolChoiceNamed("weather"))

    invoke(
        responses_model(server, parallel_tool_calls=True), ModelRequest((user_text("hi"),), tools, settings)
    )

    body = server.body()
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Current weather.",
            "parameters": {**CITY, "additionalProperties": False},
            "strict": True,
        },
        {
            "type": "function",
            "name": "forecast",
            "description": "Forecast.",
            "parameters": OPTIONAL,
            "strict": False,
        },
    ]
    assert (
        body["tool_choice"] == {"type": "function", "name": "weather"} and body["parallel_tool_calls"] is True
    )


HISTORY: tuple[Item, ...] = (
    user_text("Weather in Paris?"),
    AssistantMessage((ReasoningPart("one call"), TextPart("Checking."))),
    ToolCall(CallId("call_1"), "weather", '{"city":"Paris"}'),
    ToolResult(CallId("call_1"), "weather", "sunny"),
    AssistantMessage((TextPart("Sunny."),)),
    UserMessage((TextPart("And this?"), ImagePart(url="https://example.com/sky.jpg"))),
    ToolCall(CallId("call_2"), "weather", '{"city":"Rome"}'),
    ToolResult(CallId("call_2"), "weather", "rain"),
)


def test_history_becomes_input_items() -> None:
    server = Server([sse_reply(text_stream("ok"))])

    invoke(responses_model(server), ModelRequest((system_text("Be brief."), *HISTORY)))

    assert server.body()["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "message", "role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": "Sunny."},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "And this?"},
                {"type": "input_image", "image_url": "https://example.com/sky.jpg", "detail": "auto"},
            ],
        },
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_2", "output": "rain"},
    ]


def test_with_a_previous_response_only_the_new_items_are_sent() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    settings = ModelSettings(previous_response_id="resp_prev")

    invoke(
        responses_model(server, store=True),
        ModelRequest((system_text("Be brief."), *HISTORY), settings=settings),
    )

    body = server.body()
    assert body["previous_response_id"] == "resp_prev" and body["store"] is True
    assert body["instructions"] == "Be brief."  # the API does not carry instructions over
    assert body["input"] == [{"type": "function_call_output", "call_id": "call_2", "output": "rain"}]


def test_the_response_id_chains_calls() -> None:
    server = Server(
        [sse_reply(text_stream("Hi there", rid="resp_A")), sse_reply(text_stream("Bye", rid="resp_B"))]
    )
    model = responses_model(server)

    first = invoke(model)
    assert first[-1] == Finish(FinishReason.STOP, "resp_A")
    history = (user_text("hi"), AssistantMessage((TextPart("Hi there"),)), user_text("bye"))
    invoke(
        model, ModelRequest(history, settings=ModelSettings(previous_response_id=reply_of(first).response_id))
    )

    assert server.body(1)["previous_response_id"] == "resp_A"
    assert server.body(1)["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "bye"}]}
    ]


def test_structured_output_and_settings() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    server = Server([sse_reply(text_stream("{}")) for _ in range(3)])
    model = responses_model(
        server,
        reasoning_effort="minimal",
        store=False,
        extra_body={"include": ["reasoning.encrypted_content"]},
    )
    settings = ModelSettings(0.5, 0.8, 64, ToolChoiceRequired(), JsonSchema("City!", schema))

    invoke(model, ModelRequest((user_text("hi"),), settings=settings))
    invoke(
        model,
        ModelRequest(
            (user_text("hi"),), settings=ModelSettings(response_format=JsonSchema("c", schema, False))
        ),
    )
    invoke(
        model, ModelRequest((user_text("hi"),), settings=ModelSettings(response_format=JsonObjectFormat()))
    )

    body = server.body(0)
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "City_", "schema": strict(schema), "strict": True}
    }
    assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.5, 0.8, 64)
    assert body["reasoning"] == {"effort": "minimal"} and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"] and "tool_choice" not in body  # no tools
    assert server.body(1)["text"]["format"] == {
        "type": "json_schema",
        "name": "c",
        "schema": schema,
        "strict": False,
    }
    assert server.body(2)["text"] == {"format": {"type": "json_object"}}


def test_identity_and_capabilities() -> None:
    model = OpenAIModel.responses("gpt-5", api_key="k")

    assert (model.provider, model.model_id, model.api) == ("openai", "gpt-5", "responses")
    assert model.capabilities.server_managed_state and model.capabilities.reasoning


def test_azure_responses_url() -> None:
    server = Server([sse_reply(text_stream("ok"))])
    base = "https://res.openai.azure.com/openai"

    invoke(responses_model(server, azure=True, base_url=base, api_version="2025-03-01-preview"))

    sent = server.requests[0]
    assert (
        str(sent.url) == f"{base}/responses?api-version=2025-03-01-preview"
        and sent.headers["api-key"] == "sk-test"
    )


# -- inside the agent loop -------------------------------------------------------


@tool
async def get_capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's name.
    """
    return {"France": "Paris"}.get(country, "unknown")


def test_an_agent_runs_a_tool_round_with_the_responses_model() -> None:
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_capital",
        "arguments": "",
    }
    server = Server(
        [
            sse_reply(
                sse(
                    {"type": "response.created", "response": response("in_progress", "resp_1")},
                    {"type": "response.output_item.added", "output_index": 0, "item": call},
                    {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                     "delta": '{"country":'},
                    {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                     "delta": '"France"}'},
                    {"type": "response.output_item.done", "output_index": 0,
                     "item": {**call, "arguments": '{"country":"France"}'}},
                    {"type": "response.completed", "response": response(
                        rid="resp_1", usage={"input_tokens": 50, "output_tokens": 10,
                                             "output_tokens_details": {"reasoning_tokens": 4}})},
                )
            ),
            sse_reply(text_stream("The capital of France is Paris.", rid="resp_2", usage=(70, 8))),
        ]
    )  # fmt: skip
    agent: LlmAgent[Any] = LlmAgent(
        name="geo", model=responses_model(server), instructions="Use the tool.", tools=[get_capital]
    )

    result = run_sync(agent, "Capital of France?")

    assert result.final_output == "The capital of France is Paris."
    assert result.usage.input_tokens == 120 and result.usage.output_tokens == 18
    assert result.usage.reasoning_tokens == 4
    second = server.body(1)
    assert second["instructions"] == "Use the tool."
    assert second["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_capital",
            "arguments": '{"country":"France"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Paris"},
    ]
