"""How MCP's tool descriptions and results become helikon's (no IO).

The rules, from the book's "MCP Integration" chapter:

- A remote tool is ``READ_ONLY`` only when the server says ``readOnlyHint:
  true``; everything else is ``SIDE_EFFECT``. Never ``WRITE``: a server's
  annotations are untrusted metadata, so an MCP tool can never unlock the
  ``ACCEPT_EDITS`` auto-approval.
- A result's ``structuredContent`` is passed through as it is. Otherwise a
  single content block becomes one JSON value (a text block its string) and
  several become a JSON array. Blocks that are not text become short
  descriptions (an image is ``"[image: image/png, 1.2 kB]"``): the model
  gets to know they exist without a base64 blob in its context.
- ``isError`` results become a :class:`~helikon.errors.ToolError` carrying
  the server's text (raised by the caller, :mod:`helikon.mcp._tools`).
- Lazy mode's ``search_tools`` matches the query case-insensitively against
  the names and descriptions, answers at most :data:`SEARCH_CAP` tools, and
  says how many matched.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Final

import attrs
from mcp import types

from helikon._json import JsonObject, JsonValue
from helikon.model import ToolEffect

#: The schema every tool advertises in lazy mode: any object.
PLACEHOLDER_SCHEMA: Final[JsonObject] = {"type": "object", "additionalProperties": True}

#: At most this many tools in one ``search_tools`` answer.
SEARCH_CAP: Final = 20

#: The meta-tool's parameters: one query string.
SEARCH_PARAMETERS: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Words to look for in the tools' names and descriptions (case-insensitive).",
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}


@attrs.frozen
class RemoteTool:
    """One tool a server listed, as the agent sees it.

    Args:
        name: the name the agent calls it by (the prefix plus the remote name).
        remote_name: the name on the server.
        description: the server's description (``""`` when it gave none).
        input_schema: the server's input schema.
        output_schema: the server's output schema, if any.
        effect: derived from the annotations (see :func:`tool_effect`).
    """

    name: str
    remote_name: str
    description: str
    input_schema: JsonObject
    output_schema: JsonObject | None
    effect: ToolEffect


def tool_effect(annotations: types.ToolAnnotations | None) -> ToolEffect:
    """``READ_ONLY`` when the server says ``readOnlyHint: true``, else ``SIDE_EFFECT``.

    >>> tool_effect(types.ToolAnnotations(read_only_hint=True)).name
    'READ_ONLY'
    >>> tool_effect(types.ToolAnnotations(destructive_hint=False)).name
    'SIDE_EFFECT'
    >>> tool_effect(None).name
    'SIDE_EFFECT'
    """
    if annotations is not None and annotations.read_only_hint is True:
        return ToolEffect.READ_ONLY
    return ToolEffect.SIDE_EFFECT


def remote_tool(tool: types.Tool, prefix: str) -> RemoteTool:
    """The helikon view of a listed tool.

    >>> listed = types.Tool(name="read_file", description="Read a file.", input_schema={"type": "object"})
    >>> remote_tool(listed, "fs_").name, remote_tool(listed, "fs_").remote_name
    ('fs_read_file', 'read_file')
    """
    return RemoteTool(
        name=prefix + tool.name,
        remote_name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        effect=tool_effect(tool.annotations),
    )


def output_value(result: types.CallToolResult) -> JsonValue:
    """What a successful result gives the model.

    >>> output_value(types.CallToolResult(content=[types.TextContent(type="text", text="3")]))
    '3'
    >>> output_value(types.CallToolResult(
    ...     content=[types.TextContent(type="text", text="{}")], structured_content={"sum": 3}))
    {'sum': 3}
    >>> output_value(types.CallToolResult(content=[
    ...     types.TextContent(type="text", text="Here it is:"),
    ...     types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")]))
    ['Here it is:', '[image: image/png, 5 bytes]']
    >>> output_value(types.CallToolResult(content=[]))
    ''
    """
    if result.structured_content is not None:
        structured: JsonValue = result.structured_content
        return structured
    values = [block_value(block) for block in result.content]
    if not values:
        return ""
    if len(values) == 1:
        return values[0]
    return values


def error_message(result: types.CallToolResult) -> str:
    """The text of an ``isError`` result, for the model.

    >>> error_message(types.CallToolResult(
    ...     content=[types.TextContent(type="text", text="no such file")], is_error=True))
    'no such file'
    >>> error_message(types.CallToolResult(content=[], is_error=True))
    'the MCP tool reported an error (no details)'
    """
    parts = [value if isinstance(value, str) else str(value) for value in map(block_value, result.content)]
    text = "\n".join(part for part in parts if part)
    return text or "the MCP tool reported an error (no details)"


def block_value(block: types.ContentBlock) -> JsonValue:
    """One content block as a JSON value: text as is, anything else described.

    >>> block_value(types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"))
    '[audio: audio/wav, 3 bytes]'
    >>> block_value(types.ResourceLink(type="resource_link", name="notes", uri="file:///notes.txt"))
    '[resource link: notes <file:///notes.txt>]'
    >>> block_value(types.EmbeddedResource(type="resource",
    ...     resource=types.TextResourceContents(uri="file:///a.txt", text="hello")))
    'hello'
    """
    match block:
        case types.TextContent(text=text):
            return text
        case types.ImageContent(data=data, mime_type=mime):
            return f"[image: {mime}, {_size(data)}]"
        case types.AudioContent(data=data, mime_type=mime):
            return f"[audio: {mime}, {_size(data)}]"
        case types.ResourceLink(name=name, uri=uri):
            return f"[resource link: {name} <{uri}>]"
        case types.EmbeddedResource(resource=types.TextResourceContents(text=text)):
            return text
        case types.EmbeddedResource(resource=resource):
            mime = resource.mime_type or "application/octet-stream"
            blob = getattr(resource, "blob", "")
            return f"[resource: {resource.uri}, {mime}, {_size(blob)}]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _size(data: str) -> str:
    """The decoded size of base64 ``data``, for people.

    >>> _size("aGVsbG8="), _size("A" * 4096), _size("not base64!")
    ('5 bytes', '3.1 kB', '11 characters')
    """
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"{len(data)} characters"
    return f"{size} bytes" if size < 1000 else f"{size / 1000:.1f} kB"


def search(tools: Sequence[RemoteTool], query: str, cap: int = SEARCH_CAP) -> JsonObject:
    """``search_tools``' answer: the tools whose name or description contains
    ``query`` (case-insensitively), at most ``cap`` of them, in listing order.

    ``total_matches`` counts every match; ``truncated`` appears (``true``)
    only when more than ``cap`` matched.

    >>> tools = [RemoteTool(f"t{i}", f"t{i}", "Echo" if i % 2 else "sum", {}, None, ToolEffect.READ_ONLY)
    ...          for i in range(5)]
    >>> answer = search(tools, "ECHO")
    >>> [t["name"] for t in answer["tools"]], answer["total_matches"], "truncated" in answer
    (['t1', 't3'], 2, False)
    >>> answer = search(tools, "t", cap=2)
    >>> len(answer["tools"]), answer["total_matches"], answer["truncated"]
    (2, 5, True)
    """
    needle = query.casefold()
    matches = [t for t in tools if needle in t.name.casefold() or needle in t.description.casefold()]
    answer: dict[str, JsonValue] = {
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in matches[:cap]
        ],
        "total_matches": len(matches),
    }
    if len(matches) > cap:
        answer["truncated"] = True
    return answer


__all__ = [
    "PLACEHOLDER_SCHEMA",
    "SEARCH_CAP",
    "SEARCH_PARAMETERS",
    "RemoteTool",
    "block_value",
    "error_message",
    "output_value",
    "remote_tool",
    "search",
    "tool_effect",
]
