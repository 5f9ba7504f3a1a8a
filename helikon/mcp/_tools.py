"""Remote MCP tools as helikon tools.

:class:`McpTool` is an ordinary :class:`~helikon.protocols.Tool`: once it is
in an agent's tool map, each call goes through the same per-call pipeline as
a local tool (PreToolUse hooks, the permission pipeline with its deny, guard
and allow rules, mode and policy, the call, PostToolUse hooks, redaction).
Its ``invoke`` sends ``tools/call`` and maps the answer with
:mod:`helikon.mcp._mapping`; an ``isError`` answer, a dropped connection
and a cancelled call are :class:`~helikon.errors.ToolError`\\ s the model sees.

:class:`SearchToolsTool` is lazy mode's ``search_tools`` meta-tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.mcp._connection import Connection
from helikon.mcp._mapping import (
    PLACEHOLDER_SCHEMA,
    SEARCH_PARAMETERS,
    RemoteTool,
    error_message,
    output_value,
    search,
)
from helikon.model import ToolEffect


@final
@attrs.frozen(eq=False)
class McpTool:
    """A tool on an MCP server, called over the server's connection.

    Made by :meth:`helikon.mcp.McpServerHandle.tools`; not built by hand.

    Args:
        remote: the listed tool (names, description, schemas, effect).
        connection: the server's connection.
        lazy: advertise the placeholder schema instead of the real one.
    """

    remote: RemoteTool
    connection: Connection = attrs.field(repr=False)
    lazy: bool = False

    @property
    def name(self) -> str:
        return self.remote.name

    @property
    def remote_name(self) -> str:
        """The tool's name on the server (without the prefix)."""
        return self.remote.remote_name

    @property
    def description(self) -> str:
        return self.remote.description

    @property
    def parameters(self) -> JsonObject:
        return PLACEHOLDER_SCHEMA if self.lazy else self.remote.input_schema

    @property
    def output_schema(self) -> JsonObject | None:
        return None if self.lazy else self.remote.output_schema

    @property
    def effect(self) -> ToolEffect:
        return self.remote.effect

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        result = await self.connection.call_tool(self.remote.remote_name, _plain(args), ctx.cancel)
        if result.is_error:
            raise ToolError(error_message(result))
        return output_value(result)


@final
@attrs.frozen(eq=False)
class SearchToolsTool:
    """Lazy mode's meta-tool: find a server's tools and their full schemas.

    Takes ``{"query": string}`` and answers ``{"tools": [{"name",
    "description", "input_schema"}, ...], "total_matches": N}`` (plus
    ``"truncated": true`` when more than 20 matched); see
    :func:`helikon.mcp._mapping.search`.
    """

    name: str
    tools: tuple[RemoteTool, ...] = attrs.field(repr=False)
    server: str = ""

    @property
    def description(self) -> str:
        where = f" on the MCP server {self.server}" if self.server else " on this MCP server"
        return (
            f"Search the tools{where} by name and description (case-insensitive). Their parameters are not "
            "listed up front: call this first to get a tool's full input schema, then call the tool."
        )

    @property
    def parameters(self) -> JsonObject:
        return SEARCH_PARAMETERS

    @property
    def output_schema(self) -> JsonObject | None:
        return None

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.READ_ONLY

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        query = args.get("query")
        if not isinstance(query, str):
            raise ToolError.invalid_args("'query' must be a string")
        return search(self.tools, query)


def _plain(value: JsonObject) -> dict[str, Any]:
    """A JSON object as plain dicts and lists (what the SDK serialises)."""
    return {key: _plain_value(item) for key, item in value.items()}


def _plain_value(value: JsonValue) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_value(item) for item in value]
    return value


__all__ = ["McpTool", "SearchToolsTool"]
