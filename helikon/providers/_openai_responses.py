"""OpenAI Responses (``POST /responses``): the request body and the reply
parser, streamed (typed SSE events) or not.

Wire rules kept here (from OpenAI's streaming-events reference and the
recorded bodies):

- The stream ends with ``response.completed``, ``response.incomplete`` or
  ``response.failed``; there is no ``[DONE]``. A stream that ends without
  one of them was cut off. An ``error`` event is a failure.
- Events are matched on their ``type`` field (early streams have no
  ``sequence_number``; it is not needed). Argument deltas name their call by
  ``item_id``, the function-call *item* id (``fc_...``), which differs from
  its ``call_id`` (``call_...``); the ``call_id`` is what tool results answer.
- Reasoning summary deltas (and raw ``reasoning_text`` deltas from servers
  that expose them) are reasoning text; the summary parts of one item join
  with no separator. Encrypted reasoning is not surfaced: reasoning carries
  over between calls through ``previous_response_id``, not through replayed
  items (the API rejects a replayed reasoning item unless the output items
  that followed it are replayed with their ids, which helikon's items do not
  keep).
- With ``settings.previous_response_id`` the server holds the conversation:
  only the items after the last assistant turn are sent. Instructions are
  always sent, since the API does not carry them over.
- A ``refusal`` content part means the model declined: a ``Refused`` error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

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
    FinishReason,
    JsonObjectFormat,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
)
from helikon.providers._http import SseEvent
from helikon.providers._incremental import Converted, MessageCache
from helikon.providers._openai_common import (
    OpenAIConfig,
    decoder,
    image_url,
    instructions,
    payload_error,
    refusal_error,
    schema_name,
    strict_tool_parameters,
    usage_of,
)
from helikon.schema import strict

PATH = "/responses"

_TERMINAL = frozenset({"response.completed", "response.incomplete"})
_INCOMPLETE = {"max_output_tokens": FinishReason.LENGTH, "content_filter": FinishReason.CONTENT_FILTER}


# -- request -------------------------------------------------------------------


def responses_body(
    request: ModelRequest, config: OpenAIConfig, cache: MessageCache | None = None
) -> dict[str, Any]:
    """The JSON body of a Responses call for ``request``; with a ``cache``,
    the conversation's final items come as encoded parts
    (:mod:`helikon.providers._incremental`: the body encodes to the same bytes)."""
    settings = request.settings
    body: dict[str, Any] = {"model": config.model_id, "input": responses_input(request, cache)}
    system = instructions(request.messages, request.instructions)
    if system is not None:
        body["instructions"] = system
    if config.stream:
        body["stream"] = True
    if settings.previous_response_id is not None:
        body["previous_response_id"] = settings.previous_response_id
    if config.store is not None:
        body["store"] = config.store
    if request.tools:
        body["tools"] = [responses_tool(t.name, t.description, t.parameters) for t in request.tools]
        if settings.tool_choice is not None:
            body["tool_choice"] = responses_tool_choice(settings.tool_choice)
        if config.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = config.parallel_tool_calls
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.max_output_tokens is not None:
        body["max_output_tokens"] = settings.max_output_tokens
    match settings.response_format:
        case JsonSchema(name=name, schema=schema, strict=is_strict):
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": schema_name(name),
                    "schema": strict(schema) if is_strict else dict(schema),
                    "strict": is_strict,
                }
            }
        case JsonObjectFormat():
            body["text"] = {"format": {"type": "json_object"}}
        case _:
            pass
    reasoning = {
        key: value
        for key, value in (("effort", config.reasoning_effort), ("summary", config.reasoning_summary))
        if value is not None
    }
    if reasoning:
        body["reasoning"] = reasoning
    body.update(config.extra_body)
    return body


def responses_tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """One function tool. ``strict`` is always explicit: the API defaults it to true."""
    strict_parameters = strict_tool_parameters(parameters)
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": strict_parameters if strict_parameters is not None else dict(parameters),
        "strict": strict_parameters is not None,
    }


def responses_tool_choice(choice: object) -> object:
    match choice:
        case ToolChoiceNamed(name=name):
            return {"type": "function", "name": name}
        case ToolChoiceNone():
            return "none"
        case ToolChoiceRequired():
            return "required"
        case ToolChoiceAuto() | _:
            return "auto"


def responses_input(request: ModelRequest, cache: MessageCache | None = None) -> list[Any]:
    """The ``input`` items; after the last assistant turn only, when the
    server holds the conversation (``previous_response_id``)."""
    if request.settings.previous_response_id is not None:
        tail = after_last_assistant_turn(request.messages)
        return [m for _, m in _wire_items(tail) if m is not None]
    if cache is not None:
        return cache.messages(request.messages, _wire_items)
    return [m for _, m in _wire_items(request.messages) if m is not None]


def _wire_items(items: Sequence[Item]) -> Converted:
    """One ``input`` item per conversation item (None: left out)."""
    out: Converted = []
    for index, item in enumerate(items):
        message: dict[str, Any] | None = None
        match item:
            case SystemMessage():
                pass
            case UserMessage(content=content):
                parts: list[dict[str, Any]] = []
                for part in content:
                    if isinstance(part, TextPart):
                        parts.append({"type": "input_text", "text": part.text})
                    elif isinstance(part, ImagePart) and (url := image_url(part)) is not None:
                        parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
                message = {"type": "message", "role": "user", "content": parts}
            case AssistantMessage(content=content):
                text = text_of(content)
                if text:
                    message = {"type": "message", "role": "assistant", "content": text}
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                message = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
            case ToolResult(call_id=call_id, content=content):
                message = {"type": "function_call_output", "call_id": call_id, "output": content}
        out.append((index, message))
    return out


def after_last_assistant_turn(messages: Sequence[Item]) -> Sequence[Item]:
    """The items after the last assistant message or tool call (all if none).

    >>> from helikon.items import user_text
    >>> from helikon.ids import CallId
    >>> msgs = (user_text("a"), ToolCall(CallId("c1"), "f", "{}"), ToolResult(CallId("c1"), "f", "ok"))
    >>> after_last_assistant_turn(msgs) == msgs[2:]
    True
    """
    for position in range(len(messages) - 1, -1, -1):
        if isinstance(messages[position], AssistantMessage | ToolCall):
            return messages[position + 1 :]
    return messages


# -- reply -----------------------------------------------------------------------


@attrs.define
class ResponsesParser:
    """Responses replies -> model events (see the module rules)."""

    config: OpenAIConfig
    done: bool = False
    _response_id: str | None = None
    _response_model: str | None = None
    _calls: dict[object, int] = attrs.field(factory=dict)
    _with_arguments: set[int] = attrs.field(factory=set)
    _streamed: set[object] = attrs.field(factory=set)  # items whose text or reasoning streamed
    _refusal: list[str] = attrs.field(factory=list)

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        data = event.data.strip()
        if not data or data == "[DONE]":
            return []
        payload = decoder(self.config)(data)
        if not isinstance(payload, Mapping):
            raise self._malformed(data)
        kind = payload.get("type") or event.event
        match kind:
            case "response.created" | "response.in_progress" | "response.queued":
                self._take_id(payload.get("response"))
            case "response.output_item.added":
                return self._item_added(payload.get("item"), payload.get("output_index"))
            case "response.output_item.done":
                return self._item_done(payload.get("item"), payload.get("output_index"))
            case "response.output_text.delta":
                return self._text(payload, TextChunk)
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                return self._text(payload, ReasoningChunk)
            case "response.refusal.delta":
                self._streamed.add(("refusal", payload.get("item_id")))
                if isinstance(payload.get("delta"), str):
                    self._refusal.append(payload["delta"])
            case "response.function_call_arguments.delta":
                delta = payload.get("delta")
                if isinstance(delta, str) and delta:
                    index = self._call_index(payload.get("item_id"), payload.get("output_index"))[0]
                    self._with_arguments.add(index)
                    return [ToolCallChunk(index=index, arguments=delta)]
            case "response.failed":
                response = payload.get("response")
                error = response.get("error") if isinstance(response, Mapping) else None
                raise payload_error(
                    self.config.provider, self.config.model_id, error, context="response failed"
                )
            case "error":
                raise payload_error(
                    self.config.provider, self.config.model_id, payload, context="stream error"
                )
            case _ if kind in _TERMINAL:
                self.done = True
                return self._final(payload.get("response"))
        return []

    def close(self) -> list[ModelEvent]:
        if self.done:
            return []
        raise ModelError.transport(
            f"{self.config.provider} {self.config.model_id}: the stream ended before the response completed "
            "(no response.completed event)"
        )

    def parse_body(self, body: bytes) -> list[ModelEvent]:
        response = decoder(self.config)(body)
        if not isinstance(response, Mapping):
            raise self._malformed(body.decode(errors="replace"))
        if response.get("error") and not response.get("output"):
            raise payload_error(self.config.provider, self.config.model_id, response, context="error")
        output = response.get("output")
        if not isinstance(output, list):
            raise self._malformed(body.decode(errors="replace"))
        events: list[ModelEvent] = []
        for position, item in enumerate(output):
            events.extend(self._item_done(item, position))
        self.done = True
        return events + self._final(response)

    # -- internals --

    def _take_id(self, response: object) -> None:
        if isinstance(response, Mapping) and isinstance(response.get("id"), str):
            self._response_id = response["id"]
        if isinstance(response, Mapping) and isinstance(response.get("model"), str) and response["model"]:
            self._response_model = response["model"]

    def _call_index(self, item_id: object, output_index: object) -> tuple[int, bool]:
        """The call's index (and whether it is new), known by item id or output index."""
        for key in (item_id, ("output", output_index)):
            if key is not None and key != ("output", None) and key in self._calls:
                return self._calls[key], False
        index = len(set(self._calls.values()))
        if item_id is not None:
            self._calls[item_id] = index
        if output_index is not None:
            self._calls[("output", output_index)] = index
        return index, True

    def _item_added(self, item: object, output_index: object) -> list[ModelEvent]:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return []
        index, _ = self._call_index(item.get("id"), output_index)
        arguments = _str(item.get("arguments"))
        if arguments:
            self._with_arguments.add(index)
        return [_call_start(item, index, arguments)]

    def _item_done(self, item: object, output_index: object) -> list[ModelEvent]:
        """What a finished item adds that its deltas did not already give."""
        if not isinstance(item, Mapping):
            return []
        item_id = item.get("id")
        match item.get("type"):
            case "function_call":
                index, new = self._call_index(item_id, output_index)
                arguments = _str(item.get("arguments"))
                if new:
                    self._with_arguments.add(index)
                    return [_call_start(item, index, arguments)]
                if arguments and index not in self._with_arguments:
                    self._with_arguments.add(index)
                    return [ToolCallChunk(index=index, arguments=arguments)]
            case "message":
                out: list[ModelEvent] = []
                for part in item.get("content") or ():
                    if not isinstance(part, Mapping):
                        continue
                    if part.get("type") == "output_text" and item_id not in self._streamed:
                        if _str(part.get("text")):
                            out.append(TextChunk(part["text"]))
                    elif part.get("type") == "refusal" and ("refusal", item_id) not in self._streamed:
                        self._refusal.append(_str(part.get("refusal")))
                return out
            case "reasoning" if item_id not in self._streamed:
                texts = [_str(p.get("text")) for p in item.get("summary") or () if isinstance(p, Mapping)]
                texts += [_str(p.get("text")) for p in item.get("content") or () if isinstance(p, Mapping)]
                return [ReasoningChunk(text) for text in texts if text]
            case _:
                pass  # built-in tool calls and other items carry nothing helikon models
        return []

    def _text(
        self, payload: Mapping[str, Any], kind: type[TextChunk] | type[ReasoningChunk]
    ) -> list[ModelEvent]:
        self._streamed.add(payload.get("item_id"))
        delta = payload.get("delta")
        return [kind(delta)] if isinstance(delta, str) and delta else []

    def _final(self, response: object) -> list[ModelEvent]:
        if not isinstance(response, Mapping):
            raise self._malformed(repr(response))
        self._take_id(response)
        if response.get("status") == "failed":
            raise payload_error(
                self.config.provider, self.config.model_id, response.get("error"), context="response failed"
            )
        if self._refusal:
            raise refusal_error(self.config.provider, self.config.model_id, "".join(self._refusal))
        out: list[ModelEvent] = []
        usage = usage_of(
            response.get("usage"),
            input_key="input_tokens",
            output_key="output_tokens",
            input_details="input_tokens_details",
            output_details="output_tokens_details",
        )
        if usage is not None:
            out.append(usage)
        out.append(Finish(self._reason(response), self._response_id, self._response_model))
        return out

    def _reason(self, response: Mapping[str, Any]) -> FinishReason:
        status = response.get("status")
        if status == "incomplete":
            details = response.get("incomplete_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            return _INCOMPLETE.get(str(why), FinishReason.OTHER)
        if status in ("completed", None):
            return FinishReason.TOOL_CALLS if self._calls else FinishReason.STOP
        return FinishReason.OTHER  # cancelled, or still queued / in progress (background mode)

    def _malformed(self, data: str) -> ModelError:
        return ModelError.other(
            f"{self.config.provider} {self.config.model_id}: unexpected reply shape: {data[:200]!r}"
        )


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _opt(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _call_start(item: Mapping[str, Any], index: int, arguments: str) -> ToolCallChunk:
    """The first chunk of a ``function_call`` item: its id, name and ``arguments``."""
    return ToolCallChunk(
        index=index,
        call_id=_opt(item.get("call_id")),
        name=_opt(item.get("name")),
        arguments=arguments,
    )


__all__ = [
    "PATH",
    "ResponsesParser",
    "after_last_assistant_turn",
    "responses_body",
    "responses_input",
    "responses_tool",
    "responses_tool_choice",
]
