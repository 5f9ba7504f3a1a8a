"""Translate a :class:`~helikon.model.ModelRequest` into a Gemini request body.

One body serves both transports (Developer API and Vertex AI) and both
methods (``generateContent`` and ``streamGenerateContent``). The translation
is pure: it reads only the request and the adapter's options.

Rules (see ``docs/providers.md``, Gemini):

- System messages, wherever they are, become ``systemInstruction``.
- An assistant turn (an :class:`AssistantMessage` and the :class:`ToolCall`
  items right after it) becomes one ``model`` content: reasoning text as
  ``thought: true`` parts, then text, then ``functionCall`` parts.
- Consecutive :class:`ToolResult` items become ``functionResponse`` parts of
  one ``user`` content, matched to their calls by name and order (Gemini has
  no call ids); consecutive contents of the same role are merged.
- Thought signatures (Gemini's ``thoughtSignature``) travel in
  :class:`ReasoningPart` signatures and go back on the first
  ``functionCall`` of the turn when it has calls, else on its last part.
- Remote-URL images and image parts in system or assistant messages are
  dropped (the book's limitation); ``data:`` URLs and inline data are sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs
import msgspec

from helikon.errors import ModelError
from helikon.items import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Item,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.model import (
    JsonObjectFormat,
    JsonSchema,
    ModelRequest,
    ModelSettings,
    Text,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers._gemini_schema import sanitize_schema
from helikon.providers._incremental import Converted, MessageCache

#: Media types guessed from the first bytes of base64 data without one.
_MAGIC: Final = (
    ("iVBOR", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
)


@attrs.frozen
class Thinking:
    """Gemini's ``thinkingConfig`` (None fields are left to the model)."""

    #: Ask for thought summaries (streamed as reasoning chunks).
    include_thoughts: bool = False
    #: Gemini 2.5: the thinking token budget (0 turns thinking off, -1 is dynamic).
    budget: int | None = None
    #: Gemini 3: ``"minimal"``, ``"low"``, ``"medium"`` or ``"high"``.
    level: str | None = None

    def config(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.include_thoughts:
            out["includeThoughts"] = True
        if self.budget is not None:
            out["thinkingBudget"] = self.budget
        if self.level is not None:
            out["thinkingLevel"] = self.level
        return out or None


def check_conflict(settings: ModelSettings, tools: Sequence[ToolDef], where: str) -> None:
    """Refuse structured output combined with function calling, before sending.

    Raises:
        ModelError: ``other``, naming the conflict, when the response format
            is JSON (object or schema) while tools are offered or a tool
            choice other than none is set.
    """
    fmt = settings.response_format
    if not isinstance(fmt, JsonObjectFormat | JsonSchema):
        return
    choice = settings.tool_choice
    if not tools and (choice is None or isinstance(choice, ToolChoiceNone)):
        return
    what = f"JsonSchema {fmt.name!r}" if isinstance(fmt, JsonSchema) else "JsonObject"
    names = ", ".join(t.name for t in tools)
    active = f"{len(tools)} tool(s): {names}" if tools else f"tool_choice={choice!r}"
    raise ModelError.other(
        f"{where}: structured output ({what} response format) cannot be combined with function calling "
        f"({active}); Gemini rejects the request. Drop the tools or the response format."
    )


def build_body(
    request: ModelRequest, thinking: Thinking, where: str, cache: MessageCache | None = None
) -> dict[str, Any]:
    """The JSON body for ``generateContent``/``streamGenerateContent``; with a
    ``cache``, the conversation's final contents come as encoded parts
    (:mod:`helikon.providers._incremental`: the body then encodes to the same
    bytes).

    Raises:
        ModelError: the structured-output/tools conflict (see :func:`check_conflict`).

    >>> from helikon.items import user_text, system_text
    >>> build_body(ModelRequest((system_text("Be brief."), user_text("Hi"))), Thinking(), "gcp.gemini m")
    {'contents': [{'role': 'user', 'parts': [{'text': 'Hi'}]}], \
'systemInstruction': {'parts': [{'text': 'Be brief.'}]}}
    """
    settings = request.settings
    check_conflict(settings, request.tools, where)
    if cache is None:
        system, contents = _contents(request.messages, request.instructions)
    else:
        system = _system_parts(request.messages, request.instructions)
        contents = cache.messages(request.messages, _wire_contents)
    body: dict[str, Any] = {"contents": contents or [{"role": "user", "parts": [{"text": ""}]}]}
    if system:
        body["systemInstruction"] = {"parts": system}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
    tool_config = _tool_config(settings)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    generation = _generation_config(settings, thinking)
    if generation:
        body["generationConfig"] = generation
    return body


def _declaration(tool: ToolDef) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = sanitize_schema(tool.parameters)
    # Gemini rejects an OBJECT schema with empty properties: a tool without
    # arguments declares no parameters at all.
    if parameters.get("properties") or parameters.get("type") not in (None, "object"):
        out["parameters"] = parameters
    return out


def _tool_config(settings: ModelSettings) -> dict[str, Any] | None:
    match settings.tool_choice:
        case None:
            return None
        case ToolChoiceAuto():
            config: dict[str, Any] = {"mode": "AUTO"}
        case ToolChoiceNone():
            config = {"mode": "NONE"}
        case ToolChoiceRequired():
            config = {"mode": "ANY"}
        case ToolChoiceNamed(name=name):
            config = {"mode": "ANY", "allowedFunctionNames": [name]}
    return {"functionCallingConfig": config}


def _generation_config(settings: ModelSettings, thinking: Thinking) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if settings.temperature is not None:
        out["temperature"] = settings.temperature
    if settings.top_p is not None:
        out["topP"] = settings.top_p
    if settings.max_output_tokens is not None:
        out["maxOutputTokens"] = settings.max_output_tokens
    match settings.response_format:
        case JsonObjectFormat():
            out["responseMimeType"] = "application/json"
        case JsonSchema(schema=schema):
            out["responseMimeType"] = "application/json"
            out["responseSchema"] = sanitize_schema(schema)
        case Text() | None:
            pass
    config = thinking.config()
    if config is not None:
        out["thinkingConfig"] = config
    return out


# -- contents ------------------------------------------------------------------


@attrs.define
class _Turn:
    """An assistant turn being collected: its message parts and calls."""

    content: list[ContentPart] = attrs.field(factory=list)
    calls: list[ToolCall] = attrs.field(factory=list)


def _contents(
    messages: Sequence[Item], instructions: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(systemInstruction parts, contents)`` for a conversation (the
    request's ``instructions`` are the first system part)."""
    return _system_parts(messages, instructions), [c for _, c in _wire_contents(messages) if c is not None]


def _system_parts(messages: Sequence[Item], instructions: str | None = None) -> list[dict[str, Any]]:
    """The ``systemInstruction`` parts: the instructions, then every system message's text."""
    system: list[dict[str, Any]] = [] if instructions is None else [{"text": instructions}]
    for item in messages:
        if type(item) is SystemMessage:
            system.extend({"text": p.text} for p in item.content if isinstance(p, TextPart))
    return system


def _wire_contents(messages: Sequence[Item]) -> Converted:
    """The ``contents`` of a conversation, each with the index of the item
    that opened it (an assistant turn's content opens at its first item;
    consecutive contents of one role share one)."""
    contents: list[tuple[int, dict[str, Any]]] = []
    turn: _Turn | None = None
    opened = 0

    def add(start: int, role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1][1]["role"] == role:
            contents[-1][1]["parts"].extend(parts)
        else:
            contents.append((start, {"role": role, "parts": parts}))

    for index, item in enumerate(messages):
        if turn is not None and not isinstance(item, ToolCall):
            add(opened, "model", _model_parts(turn))
            turn = None
        match item:
            case SystemMessage():
                pass
            case UserMessage(content=content):
                add(index, "user", _user_parts(content))
            case AssistantMessage(content=content):
                turn, opened = _Turn(list(content)), index
            case ToolCall():
                if turn is None:
                    turn, opened = _Turn(), index
                turn.calls.append(item)
            case ToolResult():
                add(index, "user", [_function_response(item)])
    if turn is not None:
        add(opened, "model", _model_parts(turn))
    return [(start, content) for start, content in contents]


def _user_parts(content: Sequence[ContentPart]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in content:
        match part:
            case TextPart(text=text):
                parts.append({"text": text})
            case ImagePart():
                inline = _inline_image(part)
                if inline is not None:
                    parts.append({"inlineData": inline})
            case ReasoningPart():
                pass
    return parts


def _inline_image(part: ImagePart) -> dict[str, str] | None:
    """``inlineData`` for an image given as data or a ``data:`` URL; None for a remote URL."""
    data, media_type = part.data, part.media_type
    if data is None and part.url is not None and part.url.startswith("data:"):
        header, _, data = part.url[5:].partition(",")
        media_type = media_type or header.split(";")[0] or None
        if ";base64" not in header:
            return None
    if not data:
        return None
    if media_type is None:
        media_type = next((m for prefix, m in _MAGIC if data.startswith(prefix)), "image/png")
    return {"mimeType": media_type, "data": data}


def _model_parts(turn: _Turn) -> list[dict[str, Any]]:
    """The parts of one ``model`` content, with thought signatures placed."""
    thoughts: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    signatures: list[str] = []
    for part in turn.content:
        match part:
            case ReasoningPart(text=text, signature=signature):
                if text:
                    thoughts.append({"text": text, "thought": True})
                if signature:
                    signatures.append(signature)
            case TextPart(text=text):
                if text:
                    texts.append({"text": text})
            case ImagePart():
                pass
    calls: list[dict[str, Any]] = [
        {"functionCall": {"name": c.name, "args": _args(c.arguments)}} for c in turn.calls
    ]
    parts = [*thoughts, *texts, *calls]
    if signatures and parts:
        # Gemini 3 puts the signature on the first functionCall of a step (and
        # validates it); without calls it sits on the last part.
        carrier = calls[0] if calls else parts[-1]
        carrier["thoughtSignature"] = signatures[0]
        if calls and len(signatures) > 1 and texts:
            texts[-1]["thoughtSignature"] = signatures[1]
    elif signatures:
        parts = [{"text": "", "thoughtSignature": signatures[0]}]
    return parts


def _args(arguments: str) -> Any:
    """A call's arguments as the JSON object Gemini wants (``{}`` if unusable)."""
    if not arguments.strip():
        return {}
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _function_response(result: ToolResult) -> dict[str, Any]:
    # Vertex documents the "output"/"error" keys for a function's result.
    key = "error" if result.is_error else "output"
    return {"functionResponse": {"name": result.name, "response": {key: result.content}}}


__all__ = ["Thinking", "build_body", "check_conflict"]
