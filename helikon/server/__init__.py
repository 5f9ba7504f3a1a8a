"""Serve helikon agents over the network (the ``server`` extra: Starlette,
Hypercorn).

- :class:`AgentServer` is an ASGI app (Starlette) with replayable runs: every
  run drains into an event log that one-shot, streaming and background
  requests, and later readers, all share. Runs execute in-process
  (:class:`InProcessRuns`) or on Temporal (``helikon.server.temporal``), so
  several replicas share durable runs. Serve it with Hypercorn under trio or
  asyncio (:meth:`AgentServer.serve`), or mount :meth:`AgentServer.app` in a
  Starlette/FastAPI app. The pieces that run an agent into a log and stream
  its frames are in :mod:`helikon.server._runs`. See ``docs/server.md``.
- :class:`AgentCoreServer`: an agent behind AWS Bedrock AgentCore's Runtime
  contract, over its HTTP protocol (``GET /ping``, ``POST /invocations``
  with JSON or SSE answers, on port 8080) or its MCP protocol (``/mcp``,
  port 8000). See ``docs/agentcore.md``.

Needs the ``server`` extra: ``pip install 'paigasus-helikon[server]'``.
"""

try:
    import hypercorn  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.server needs Starlette and Hypercorn: pip install 'paigasus-helikon[server]'"
    ) from exc

from helikon.server._agentcore import (
    AgentCoreContext,
    AgentCoreError,
    AgentCoreServer,
    AgentCoreSessions,
    MemorySessions,
)
from helikon.server._agentcore_protocol import SESSION_HEADER as AGENTCORE_SESSION_HEADER
from helikon.server._agentcore_protocol import PingState, PingStatus
from helikon.server._backend import (
    ApprovalRefused,
    Decision,
    RunBackend,
    RunHandle,
    RunNotFound,
    ServerBusy,
    StartRun,
)
from helikon.server._local import Admission, InProcessRuns, LocalRun
from helikon.server._providers import (
    Authenticator,
    AuthRejection,
    BearerAuth,
    ContextProvider,
    InMemorySessions,
    SessionProvider,
    sessions_from,
)
from helikon.server._retention import Retention, expired
from helikon.server._runs import (
    Frame,
    RunLog,
    RunStatus,
    drive,
    event_frame,
    frames_of,
    sse_message,
    terminal_frame,
)
from helikon.server._server import BACKLOG, MAX_BODY_BYTES, AgentServer, ServeError, serve_app

__all__ = [
    "AGENTCORE_SESSION_HEADER",
    "BACKLOG",
    "MAX_BODY_BYTES",
    "Admission",
    "AgentCoreContext",
    "AgentCoreError",
    "AgentCoreServer",
    "AgentCoreSessions",
    "AgentServer",
    "ApprovalRefused",
    "AuthRejection",
    "Authenticator",
    "BearerAuth",
    "ContextProvider",
    "Decision",
    "Frame",
    "InMemorySessions",
    "InProcessRuns",
    "LocalRun",
    "MemorySessions",
    "Retention",
    "RunBackend",
    "RunHandle",
    "RunLog",
    "RunNotFound",
    "RunStatus",
    "PingState",
    "PingStatus",
    "ServeError",
    "ServerBusy",
    "SessionProvider",
    "StartRun",
    "drive",
    "event_frame",
    "expired",
    "frames_of",
    "serve_app",
    "sessions_from",
    "sse_message",
    "terminal_frame",
]
