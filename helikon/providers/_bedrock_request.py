"""Translate a :class:`~helikon.model.ModelRequest` into a Converse request body.

Pure: items, tools and settings in, a JSON-ready ``dict`` out. The rules:

- System messages become the top-level ``system`` list (text blocks, in order).
- User messages become ``user`` turns (text and image blocks); an image is
  sent as bytes (``{"image": {"format", "source": {"bytes": base64}}}``), from
  inline data or a ``data:`` URL, or by ``s3Location`` for an ``s3://`` URL.
  Other URLs cannot be sent (Bedrock does not fetch them).
- An assistant message and the tool calls that follow it form one
  ``assistant`` turn (reasoning blocks first, then text, then ``toolUse``).
  Reasoning is sent back to Anthropic models only; the other families
  reject it.
- Tool results become ``toolResult`` blocks of one ``user`` turn; a failed
  result is marked ``"status": "error"`` for the families that accept the
  field (Anthropic, Amazon Nova).
- Consecutive turns of the same role are merged: Converse wants them to
  alternate.
- Tool specs go through :func:`rewrite_tool_schema`. When the conversation
  already holds tool blocks but the request offers no tools (the final,
  structured-output turn of the agent loop), the called tools are declared
  again with a permissive schema, since Converse rejects tool blocks without
  a ``toolConfig``.
- A :class:`~helikon.model.JsonSchema` response format becomes a forced call
  of the reserved tool :data:`OUTPUT_TOOL` for the families that support
  forced tool choice (Anthropic, Amazon Nova, Mistral); the other families
  get plain text.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final, assert_never

import attrs
import msgspec

from helikon._json import JsonObject
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
from helikon.model import (
    JsonSchema,
    ModelRequest,
    ToolChoiceAuto,
    ToolChoiceNamed,
    ToolChoiceNone,
    ToolChoiceRequired,
)
from helikon.providers._bedrock_schema import rewrite_tool_schema
from helikon.providers._incremental import Converted, MessageCache

#: The reserved tool that carries structured output (never offered to users' tools).
OUTPUT_TOOL: Final = "helikon_structured_output"
#: The property that wraps a non-object output schema (tool inputs must be objects).
WRAPPED_KEY: Final = "value"
#: Prefix marking a :class:`~helikon.items.ReasoningPart` signature that holds
#: redacted (encrypted) reasoning rather than a signature.
REDACTED_PREFIX: Final = "bedrock-redacted:"

#: Cross-region inference profile prefixes, stripped before family detection.
_REGION_PREFIXES: Final = ("us-gov.", "us.", "eu.", "apac.", "ap.", "ca.", "jp.", "au.", "global.")
_IMAGE_FORMATS: Final[Mapping[str, str]] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}


class ModelFamily(enum.Enum):
    """The model family behind a Bedrock model id."""

    #: Anthropic Claude.
    ANTHROPIC = "anthropic"
    #: Amazon Nova.
    AMAZON_NOVA = "amazon_nova"
    #: Amazon Titan text models.
    AMAZON_TITAN = "amazon_titan"
    #: Meta Llama.
    META_LLAMA = "meta_llama"
    #: Mistral AI.
    MISTRAL = "mistral"
    #: Cohere Command.
    COHERE = "cohere"
    #: OpenAI open-weight models (gpt-oss).
    OPENAI = "openai"
    #: Anything else (DeepSeek, AI21, Qwen, ... or an opaque profile ARN).
    UNKNOWN = "unknown"

    @property
    def forced_tool_choice(self) -> bool:
        """Whether the family accepts ``toolChoice`` ``any``/``tool`` (and so
        structured output by forced-tool synthesis)."""
        return self in (ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA, ModelFamily.MISTRAL)

    @property
    def tool_result_status(self) -> bool:
        """Whether ``toolResult.status`` is accepted."""
        return self in (ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA)


def base_model_id(model_id: str) -> str:
    """The model id without an ARN prefix or a cross-region prefix.

    >>> base_model_id("us.anthropic.claude-3-7-sonnet-20250219-v1:0")
    'anthropic.claude-3-7-sonnet-20250219-v1:0'
    >>> base_model_id("arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-pro-v1:0")
    'amazon.nova-pro-v1:0'
    """
    name = model_id.strip()
    if name.startswith("arn:"):
        name = name.rsplit("/", 1)[-1]
    lowered = name.lower()
    for prefix in _REGION_PREFIXES:
        if lowered.startswith(prefix):
            return name[len(prefix) :]
    return name


def detect_family(model_id: str) -> ModelFamily:
    """The family of a Bedrock model id (cross-region prefixes ignored).

    >>> detect_family("us.anthropic.claude-3-7-sonnet-20250219-v1:0")
    <ModelFamily.ANTHROPIC: 'anthropic'>
    >>> detect_family("global.amazon.nova-2-lite-v1:0").name, detect_family("openai.gpt-oss-120b-1:0").name
    ('AMAZON_NOVA', 'OPENAI')
    >>> detect_family("deepseek.r1-v1:0").name
    'UNKNOWN'
    """
    name = base_model_id(model_id).lower()
    if name.startswith("anthropic."):
        return ModelFamily.ANTHROPIC
    if name.startswith("amazon.nova"):
        return ModelFamily.AMAZON_NOVA
    if name.startswith("amazon.titan"):
        return ModelFamily.AMAZON_TITAN
    if name.startswith("meta.llama"):
        return ModelFamily.META_LLAMA
    if name.startswith("mistral."):
        return ModelFamily.MISTRAL
    if name.startswith("cohere."):
        return ModelFamily.COHERE
    if name.startswith("openai."):
        return ModelFamily.OPENAI
    return ModelFamily.UNKNOWN


class RequestError(ValueError):
    """The request cannot be expressed in Converse (e.g. an image URL)."""


@attrs.frozen
class OutputPlan:
    """How structured output travels: through the reserved tool, and whether
    the schema was wrapped in ``{"value": ...}``."""

    tool: bool = False
    wrapped: bool = False


@attrs.frozen
class ConverseRequest:
    """A translated request: the JSON body and the structured-output plan."""

    body: dict[str, Any]
    output: OutputPlan = OutputPlan()


@attrs.frozen
class Options:
    """Adapter settings that shape the body (see :meth:`BedrockModel.converse`)."""

    additional_model_request_fields: JsonObject | None = None
    stop_sequences: tuple[str, ...] = ()
    prompt_caching: bool = False
    extra_body: JsonObject | None = None


def build_request(
    request: ModelRequest,
    family: ModelFamily,
    options: Options | None = None,
    cache: MessageCache | None = None,
) -> ConverseRequest:
    """The Converse body for ``request``; with a ``cache``, the conversation's
    final messages come as encoded parts (:mod:`helikon.providers._incremental`:
    the body then encodes to the same bytes).

    >>> from helikon.items import user_text, system_text
    >>> build_request(ModelRequest((system_text("Be brief."), user_text("Hi"))), ModelFamily.AMAZON_NOVA).body
    {'messages': [{'role': 'user', 'content': [{'text': 'Hi'}]}], 'system': [{'text': 'Be brief.'}]}

    Raises:
        RequestError: an item cannot be sent to Bedrock.
    """
    options = options or Options()
    instructions = request.instructions
    system: list[dict[str, Any]] = [{"text": instructions}] if instructions else []
    history_tools: list[str] = []
    for item in request.messages:
        if type(item) is SystemMessage:
            system.extend({"text": p.text} for p in item.content if isinstance(p, TextPart) and p.text)
        elif type(item) is ToolCall:
            history_tools.append(item.name)
    messages: list[Any]
    if cache is None:
        messages = [m for _, m in wire_messages(request.messages, family) if m is not None]
    else:
        messages = cache.messages(request.messages, lambda items: wire_messages(items, family))
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    inference = _inference_config(request, options)
    if inference:
        body["inferenceConfig"] = inference
    tool_config, plan = _tool_config(request, family, history_tools, options)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    if options.prompt_caching and family in (ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA):
        if system:
            system.append({"cachePoint": {"type": "default"}})
        if tool_config is not None:
            tool_config["tools"].append({"cachePoint": {"type": "default"}})
    if options.additional_model_request_fields:
        body["additionalModelRequestFields"] = dict(options.additional_model_request_fields)
    if options.extra_body:
        body.update(options.extra_body)
    return ConverseRequest(body, plan)


def wire_messages(items: Sequence[Item], family: ModelFamily) -> Converted:
    """The ``messages`` of ``items``, each with the index of the item that
    opened it (consecutive items of one role share a message). A message
    left with no content is None: it is not sent, yet it took the items of
    its role (two user turns around an empty assistant one stay apart).

    >>> from helikon.items import user_text
    >>> wire = wire_messages((user_text("a"), AssistantMessage(()), user_text("b")), ModelFamily.ANTHROPIC)
    >>> [(start, message and message["role"]) for start, message in wire]
    [(0, 'user'), (1, None), (2, 'user')]
    """
    messages: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(items):
        match item:
            case SystemMessage():
                continue
            case UserMessage(content=content):
                role, blocks = "user", [b for p in content if (b := _user_block(p)) is not None]
            case AssistantMessage(content=content):
                role, blocks = "assistant", _assistant_blocks(content, family)
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                block: dict[str, Any] = {
                    "toolUse": {"toolUseId": call_id, "name": name, "input": _arguments(arguments)}
                }
                role, blocks = "assistant", [block]
            case ToolResult(call_id=call_id, content=text, is_error=is_error):
                result: dict[str, Any] = {"toolUseId": call_id, "content": [{"text": text or "(no output)"}]}
                if is_error and family.tool_result_status:
                    result["status"] = "error"
                role, blocks = "user", [{"toolResult": result}]
            case _ as unreachable:
                assert_never(unreachable)
        if messages and messages[-1][1]["role"] == role:
            messages[-1][1]["content"].extend(blocks)
        else:
            messages.append((index, {"role": role, "content": list(blocks)}))
    return [(start, message if message["content"] else None) for start, message in messages]


def _user_block(part: object) -> dict[str, Any] | None:
    match part:
        case TextPart(text=text):
            return {"text": text} if text else None
        case ImagePart():
            return {"image": _image(part)}
        case _:
            return None  # reasoning in a user message has no Converse form


def _image(part: ImagePart) -> dict[str, Any]:
    media_type = (part.media_type or "").lower()
    data = part.data
    if data is None and part.url is not None:
        if part.url.startswith("s3://"):
            fmt = _IMAGE_FORMATS.get(media_type) or _format_from_name(part.url)
            return {"format": fmt, "source": {"s3Location": {"uri": part.url}}}
        if not part.url.startswith("data:"):
            raise RequestError(
                "Bedrock cannot fetch image URLs; pass the image bytes (ImagePart(data=..., media_type=...)) "
                "or an s3:// URL"
            )
        header, _, encoded = part.url.partition(",")
        if not header.endswith(";base64"):
            raise RequestError("only base64 data: URLs are supported for images")
        media_type = media_type or header[5:].split(";", 1)[0].lower()
        data = encoded
    if data is None:
        raise RequestError("an ImagePart needs data or a URL")
    found = _IMAGE_FORMATS.get(media_type)
    if found is None:
        raise RequestError(
            f"unsupported image media type {media_type or '(none)'!r}; use PNG, JPEG, GIF or WebP"
        )
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError("the image data is not valid base64") from None
    return {"format": found, "source": {"bytes": data}}


def _format_from_name(url: str) -> str:
    suffix = url.rsplit(".", 1)[-1].lower()
    fmt = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "gif": "gif", "webp": "webp"}.get(suffix)
    if fmt is None:
        raise RequestError(f"cannot tell the image format of {url!r}; set ImagePart.media_type")
    return fmt


def _assistant_blocks(content: tuple[object, ...], family: ModelFamily) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in content:
        match part:
            case ReasoningPart(text=text, signature=signature):
                if family is not ModelFamily.ANTHROPIC:
                    continue  # other families reject reasoning blocks in the history
                if signature is not None and signature.startswith(REDACTED_PREFIX):
                    blocks.append(
                        {"reasoningContent": {"redactedContent": signature[len(REDACTED_PREFIX) :]}}
                    )
                elif text:
                    reasoning: dict[str, Any] = {"text": text}
                    if signature:
                        reasoning["signature"] = signature
                    blocks.append({"reasoningContent": {"reasoningText": reasoning}})
            case TextPart(text=text):
                if text:
                    blocks.append({"text": text})
            case ImagePart():
                blocks.append({"image": _image(part)})
    return blocks


def _arguments(arguments: str) -> Any:
    """A tool call's arguments as the JSON object ``toolUse.input`` needs."""
    if not arguments.strip():
        return {}
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return {"_raw_arguments": arguments}  # keep what the model said, as an object
    return value if isinstance(value, dict) else {WRAPPED_KEY: value}


def _inference_config(request: ModelRequest, options: Options) -> dict[str, Any]:
    settings = request.settings
    config: dict[str, Any] = {}
    if settings.max_output_tokens is not None:
        config["maxTokens"] = settings.max_output_tokens
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if settings.top_p is not None:
        config["topP"] = settings.top_p
    if options.stop_sequences:
        config["stopSequences"] = list(options.stop_sequences)
    return config


def _tool_spec(name: str, description: str, schema: JsonObject) -> dict[str, Any]:
    rewritten = rewrite_tool_schema(schema)
    if "type" not in rewritten:
        rewritten = {"type": "object", **rewritten}
    spec: dict[str, Any] = {"name": name, "inputSchema": {"json": rewritten}}
    if description:
        spec["description"] = description
    return {"toolSpec": spec}


def _thinking_enabled(options: Options) -> bool:
    fields = options.additional_model_request_fields or {}
    thinking = fields.get("thinking")
    reasoning = fields.get("reasoning_config")
    for config in (thinking, reasoning):
        if isinstance(config, Mapping) and config.get("type") in ("enabled", "adaptive"):
            return True
    return False


def _tool_config(
    request: ModelRequest, family: ModelFamily, history_tools: list[str], options: Options
) -> tuple[dict[str, Any] | None, OutputPlan]:
    settings = request.settings
    choice = settings.tool_choice
    tools = [] if isinstance(choice, ToolChoiceNone) else list(request.tools)
    specs = [_tool_spec(t.name, t.description, t.parameters) for t in tools]
    plan = OutputPlan()
    tool_choice: dict[str, Any] | None = None
    forced_ok = family.forced_tool_choice and not _thinking_enabled(options)
    fmt = settings.response_format
    if isinstance(fmt, JsonSchema) and family.forced_tool_choice:
        schema: JsonObject = fmt.schema
        wrapped = schema.get("type") != "object" and "properties" not in schema
        if wrapped:
            schema = {"type": "object", "properties": {WRAPPED_KEY: dict(schema)}, "required": [WRAPPED_KEY]}
        description = f"Give the final answer ({fmt.name}) by calling this tool with it as the input."
        specs.append(_tool_spec(OUTPUT_TOOL, description, schema))
        plan = OutputPlan(tool=True, wrapped=wrapped)
        # Extended thinking forbids forced tool use: offer the tool and let the model pick it.
        tool_choice = {"tool": {"name": OUTPUT_TOOL}} if forced_ok else {"auto": {}}
    elif tools:
        match choice:
            case ToolChoiceRequired():
                tool_choice = {"any": {}} if forced_ok else None
            case ToolChoiceNamed(name=name):
                tool_choice = {"tool": {"name": name}} if forced_ok else None
            case ToolChoiceAuto():
                tool_choice = {"auto": {}}
            case _:
                tool_choice = None
    declared = {t.name for t in tools}
    if not specs and history_tools:
        # Converse rejects toolUse/toolResult blocks when no toolConfig is sent.
        for name in dict.fromkeys(history_tools):
            if name not in declared:
                specs.append(_tool_spec(name, "", {"type": "object", "properties": {}}))
    if not specs:
        return None, plan
    config: dict[str, Any] = {"tools": specs}
    if tool_choice is not None:
        config["toolChoice"] = tool_choice
    return config, plan


def dumps(body: Mapping[str, Any]) -> bytes:
    """The body as compact JSON bytes."""
    return msgspec.json.encode(body)


__all__ = [
    "OUTPUT_TOOL",
    "REDACTED_PREFIX",
    "WRAPPED_KEY",
    "ConverseRequest",
    "ModelFamily",
    "Options",
    "OutputPlan",
    "RequestError",
    "base_model_id",
    "build_request",
    "detect_family",
    "dumps",
]
