"""OpenAI Chat Completions (``POST /chat/completions``): the request body and
the reply parser, streamed (SSE chunks ending in ``data: [DONE]``) or not.

Wire rules kept here (from OpenAI's API reference and the recorded bodies):

- The stream's terminal event is ``data: [DONE]``. A stream that ends
  without it is accepted only if a ``finish_reason`` came (some compatible
  servers omit the sentinel); otherwise it was cut off.
- Usage arrives in a trailing chunk with ``choices: []`` when
  ``stream_options.include_usage`` is set; the last usage seen wins.
- Tool-call fragments carry ``index``; ``id`` and ``name`` come with the first
  fragment of a call. A server that reuses an index for a new call id gets
  the new call a fresh index.
- ``delta.reasoning_content`` / ``delta.reasoning`` (vLLM, DeepSeek, Groq,
  Ollama, llama.cpp) are reasoning text. OpenAI itself streams none.
- An ``event: error`` (or a chunk holding only ``error``) is a failure.
- ``refusal`` text means the model declined: a ``Refused`` error at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import msgspec

from helikon.errors import ModelError
from helikon.items import (
    AssistantMessage,
    ImagePart,
    Item,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    text_of,
)
from helikon.model import (
    Finish,
    JsonObjectFormat,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolChoice,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    Usage,
)
from helikon.providers._http import SseEvent
from helikon.providers._incremental import Converted, MessageCache
from helikon.providers._openai_common import (
    OpenAIConfig,
    decoder,
    finish_reason,
    image_url,
    instructions,
    only_text,
    payload_error,
    refusal_error,
    schema_name,
    strict_tool_parameters,
    usage_of,
)
from helikon.providers._openai_profiles import OUTPUT_TOOL_NAME
from helikon.schema import strict

PATH = "/chat/completions"


# -- request -------------------------------------------------------------------


def chat_body(
    request: ModelRequest, config: OpenAIConfig, cache: MessageCache | None = None
) -> dict[str, Any]:
    """The JSON body of a Chat Completions call for ``request``, in the
    dialect of ``config.profile``; with a ``cache``, the conversation's final
    messages come as encoded parts (:mod:`helikon.providers._incremental`:
    the body then encodes to the same bytes)."""
    messages = chat_messages(request, config, cache)
    body: dict[str, Any] = {"model": config.model_id, "messages": messages}
    if config.stream:
        body["stream"] = True
        if config.stream_usage:
            body["stream_options"] = {"include_usage": True}
    settings = request.settings
    tools = [chat_tool(t.name, t.description, t.parameters) for t in request.tools]
    choice = settings.tool_choice if request.tools else None
    if choice is None and request.tools and config.profile.explicit_auto:
        choice = ToolChoiceAuto()
    match settings.response_format:
        case JsonSchema(name=name, schema=schema, strict=is_strict):
            match config.output_mode:
                case "native":
                    body["response_format"] = {
                        "type": "json_schema",
                        "json_schema": {
                            "name": schema_name(name),
                            "schema": strict(schema) if is_strict else dict(schema),
                            "strict": is_strict,
                        },
                    }
                case "json_object":
                    body["response_format"] = {"type": "json_object", "schema": dict(schema)}
                case "tool":
                    tools.append(_output_tool(schema))
                    choice, note = _force_output_tool(config)
                    if note:
                        _add_instruction(messages, config, note)
                case "prompted":
                    _add_instruction(messages, config, _prompt_for(schema))
        case JsonObjectFormat():
            body["response_format"] = {"type": "json_object"}
        case _:
            pass  # text is the default; not sending it keeps compatible servers happy
    if tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = _checked_choice(choice, config)
        if config.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = config.parallel_tool_calls
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.max_output_tokens is not None:
        body[config.max_tokens_param] = settings.max_output_tokens
    if config.reasoning_effort is not None:
        body["reasoning_effort"] = config.reasoning_effort
    body.update(config.extra_body)
    return body


def output_tool_wraps(schema: Mapping[str, Any]) -> bool:
    """Whether the ``"tool"`` output mode wraps ``schema`` in an object (tool
    parameters must be an object; the answer is unwrapped on the way back)."""
    return schema.get("type") != "object"


def _output_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = (
        {"type": "object", "properties": {"response": dict(schema)}, "required": ["response"]}
        if output_tool_wraps(schema)
        else dict(schema)
    )
    return {
        "type": "function",
        "function": {
            "name": OUTPUT_TOOL_NAME,
            "description": "Give the final answer. Call this exactly once, with the answer as its arguments.",
            "parameters": parameters,
        },
    }


def _force_output_tool(config: OpenAIConfig) -> tuple[ToolChoice | None, str | None]:
    """The ``tool_choice`` that forces the output tool on this server, or
    an instruction when the server cannot force a tool."""
    forms = config.profile.tool_choices
    if "named" in forms:
        return ToolChoiceNamed(OUTPUT_TOOL_NAME), None
    if "required" in forms:
        return ToolChoiceRequired(), None
    return None, f"Answer by calling the {OUTPUT_TOOL_NAME} tool with your final answer."


def _prompt_for(schema: Mapping[str, Any]) -> str:
    encoded = msgspec.json.encode(schema, order="sorted").decode()
    return (
        "Answer with a single JSON value that matches this JSON Schema, and nothing else "
        f"(no prose, no code fences):\n{encoded}"
    )


def _add_instruction(messages: list[dict[str, Any]], config: OpenAIConfig, text: str) -> None:
    """Append ``text`` to the instruction message at the top (or add one)."""
    if messages and type(messages[0]) is dict and messages[0]["role"] == config.system_role:
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}
    else:
        messages.insert(0, {"role": config.system_role, "content": text})


def _checked_choice(choice: object, config: OpenAIConfig) -> object:
    form = {ToolChoiceNamed: "named", ToolChoiceNone: "none", ToolChoiceRequired: "required"}.get(
        type(choice), "auto"
    )
    if form not in config.profile.tool_choices:
        raise ModelError.other(
            f"{config.provider} {config.model_id}: the {config.profile.name!r} server profile does not "
            f"support tool_choice {form!r} (it takes {', '.join(sorted(config.profile.tool_choices))})"
        )
    return chat_tool_choice(choice)


def chat_tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """One function tool; ``strict`` only when its schema survives strict mode."""
    strict_parameters = strict_tool_parameters(parameters)
    function: dict[str, Any] = {"name": name, "description": description}
    if strict_parameters is not None:
        function["parameters"] = strict_parameters
        function["strict"] = True
    else:
        function["parameters"] = dict(parameters)
    return {"type": "function", "function": function}


def chat_tool_choice(choice: object) -> object:
    match choice:
        case ToolChoiceNamed(name=name):
            return {"type": "function", "function": {"name": name}}
        case ToolChoiceNone():
            return "none"
        case ToolChoiceRequired():
            return "required"
        case ToolChoiceAuto() | _:
            return "auto"


def chat_messages(
    request: ModelRequest, config: OpenAIConfig, cache: MessageCache | None = None
) -> list[Any]:
    """The ``messages`` array: one instruction message at the top, then the
    conversation, with each assistant turn's tool calls folded into it (with
    a ``cache``, its final messages as encoded parts)."""
    out: list[Any] = []
    system = instructions(request.messages, request.instructions)
    if system is not None:
        out.append({"role": config.system_role, "content": system})
    if cache is None:
        out.extend(m for _, m in _wire_messages(request.messages, config) if m is not None)
    else:
        out.extend(cache.messages(request.messages, lambda items: _wire_messages(items, config)))
    return out


def _wire_messages(items: Sequence[Item], config: OpenAIConfig) -> Converted:
    """The conversation's messages, each with the index of the item that
    opened it (None: left out of the body)."""
    out: Converted = []
    turn: dict[str, Any] | None = None  # the assistant message tool calls attach to
    for index, item in enumerate(items):
        match item:
            case SystemMessage():
                continue
            case UserMessage(content=content):
                turn = None
                out.append((index, {"role": "user", "content": _user_content(content)}))
            case AssistantMessage(content=content):
                text = text_of(content)
                turn = {"role": "assistant", "content": text or None}
                out.append((index, turn))
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                if turn is None:
                    turn = {"role": "assistant", "content": None}
                    out.append((index, turn))
                turn.setdefault("tool_calls", []).append(
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                )
            case ToolResult(call_id=call_id, content=content):
                turn = None
                out.append((index, {"role": "tool", "tool_call_id": call_id, "content": content}))
    empty = config.profile.tool_call_content == "empty"
    for n, (index, message) in enumerate(out):
        if message is None or message["role"] != "assistant" or message["content"] is not None:
            continue
        if "tool_calls" not in message:
            # An assistant message that held only reasoning says nothing OpenAI can take.
            out[n] = (index, None)
        elif empty:
            message["content"] = ""
    return out


def _user_content(content: tuple[object, ...]) -> str | list[dict[str, Any]]:
    if only_text(content):
        return "".join(p.text for p in content if isinstance(p, TextPart))
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart) and (url := image_url(part)) is not None:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


# -- reply -----------------------------------------------------------------------


@attrs.define
class ChatParser:
    """Chat Completions replies -> model events (see the module rules)."""

    config: OpenAIConfig
    #: The request asked for the answer through the output tool (the
    #: ``"tool"`` mode); ``unwrap`` when its schema was wrapped in an object.
    output_tool: bool = False
    unwrap: bool = False
    done: bool = False
    _usage: Usage | None = None
    _output_wire: set[object] = attrs.field(factory=set)
    _output_arguments: list[str] = attrs.field(factory=list)
    _finish: object = None
    _finished: bool = False
    _refusal: list[str] = attrs.field(factory=list)
    _calls: dict[object, tuple[str | None, int]] = attrs.field(factory=dict)
    _next_index: int = 0
    _last_index: int | None = None
    _response_id: str | None = None
    _response_model: str | None = None

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            if not self._finished:
                raise ModelError.transport(
                    f"{self.config.provider} {self.config.model_id}: the stream ended ([DONE]) before the "
                    "model finished (no finish_reason): the reply was cut short"
                )
            return self._final()
        if not data:
            return []
        payload = decoder(self.config)(data)
        if event.event == "error" or (
            isinstance(payload, Mapping) and payload.get("error") and not payload.get("choices")
        ):
            raise payload_error(self.config.provider, self.config.model_id, payload, context="stream error")
        if not isinstance(payload, Mapping):
            raise self._malformed(data)
        self._take_usage(payload)
        self._take_meta(payload)
        out: list[ModelEvent] = []
        for choice in payload.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue  # only the first choice (helikon never asks for n > 1)
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                out.extend(self._delta(delta))
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]
                self._finished = True
        return out

    def close(self) -> list[ModelEvent]:
        if self.done:
            return []
        if not self._finished:
            raise ModelError.transport(
                f"{self.config.provider} {self.config.model_id}: the stream ended before the model finished "
                "(no finish_reason and no [DONE])"
            )
        self.done = True
        return self._final()

    def parse_body(self, body: bytes) -> list[ModelEvent]:
        payload = decoder(self.config)(body)
        if not isinstance(payload, Mapping):
            raise self._malformed(body.decode(errors="replace"))
        if payload.get("error") and not payload.get("choices"):
            raise payload_error(self.config.provider, self.config.model_id, payload, context="error")
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise self._malformed(body.decode(errors="replace"))
        choice = choices[0]
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        out: list[ModelEvent] = []
        reasoning = _reasoning_text(message)
        if reasoning:
            out.append(ReasoningChunk(reasoning))
        text = _content_text(message.get("content"))
        if text:
            out.append(TextChunk(text))
        if isinstance(message.get("refusal"), str) and message["refusal"]:
            self._refusal.append(message["refusal"])
        for position, call in enumerate(message.get("tool_calls") or ()):
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            arguments = function.get("arguments")
            if self.output_tool and function.get("name") == OUTPUT_TOOL_NAME:
                self._output_arguments.append(arguments if isinstance(arguments, str) else "")
                continue
            out.append(
                ToolCallChunk(
                    index=position,
                    call_id=call.get("id") if isinstance(call.get("id"), str) else None,
                    name=function.get("name") if isinstance(function.get("name"), str) else None,
                    arguments=arguments if isinstance(arguments, str) else "",
                )
            )
            self._next_index += 1
        self._take_usage(payload)
        self._take_meta(payload)
        self._finish = choice.get("finish_reason")
        self.done = True
        return out + self._final()

    # -- internals --

    def _delta(self, delta: Mapping[str, Any]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        reasoning = _reasoning_text(delta)
        if reasoning:
            out.append(ReasoningChunk(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(TextChunk(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.append(refusal)
        for fragment in delta.get("tool_calls") or ():
            if isinstance(fragment, Mapping):
                chunk = self._call_fragment(fragment)
                if chunk is not None:
                    out.append(chunk)
        return out

    def _call_fragment(self, fragment: Mapping[str, Any]) -> ToolCallChunk | None:
        wire_index = fragment.get("index")
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) and fragment.get("id") else None
        function = fragment.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name") or None
        name = name if isinstance(name, str) else None
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        if self.output_tool and (
            wire_index in self._output_wire
            or (wire_index is None and call_id is None and name is None and self._last_index == -1)
            or (name == OUTPUT_TOOL_NAME and wire_index not in self._calls)
        ):
            self._output_wire.add(wire_index)
            self._output_arguments.append(arguments)
            self._last_index = -1
            return None
        known = self._calls.get(wire_index)
        if known is not None and (call_id is None or call_id == known[0]):
            index = known[1]
        elif known is None and call_id is None and wire_index is None and self._last_index is not None:
            index = self._last_index  # no index and no id: it continues the latest call
        else:
            index = self._next_index
            self._next_index += 1
            self._calls[wire_index] = (call_id, index)
        self._last_index = index
        if call_id is None and name is None and not arguments:
            return None
        return ToolCallChunk(index=index, call_id=call_id, name=name, arguments=arguments)

    def _take_meta(self, payload: Mapping[str, Any]) -> None:
        """The reply's id and the model that answered, when it names them."""
        if isinstance(payload.get("id"), str) and payload["id"]:
            self._response_id = payload["id"]
        if isinstance(payload.get("model"), str) and payload["model"]:
            self._response_model = payload["model"]

    def _take_usage(self, payload: Mapping[str, Any]) -> None:
        raw = payload.get("usage")
        if not isinstance(raw, Mapping):
            groq = payload.get("x_groq")  # Groq reports usage here on its last chunk
            raw = groq.get("usage") if isinstance(groq, Mapping) else None
        usage = usage_of(
            raw,
            input_key="prompt_tokens",
            output_key="completion_tokens",
            input_details="prompt_tokens_details",
            output_details="completion_tokens_details",
        )
        if usage is not None:
            self._usage = usage

    def _final(self) -> list[ModelEvent]:
        if self._refusal:
            raise refusal_error(self.config.provider, self.config.model_id, "".join(self._refusal))
        out: list[ModelEvent] = []
        if self._output_wire or self._output_arguments:
            out.append(TextChunk(self._output_text()))
        if self._usage is not None:
            out.append(self._usage)
        finish = self._finish
        if self._output_arguments and self._next_index == 0 and finish in ("tool_calls", "function_call"):
            finish = "stop"  # the output tool's call is the answer, not a call to run
        reason = finish_reason(finish, had_calls=self._next_index > 0)
        out.append(Finish(reason, self._response_id, self._response_model))
        return out

    def _output_text(self) -> str:
        text = "".join(self._output_arguments)
        if not self.unwrap:
            return text
        try:
            wrapped = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text  # the loop's validation reports it (and asks for a repair)
        if isinstance(wrapped, Mapping) and "response" in wrapped:
            return msgspec.json.encode(wrapped["response"]).decode()
        return text

    def _malformed(self, data: str) -> ModelError:
        return ModelError.other(
            f"{self.config.provider} {self.config.model_id}: unexpected reply shape: {data[:200]!r}"
        )


def _reasoning_text(message: Mapping[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with text parts
        return "".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""


__all__ = ["PATH", "ChatParser", "chat_body", "chat_messages", "chat_tool", "chat_tool_choice"]
