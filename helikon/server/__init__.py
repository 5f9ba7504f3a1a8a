"""Serving agents over the network (the ``server`` extra: Starlette, Hypercorn).

- :class:`AgentCoreServer`: an agent behind AWS Bedrock AgentCore's Runtime
  contract, over its HTTP protocol (``GET /ping``, ``POST /invocations``
  with JSON or SSE answers, on port 8080) or its MCP protocol (``/mcp``,
  port 8000). :class:`PingState` is the health it reports; the session
  header (:data:`AGENTCORE_SESSION_HEADER`) maps to a helikon session
  through a session provider (:class:`MemorySessions` by default).

See ``docs/agentcore.md``.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("starlette") is None or importlib.util.find_spec("hypercorn") is None:
    raise ImportError("helikon.server needs Starlette and Hypercorn: pip install 'paigasus-helikon[server]'")

from helikon.server._agentcore import (
    AgentCoreContext,
    AgentCoreError,
    AgentCoreServer,
    AgentCoreSessions,
    MemorySessions,
)
from helikon.server._agentcore_protocol import SESSION_HEADER as AGENTCORE_SESSION_HEADER
from helikon.server._agentcore_protocol import PingState, PingStatus

__all__ = [
    "AGENTCORE_SESSION_HEADER",
    "AgentCoreContext",
    "AgentCoreError",
    "AgentCoreServer",
    "AgentCoreSessions",
    "MemorySessions",
    "PingState",
    "PingStatus",
]
