"""Build the JSON body of a Messages API request from a :class:`ModelRequest`.

Pure: no IO. The rules it owns:

- System messages, wherever they stand, are hoisted in order into the
  top-level ``system`` field as text blocks.
- Items alternate into ``user`` and ``assistant`` messages; consecutive items
  of one role merge into one message. ``ToolCall`` items become ``tool_use``
  blocks of the assistant message before them; ``ToolResult`` items become
  ``tool_result`` blocks (``is_error`` kept) of one user message.
- An assistant message's ``ReasoningPart`` goes back as a ``thinking`` block
  with its signature (before the message's text and ``tool_use`` blocks, as
  the API requires); one whose signature starts with ``redacted:`` goes back
  as a ``redacted_thinking`` block holding the rest; an unsigned one is
  dropped (the API rejects thinking without its signature).
- Tool and output schemas are sent as-is (the API accepts JSON Schema
  directly; there is no strict-mode rewrite as for OpenAI).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, assert_never

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
    ToolChoice,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
    ToolDef,
)
from helikon.providers._anthropic_schema import output_schema
from helikon.providers._anthropic_settings import (
    OUTPUT_TOOL_NAME,
    REDACTED_PREFIX,
    CacheStrategy,
    Options,
    StructuredOutputMode,
)
from helikon.providers._incremental import Converted, MessageCache

Block = dict[str, Any]
Message = dict[str, Any]

#: The ``cache_control`` marker of a breakpoint (the default 5-minute TTL).
EPHEMERAL: Final[Mapping[str, str]] = {"type": "ephemeral"}

#: Anthropic has no "any JSON object" mode; for ``JsonObjectFormat`` this
#: line is added to the system prompt instead.
JSON_OBJECT_INSTRUCTION: Final = (
    "Respond with a single JSON object and nothing else: no prose, no code fences."
)

_OUTPUT_TOOL_DESCRIPTION: Final = (
    "Give your final answer by calling this tool; its input is the answer, matching the schema."
)

_UNCACHEABLE: Final = frozenset({"thinking", "redacted_thinking"})


def build_body(request: ModelRequest, options: Options, cache: MessageCache | None = None) -> dict[str, Any]:
    """The request body for ``request``; with a ``cache``, the conversation's
    final messages come as encoded parts (:mod:`helikon.providers._incremental`:
    the body then encodes to the same bytes).

    >>> from helikon.items import system_text, user_text
    >>> request = ModelRequest((system_text("Be brief."), user_text("Hi")))
    >>> build_body(request, Options("claude-x", stream=False))
    {'model': 'claude-x', 'max_tokens': 4096, 'system': [{'type': 'text', 'text': 'Be brief.'}], \
'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}]}

    Raises:
        ModelError: an item cannot be expressed (an inline image without a
            media type).
    """
    settings = request.settings
    if cache is None:
        system, messages = convert_messages(request.messages, options.model_id, request.instructions)
    else:
        model_id = options.model_id
        system = system_blocks(request.messages, request.instructions)
        messages = cache.messages(request.messages, lambda items: _wire_of(items, model_id))
    # The tools the conversation's tool_use blocks called, in order.
    used = list(dict.fromkeys(item.name for item in request.messages if type(item) is ToolCall))
    tools = [tool_json(t) for t in request.tools]
    choice = tool_choice_json(settings.tool_choice, options) if tools else None
    output_config: dict[str, Any] | None = None

    match settings.response_format:
        case None | Text():
            pass
        case JsonObjectFormat():
            system.append({"type": "text", "text": JSON_OBJECT_INSTRUCTION})
        case JsonSchema(schema=schema):
            if options.structured_output is StructuredOutputMode.NATIVE:
                output_config = {"format": {"type": "json_schema", "schema": output_schema(plain(schema))}}
            else:
                tools.append(
                    {
                        "name": OUTPUT_TOOL_NAME,
                        "description": _OUTPUT_TOOL_DESCRIPTION,
                        "input_schema": plain(schema),
                    }
                )
                # Extended thinking allows only "auto" and "none".
                choice = (
                    {"type": "auto"}
                    if options.thinking is not None
                    else {"type": "tool", "name": OUTPUT_TOOL_NAME}
                )
        case _ as unreachable:
            assert_never(unreachable)

    declared = {tool["name"] for tool in tools}
    missing = [name for name in used if name not in declared]
    if missing:
        # The API refuses tool_use/tool_result blocks for tools it was not
        # told of (a structured turn after tool rounds offers none): the
        # history's tools are declared again; when the request offered no
        # tool of its own, none may be called.
        placeholder: dict[str, Any] = {"description": "", "input_schema": {"type": "object"}}
        tools.extend({"name": name, **placeholder} for name in missing)
        if not declared:
            choice = {"type": "none"}

    if options.cache is not CacheStrategy.NONE:
        if tools:
            tools[-1]["cache_control"] = dict(EPHEMERAL)
        if system:
            system[-1]["cache_control"] = dict(EPHEMERAL)
        if options.cache is CacheStrategy.SYSTEM_TOOLS_AND_HISTORY:
            mark_last_block(messages)

    problem = settings_problem(settings, options)
    if problem is not None:
        raise ModelError.other(f"anthropic {options.model_id}: {problem}")
    max_tokens = settings.max_output_tokens or options.default_max_tokens()
    if options.thinking is not None and settings.max_output_tokens is not None:
        # The API counts thinking inside max_tokens and wants it above the
        # budget: the answer keeps max_output_tokens of its own.
        max_tokens = options.thinking.budget_tokens + settings.max_output_tokens
    body: dict[str, Any] = {"model": options.model_id, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    body["messages"] = messages
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
    if output_config is not None:
        body["output_config"] = output_config
    if options.thinking is not None:
        body["thinking"] = options.thinking.wire()
    if sampling_support(options.model_id) != "defaults":
        # A model that takes only the defaults is sent none (the same answer).
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
    if options.stream:
        body["stream"] = True
    return body


def settings_problem(settings: ModelSettings, options: Options) -> str | None:
    """Why the Messages API would refuse ``settings`` for this model, or None.

    >>> settings_problem(ModelSettings(temperature=0.2, top_p=0.9), Options("claude-sonnet-4-5"))
    'claude-sonnet-4-5 takes temperature or top_p, not both'
    >>> both = ModelSettings(temperature=0.2, top_p=0.9)
    >>> settings_problem(both, Options("claude-3-5-haiku-latest")) is None
    True
    >>> settings_problem(ModelSettings(temperature=0.0), Options("claude-opus-4-7"))
    'claude-opus-4-7 takes no temperature or top_p (the API removed sampling settings for this model)'
    """
    problem = sampling_problem(settings, options.model_id)
    if problem is not None:
        return problem
    if options.thinking is None:
        return None
    if settings.temperature is not None and settings.temperature != 1:
        return "extended thinking does not take a temperature (leave it unset)"
    if settings.top_p is not None and not 0.95 <= settings.top_p <= 1:
        return f"extended thinking takes top_p between 0.95 and 1, not {settings.top_p}"
    if isinstance(settings.tool_choice, ToolChoiceRequired | ToolChoiceNamed):
        return "extended thinking cannot force a tool (tool_choice must be auto or none)"
    return None


def sampling_problem(settings: ModelSettings, model_id: str) -> str | None:
    """Why a Claude model (on the Messages API or Bedrock) would refuse the
    sampling settings of ``settings``, or None (see :func:`sampling_support`)."""
    sampling = sampling_support(model_id)
    chosen = [name for name in ("temperature", "top_p") if getattr(settings, name) is not None]
    if chosen and sampling == "none":
        return f"{model_id} takes no temperature or top_p (the API removed sampling settings for this model)"
    if sampling == "defaults":
        odd = [name for name in chosen if getattr(settings, name) != 1]
        if odd:
            return f"{model_id} takes only the default {odd[0]} (1), not {getattr(settings, odd[0])}"
    if len(chosen) == 2 and sampling == "one":
        return f"{model_id} takes temperature or top_p, not both"
    return None


#: Model families (id prefixes, after any Bedrock region/vendor prefix) by the
#: sampling settings the Messages API takes. The API removed ``temperature``
#: and ``top_p`` from Claude Opus 4.7 on (a 400 "deprecated for this model"
#: when either is present), Sonnet/Haiku 5 take only the defaults, the 4.x
#: models from Sonnet 4.5 take one of the two, the Claude 3 family and the
#: first Claude 4 models both. The official SDK (``anthropic>=1``) no longer
#: declares either field; older models still honour them on the wire.
_SAMPLING_NONE = ("claude-opus-4-7", "claude-opus-4-8", "claude-opus-5", "claude-fable", "claude-mythos")
_SAMPLING_DEFAULTS = ("claude-sonnet-5", "claude-haiku-5")
_SAMPLING_BOTH = (
    "claude-3",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025",
    "claude-opus-4-0",
    "claude-opus-4-2025",
)


def sampling_support(model_id: str) -> Literal["both", "one", "defaults", "none", "unknown"]:
    """Which sampling settings ``model_id`` takes: ``"both"`` (temperature and
    top_p together), ``"one"`` (either, not both), ``"defaults"`` (only the
    value 1, so nothing is sent), ``"none"``, or ``"unknown"`` for an id that
    names no Claude family (sent as set: the server decides).

    >>> [sampling_support(m) for m in ("claude-3-5-haiku-latest", "claude-sonnet-4-5", "claude-opus-4-8")]
    ['both', 'one', 'none']
    >>> sampling_support("us.anthropic.claude-sonnet-5-v1:0"), sampling_support("my-proxy-model")
    ('defaults', 'unknown')
    """
    name = model_id[model_id.index("claude-"):] if "claude-" in model_id else model_id
    if name.startswith(_SAMPLING_NONE):
        return "none"
    if name.startswith(_SAMPLING_DEFAULTS):
        return "defaults"
    if name.startswith(_SAMPLING_BOTH):
        return "both"
    if name.startswith("claude-"):
        return "one"
    return "unknown"


def _wire_of(items: Sequence[Item], model_id: str) -> Converted:
    return [(start, message) for start, message in wire_messages(items, model_id)]


def convert_messages(
    items: Sequence[Item], model_id: str = "", instructions: str | None = None
) -> tuple[list[Block], list[Message]]:
    """Split ``items`` into the ``system`` blocks and the ``messages`` list
    (the request's ``instructions`` are the first system block).

    >>> from helikon.ids import CallId
    >>> _, msgs = convert_messages((
    ...     AssistantMessage((TextPart("Let me look."),)),
    ...     ToolCall(CallId("t1"), "f", '{"x": 1}'),
    ...     ToolResult(CallId("t1"), "f", "boom", is_error=True),
    ... ))
    >>> msgs[0]["content"][1]
    {'type': 'tool_use', 'id': 't1', 'name': 'f', 'input': {'x': 1}}
    >>> msgs[1]
    {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 't1', 'content': 'boom', \
'is_error': True}]}
    """
    return system_blocks(items, instructions), [m for _, m in wire_messages(items, model_id)]


def system_blocks(items: Sequence[Item], instructions: str | None = None) -> list[Block]:
    """The ``system`` blocks: the request's instructions, then every system message's text."""
    system: list[Block] = [{"type": "text", "text": instructions}] if instructions else []
    for item in items:
        if type(item) is SystemMessage:
            system.extend(
                {"type": "text", "text": p.text} for p in item.content if type(p) is TextPart and p.text
            )
    return system


def wire_messages(items: Sequence[Item], model_id: str = "") -> list[tuple[int, Message]]:
    """The ``messages`` of ``items``, each with the index of the item that
    opened it (consecutive items of one role share a message)."""
    messages: list[tuple[int, Message]] = []
    for index, item in enumerate(items):
        match item:
            case SystemMessage():
                continue
            case UserMessage(content=content):
                role, blocks = "user", [b for p in content if (b := _user_block(p, model_id)) is not None]
            case AssistantMessage(content=content):
                role, blocks = "assistant", [b for p in content if (b := _assistant_block(p)) is not None]
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                role, blocks = "assistant", [tool_use_block(call_id, name, arguments)]
            case ToolResult(call_id=call_id, content=text, is_error=is_error):
                block: Block = {"type": "tool_result", "tool_use_id": call_id}
                if text:
                    block["content"] = text
                if is_error:
                    block["is_error"] = True
                role, blocks = "user", [block]
            case _ as unreachable:
                assert_never(unreachable)
        if not blocks:
            continue
        if messages and messages[-1][1]["role"] == role:
            messages[-1][1]["content"].extend(blocks)
        else:
            messages.append((index, {"role": role, "content": blocks}))
    return messages


def tool_use_block(call_id: str, name: str, arguments: str) -> Block:
    """A ``tool_use`` block; ``input`` must be an object, so arguments that
    are empty, not JSON or not an object go back as ``{}``.

    >>> tool_use_block("t", "f", "not json")["input"]
    {}
    """
    try:
        value = msgspec.json.decode(arguments) if arguments.strip() else {}
    except msgspec.DecodeError:
        value = {}
    return {
        "type": "tool_use",
        "id": call_id,
        "name": name,
        "input": value if isinstance(value, dict) else {},
    }


def tool_json(tool: ToolDef) -> Block:
    """A client tool definition (schema as-is).

    >>> tool_json(ToolDef("f", "", {"type": "object"}))
    {'name': 'f', 'input_schema': {'type': 'object'}}
    """
    block: Block = {"name": tool.name}
    if tool.description:
        block["description"] = tool.description
    block["input_schema"] = plain(tool.parameters)
    return block


def tool_choice_json(choice: ToolChoice | None, options: Options) -> Block | None:
    """The ``tool_choice`` field, or None to leave the API's default (auto).

    >>> tool_choice_json(ToolChoiceRequired(), Options("m"))
    {'type': 'any'}
    >>> tool_choice_json(None, Options("m", parallel_tool_calls=False))
    {'type': 'auto', 'disable_parallel_tool_use': True}
    """
    result: Block
    match choice:
        case None:
            if options.parallel_tool_calls:
                return None
            result = {"type": "auto"}
        case ToolChoiceAuto():
            result = {"type": "auto"}
        case ToolChoiceNone():
            return {"type": "none"}
        case ToolChoiceRequired():
            result = {"type": "any"}
        case ToolChoiceNamed(name=name):
            result = {"type": "tool", "name": name}
        case _ as unreachable:
            assert_never(unreachable)
    if not options.parallel_tool_calls:
        result["disable_parallel_tool_use"] = True
    return result


def mark_last_block(messages: list[Message]) -> None:
    """Put a cache breakpoint on the last block of the last message that can
    carry one (not thinking, not empty text)."""
    if not messages:
        return
    for block in reversed(messages[-1]["content"]):
        if block["type"] in _UNCACHEABLE or (block["type"] == "text" and not block["text"]):
            continue
        block["cache_control"] = dict(EPHEMERAL)
        return


def plain(value: Any) -> Any:
    """A copy of a JSON value made of plain dicts and lists (what the encoder takes)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def _user_block(part: ContentPart, model_id: str) -> Block | None:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text} if text else None
        case ImagePart():
            return image_block(part, model_id)
        case ReasoningPart():
            return None
        case _ as unreachable:
            assert_never(unreachable)


def _assistant_block(part: ContentPart) -> Block | None:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text} if text else None
        case ReasoningPart(text=text, signature=signature):
            if not signature:
                return None
            if signature.startswith(REDACTED_PREFIX):
                return {"type": "redacted_thinking", "data": signature.removeprefix(REDACTED_PREFIX)}
            return {"type": "thinking", "thinking": text, "signature": signature}
        case ImagePart():
            return None  # assistant turns cannot carry images
        case _ as unreachable:
            assert_never(unreachable)


def image_block(part: ImagePart, model_id: str = "") -> Block:
    """An ``image`` block from inline data, a ``data:`` URL or a URL.

    >>> image_block(ImagePart(url="data:image/png;base64,AAAA"))["source"]
    {'type': 'base64', 'media_type': 'image/png', 'data': 'AAAA'}
    >>> image_block(ImagePart(url="https://x/y.jpg"))["source"]
    {'type': 'url', 'url': 'https://x/y.jpg'}
    """
    if part.data is not None:
        if not part.media_type:
            raise ModelError.other(
                f"anthropic {model_id}: an inline image needs its media_type (e.g. image/png)"
            )
        source: Block = {"type": "base64", "media_type": part.media_type, "data": part.data}
    elif part.url is not None and part.url.startswith("data:"):
        header, _, data = part.url.partition(",")
        media_type = header.removeprefix("data:").split(";", 1)[0] or part.media_type
        if not media_type or ";base64" not in header:
            raise ModelError.other(
                f"anthropic {model_id}: only base64 data: URLs with a media type are supported"
            )
        source = {"type": "base64", "media_type": media_type, "data": data}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        raise ModelError.other(f"anthropic {model_id}: an image part needs a url or data")
    return {"type": "image", "source": source}


__all__ = [
    "EPHEMERAL",
    "JSON_OBJECT_INSTRUCTION",
    "build_body",
    "convert_messages",
    "image_block",
    "mark_last_block",
    "plain",
    "tool_choice_json",
    "tool_json",
    "tool_use_block",
]
