"""MCP (Model Context Protocol) in both directions, on the official ``mcp`` SDK.

Install the extra: ``pip install 'paigasus-helikon[mcp]'``.

- Client: :class:`McpServerHandle` connects to an MCP server (a stdio child
  process or a streamable-HTTP URL) and offers its tools as helikon tools
  (:class:`McpTool`; lazy mode adds :class:`SearchToolsTool`). A handle is a
  :class:`~helikon.protocols.ToolSource`, so ``LlmAgent(tool_sources=[fs])``
  picks its tools up.
- Server: :class:`McpAgentServer` serves an agent as one MCP tool, over
  stdio or streamable HTTP (or as an ASGI app to mount).

Failures to connect or serve raise :class:`McpError` (its
:class:`McpErrorKind` says which step failed). See ``docs/mcp.md``.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("mcp") is None:  # the SDK, not this package
    raise ImportError("helikon.mcp needs the official MCP SDK: pip install 'paigasus-helikon[mcp]'")

from helikon.mcp._errors import McpError, McpErrorKind
from helikon.mcp._handle import DEFAULT_CONNECT_TIMEOUT, McpServerHandle
from helikon.mcp._server import McpAgentServer, sanitize_tool_name
from helikon.mcp._tools import McpTool, SearchToolsTool
from helikon.protocols import ToolSource

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "McpAgentServer",
    "McpError",
    "McpErrorKind",
    "McpServerHandle",
    "McpTool",
    "SearchToolsTool",
    "ToolSource",
    "sanitize_tool_name",
]
