"""The names helikon's telemetry uses, and the values it derives from runs.

Span, attribute and metric names follow the OpenTelemetry GenAI semantic
conventions (development status; the agent spans of ``gen-ai-agent-spans.md``,
the inference and ``execute_tool`` spans of ``gen-ai-spans.md``, the client
metrics of ``gen-ai-metrics.md``). Names the conventions do not define are
helikon's own and say so (``helikon.*``), except the trace attributes
Langfuse reads (``session.id``, ``user.id``, ``langfuse.trace.tags``).

Everything here is a pure function of helikon's carriers: the content
attributes (opt-in) are the conventions' JSON message shapes, serialized to
JSON text (span attributes cannot hold structures yet), with every secret
value the run redacts replaced first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

import msgspec

from helikon._json import JsonValue
from helikon.effects import RunInterrupted
from helikon.errors import Cancelled
from helikon.governance import redact
from helikon.items import (
    AssistantMessage,
    ImagePart,
    Item,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.loop import Response
from helikon.model import FinishReason, ModelSettings, Text

# -- operation names and span names ---------------------------------------------

INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
#: The operation name of Google's Gemini APIs' inference calls.
GENERATE_CONTENT: Final = "generate_content"
EXECUTE_TOOL: Final = "execute_tool"
#: helikon's span for one model turn (the book's name), between the run and its calls.
TURN_SPAN: Final = "agent.turn"

# -- attributes -------------------------------------------------------------------

OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
CACHE_CREATION_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
REQUEST_STREAM: Final = "gen_ai.request.stream"
OUTPUT_TYPE: Final = "gen_ai.output.type"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
#: Opt-in content attributes (JSON text).
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
#: The run's trace attributes (from the :class:`~helikon.context.TracerHandle`).
SESSION_ID: Final = "session.id"
USER_ID: Final = "user.id"
TAGS: Final = "langfuse.trace.tags"
#: helikon's own.
RUN_ID: Final = "helikon.run.id"
TURN: Final = "helikon.turn"
SUSPENDED: Final = "helikon.run.suspended"
#: On every span of a replayed run (a :class:`~helikon.interpreters.ReplayInterpreter`):
#: what it describes was performed before, not now.
REPLAY: Final = "helikon.replay"

#: The attributes the conventions list for ``gen_ai.client.operation.duration``
#: and ``gen_ai.client.token.usage`` (besides ``gen_ai.token.type`` on the latter).
METRIC_ATTRIBUTES: Final = frozenset(
    {OPERATION_NAME, PROVIDER_NAME, REQUEST_MODEL, RESPONSE_MODEL, SERVER_ADDRESS, SERVER_PORT, ERROR_TYPE}
)
#: The providers whose inference operation is ``generate_content``.
_GENERATE_CONTENT_PROVIDERS: Final = frozenset({"gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai"})

# -- metrics ------------------------------------------------------------------------

TOKEN_USAGE: Final = "gen_ai.client.token.usage"
OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
#: helikon's own: tool calls performed, by tool and error type.
TOOL_CALLS: Final = "helikon.tool.calls"
#: What a model call (on its chat span) or a run (on its agent span) cost,
#: in US dollars, where the model has a price (see :mod:`helikon.pricing`).
#: GenAI conventions name no cost attribute yet; OpenTelemetry has no decimal
#: type, so this is the float nearest the exact cost the results carry.
COST: Final = "helikon.usage.cost"
#: The counter of money spent, in US dollars, by the attributes of
#: ``gen_ai.client.token.usage``.
COST_METRIC: Final = "helikon.client.cost"
#: The conventions' bucket boundaries.
TOKEN_BUCKETS: Final = (
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
    1048576.0, 4194304.0, 16777216.0, 67108864.0,
)  # fmt: skip
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip

#: A model's finish reason as the conventions' output-message schema names it.
_FINISH: Final = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.TOOL_CALLS: "tool_call",
    FinishReason.CONTENT_FILTER: "content_filter",
    FinishReason.OTHER: "other",
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def inference_operation(provider: str | None) -> str:
    """The operation name of a model call to ``provider``: Gemini's APIs'
    is ``generate_content``, every other ``chat``.

    >>> inference_operation("gcp.gemini"), inference_operation("openai")
    ('generate_content', 'chat')
    """
    return GENERATE_CONTENT if provider in _GENERATE_CONTENT_PROVIDERS else CHAT


def output_type(output: object) -> str:
    """``gen_ai.output.type`` of a request: ``json`` when it asks for
    structured output, else ``text``."""
    return "text" if output is None or isinstance(output, Text) else "json"


def endpoint(url: object) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a model's base URL.

    >>> endpoint("https://api.openai.com/v1"), endpoint("http://127.0.0.1:8080/v1")
    (('api.openai.com', 443), ('127.0.0.1', 8080))
    """
    if not isinstance(url, str) or not url:
        return None, None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    return parts.hostname or None, port


def finish_reason(reason: FinishReason | None) -> str | None:
    """The conventions' name of a finish reason.

    >>> finish_reason(FinishReason.TOOL_CALLS)
    'tool_call'
    """
    return None if reason is None else _FINISH[reason]


def error_type(failure: object) -> str:
    """A low-cardinality ``error.type``: the failure's class name in snake case;
    an interruption names its reason.

    >>> from helikon.errors import MaxTurnsExceeded, TimedOut
    >>> error_type(MaxTurnsExceeded(3)), error_type(RunInterrupted(TimedOut(1.0)))
    ('max_turns_exceeded', 'timed_out')
    """
    if isinstance(failure, RunInterrupted):
        failure = failure.reason
    if isinstance(failure, Cancelled):
        return "cancelled"
    return _CAMEL.sub("_", type(failure).__name__).lower()


def settings_attributes(settings: ModelSettings) -> dict[str, float | int]:
    """The request settings the conventions name, when set.

    >>> settings_attributes(ModelSettings(temperature=0.2, max_output_tokens=100))
    {'gen_ai.request.temperature': 0.2, 'gen_ai.request.max_tokens': 100}
    """
    out: dict[str, float | int] = {}
    if settings.temperature is not None:
        out[REQUEST_TEMPERATURE] = settings.temperature
    if settings.top_p is not None:
        out[REQUEST_TOP_P] = settings.top_p
    if settings.max_output_tokens is not None:
        out[REQUEST_MAX_TOKENS] = settings.max_output_tokens
    return out


# -- content (opt-in) -----------------------------------------------------------------


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` scrubbed as tool output is: secret-named ``KEY=value`` lines
    and every known secret value replaced (whatever the run's own redaction
    setting: telemetry is one more place a secret must not reach)."""
    return redact(text, secrets)


def as_json(value: object, secrets: tuple[str, ...]) -> str:
    """``value`` (JSON data, or text kept as text) as scrubbed JSON text.

    >>> as_json({"key": "sk-abc123xyz"}, ("sk-abc123xyz",))
    '{"key":"***"}'
    """
    return scrub(_encode(value).decode(), secrets)


def _parts(content: tuple[object, ...]) -> list[dict[str, object]]:
    parts: list[dict[str, object]] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        elif isinstance(part, ReasoningPart):
            parts.append({"type": "reasoning", "content": part.text})
        elif isinstance(part, ImagePart):
            if part.url:
                parts.append({"type": "uri", "modality": "image", "uri": part.url})
            else:
                blob: dict[str, object] = {"type": "blob", "modality": "image"}
                if part.media_type:
                    blob["mime_type"] = part.media_type
                blob["content"] = part.data or ""  # base64 text already
                parts.append(blob)
    return parts


def _arguments(text: str) -> JsonValue:
    """Tool-call arguments as an object when they parse, else the raw text."""
    try:
        value: JsonValue = _decode(text)
    except msgspec.DecodeError:
        return text
    return value


def input_messages(
    items: Iterable[Item], instructions: str | None = None
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """A request's messages in the conventions' shapes: the system
    instructions (the request's ``instructions``, then any system message),
    then the chat history (``role`` and ``parts``); a model turn's
    consecutive tool calls are one assistant message."""
    system: list[dict[str, object]] = (
        [] if instructions is None else [{"type": "text", "content": instructions}]
    )
    history: list[dict[str, object]] = []
    for item in items:
        match item:
            case SystemMessage(content=content):
                system.extend(_parts(content))
            case UserMessage(content=content):
                history.append({"role": "user", "parts": _parts(content)})
            case AssistantMessage(content=content):
                history.append({"role": "assistant", "parts": _parts(content)})
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                part = {"type": "tool_call", "id": call_id, "name": name, "arguments": _arguments(arguments)}
                last = history[-1] if history else None
                if last is not None and last["role"] == "assistant":
                    parts = last["parts"]
                    assert isinstance(parts, list)
                    parts.append(part)
                else:
                    history.append({"role": "assistant", "parts": [part]})
            case ToolResult(call_id=call_id, content=content):
                history.append(
                    {
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": call_id, "response": content}],
                    }
                )
    return system, history


def output_messages(response: Response) -> list[dict[str, object]]:
    """A model turn's answer as the conventions' one output message."""
    parts: list[dict[str, object]] = [{"type": "reasoning", "content": r.text} for r in response.reasoning]
    if response.text:
        parts.append({"type": "text", "content": response.text})
    for call in response.calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.call_id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
            }
        )
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason(response.finish) or "other"}]


__all__ = [
    "AGENT_DESCRIPTION",
    "CACHE_CREATION_TOKENS",
    "GENERATE_CONTENT",
    "METRIC_ATTRIBUTES",
    "OUTPUT_TYPE",
    "REQUEST_STREAM",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "TIME_TO_FIRST_CHUNK",
    "AGENT_NAME",
    "CACHE_READ_TOKENS",
    "CHAT",
    "CONVERSATION_ID",
    "DURATION_BUCKETS",
    "ERROR_TYPE",
    "EXECUTE_TOOL",
    "FINISH_REASONS",
    "INPUT_MESSAGES",
    "INPUT_TOKENS",
    "INVOKE_AGENT",
    "OPERATION_DURATION",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "PROVIDER_NAME",
    "REASONING_TOKENS",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "REQUEST_TEMPERATURE",
    "REQUEST_TOP_P",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "RUN_ID",
    "SESSION_ID",
    "SUSPENDED",
    "SYSTEM_INSTRUCTIONS",
    "TAGS",
    "TOKEN_BUCKETS",
    "TOKEN_TYPE",
    "TOKEN_USAGE",
    "TOOL_CALLS",
    "COST",
    "COST_METRIC",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_TYPE",
    "TURN",
    "TURN_SPAN",
    "USER_ID",
    "as_json",
    "endpoint",
    "error_type",
    "inference_operation",
    "output_type",
    "finish_reason",
    "input_messages",
    "output_messages",
    "scrub",
    "settings_attributes",
]
