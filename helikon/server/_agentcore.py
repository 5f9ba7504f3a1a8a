"""``AgentCoreServer``: an agent behind AWS Bedrock AgentCore's Runtime contract.

A hosting shim, like the book's ``runtime-agentcore`` crate: the same
helikon agent, served the way AgentCore's managed Runtime calls a
container. Two protocols, one per deployment:

- **HTTP** (:meth:`AgentCoreServer.app`, :meth:`~AgentCoreServer.serve` on
  ``0.0.0.0:8080``): ``GET /ping`` and ``POST /invocations`` (JSON or SSE),
  with the session header mapped to a helikon session by a session
  provider. See :mod:`helikon.server._agentcore_protocol` for the wire
  format and :mod:`helikon.server._agentcore_run` for how a run meets a
  client that goes away.
- **MCP** (:meth:`~AgentCoreServer.mcp_app`,
  :meth:`~AgentCoreServer.serve_mcp` on ``0.0.0.0:8000``): the agent as one
  MCP tool at ``/mcp`` over stateless streamable HTTP, through
  :class:`helikon.mcp.McpAgentServer` (plus ``GET /ping``). Each call gets a
  fresh run context from ``mcp_context``: no session is shared.

Both serve with Hypercorn, under trio or asyncio (whichever runs
:meth:`~AgentCoreServer.serve`). Invocations of one session id run one at a
time (the next waits for the previous one's turn to be written), so a retry
after a disconnect always sees the interrupted turn.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final

import anyio
import anyio.abc
import attrs
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from helikon.config import RunConfig
from helikon.context import RunContext
from helikon.errors import ConfigError, HelikonError
from helikon.protocols import Session
from helikon.server._agentcore_protocol import (
    DEFAULT_MAX_BODY,
    SESSION_HEADER,
    BadInvocation,
    PingState,
    check_session_id,
    error_body,
    foreign_request,
    is_loopback,
    parse_invocation,
    wants_json,
)
from helikon.server._agentcore_run import WIND_DOWN_S, InvocationRun
from helikon.server._providers import ContextProvider, SessionProvider, default_context
from helikon.server._server import BACKLOG, serve_listening
from helikon.sessions import MemorySession, SessionError, SessionErrorKind

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

Ctx = TypeVar("Ctx")

#: ``(session_id or None) -> Session | None`` (may be async): the same shape
#: as :data:`AgentServer`'s session providers.
AgentCoreSessions = SessionProvider
#: ``(request, session) -> RunContext`` (may be async), as for AgentServer.
AgentCoreContext = ContextProvider

#: The contract's ports.
HTTP_PORT: Final = 8080
MCP_PORT: Final = 8000


class AgentCoreError(HelikonError):
    """The AgentCore server could not start or stopped abnormally."""


@final
class MemorySessions:
    """The default session provider: one :class:`~helikon.sessions.MemorySession`
    per session id, for the process's life (AgentCore pins a session to one
    container). No id, no session: the run keeps nothing."""

    def __init__(self) -> None:
        self.sessions: dict[str, MemorySession] = {}

    def __call__(self, session_id: str | None) -> Session | None:
        if session_id is None:
            return None
        return self.sessions.setdefault(session_id, MemorySession())


def _no_user_context() -> None:
    return None


@final
@attrs.frozen
class AgentCoreServer(Generic[Ctx]):
    """An agent served under AgentCore's Runtime contract (HTTP or MCP).

    Args:
        agent: any helikon agent (``LlmAgent``, a workflow agent, ...).
        sessions: maps the session header's id (``None`` when absent) to a
            :class:`~helikon.Session` (or ``None``: no persistence); sync or
            async. Default: :class:`MemorySessions`. Use a durable backend
            in production: AgentCore stops containers without warning.
        context: builds each invocation's :class:`~helikon.RunContext` from
            the request and its session (sync or async); default: core
            defaults with the session. Its token is followed, not shared.
        config: the run config of every invocation (default: the agent's).
        mcp_context: MCP mode's context factory (see
            :class:`helikon.mcp.McpAgentServer`).
        max_body_bytes: the largest invocation body accepted (413 above);
            by default the service's own limit, 100 MB.
        ping: the health state ``/ping`` reports: ``Healthy``, during
            invocations too; ``HealthyBusy`` while background work of your
            own is registered with ``with server.ping.busy(): ...``.
    """

    agent: Any
    sessions: AgentCoreSessions = attrs.field(factory=MemorySessions)
    context: AgentCoreContext = default_context
    config: RunConfig | None = None
    mcp_context: Callable[[], Any] = _no_user_context
    max_body_bytes: int = DEFAULT_MAX_BODY
    ping: PingState = attrs.field(factory=PingState)
    _locks: _SessionLocks = attrs.field(factory=lambda: _SessionLocks(), init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not callable(getattr(self.agent, "run", None)):
            raise ConfigError(f"AgentCoreServer needs an agent with a run() method, not {self.agent!r}")
        for name in ("sessions", "context", "mcp_context"):
            if not callable(getattr(self, name)):
                raise ConfigError(f"AgentCoreServer: {name} must be callable")
        if self.max_body_bytes < 1:
            raise ConfigError("AgentCoreServer: max_body_bytes must be positive")

    def with_sessions(self, sessions: AgentCoreSessions) -> AgentCoreServer[Ctx]:
        return attrs.evolve(self, sessions=sessions)

    def with_context(self, context: AgentCoreContext) -> AgentCoreServer[Ctx]:
        return attrs.evolve(self, context=context)

    def with_run_config(self, config: RunConfig | None) -> AgentCoreServer[Ctx]:
        return attrs.evolve(self, config=config)

    def with_max_body_bytes(self, limit: int) -> AgentCoreServer[Ctx]:
        """Accept invocation bodies up to ``limit`` bytes (413 above)."""
        return attrs.evolve(self, max_body_bytes=limit)

    # -- the HTTP protocol -------------------------------------------------------

    def app(self, *, local_only: bool = False) -> Starlette:
        """The HTTP protocol as an ASGI app: ``GET /ping``, ``POST /invocations``.

        With ``local_only`` it refuses (403) requests whose ``Host`` or
        ``Origin`` is not this machine: a web page cannot reach a
        developer's server by DNS rebinding or a cross-site ``POST``.
        """
        app = Starlette(
            routes=[
                Route("/ping", self._ping, methods=["GET"]),
                Route("/invocations", _Invocations(self), methods=["POST"]),
            ]
        )
        if local_only:
            app.add_middleware(_LocalOnly)
        return app

    async def _ping(self, request: Request) -> Response:
        return JSONResponse(self.ping.body())

    async def _invoke(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ``POST /invocations`` (the ASGI endpoint)."""
        try:
            request = Request(scope, receive)
            session_id = check_session_id(request.headers.get(SESSION_HEADER))
            invocation = parse_invocation(await _read_body(request, self.max_body_bytes))
            json_mode = wants_json(request.headers.get("accept"), invocation.stream)
            async with self._locks.hold(session_id, receive):
                session = await _provide_session(self.sessions, session_id)
                ctx = await _provide_context(self.context, request, session)
                if session_id is not None and ctx.tracer.session_id is None:
                    # Spans carry the conversation (session.id, gen_ai.conversation.id).
                    ctx = ctx.with_tracer(ctx.tracer.with_session_id(session_id))
                token = ctx.cancel.child()
                try:
                    run = InvocationRun(self.agent, ctx.with_cancel(token), invocation.input, self.config)
                    await run.answer(json_mode, receive, send)
                finally:
                    token.detach()
        except BadInvocation as bad:
            await _refuse(bad, scope, receive, send)
        except _Abandoned:
            return  # nobody to answer

    # -- the MCP protocol --------------------------------------------------------

    def mcp_app(self, *, local_only: bool = False) -> Starlette:
        """The MCP protocol as an ASGI app: the agent as one tool at ``/mcp``
        (stateless streamable HTTP, any ``Host``: AgentCore's platform sets
        its own ``Mcp-Session-Id`` and host names), plus ``GET /ping``.

        Needs the ``mcp`` extra. Run its lifespan (any ASGI server does).
        ``local_only`` is :meth:`app`'s.
        """
        from mcp.server.transport_security import TransportSecuritySettings

        from helikon.mcp import McpAgentServer

        served: McpAgentServer[Any] = McpAgentServer(self.agent, context=self.mcp_context, config=self.config)
        app = served.mcp_server().streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            host="0.0.0.0",
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            custom_starlette_routes=[Route("/ping", self._ping, methods=["GET"])],
        )
        if local_only:
            app.add_middleware(_LocalOnly)
        return app

    # -- serving -----------------------------------------------------------------

    async def serve(
        self,
        host: str = "0.0.0.0",
        port: int = HTTP_PORT,
        *,
        local_only: bool | None = None,
        task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the HTTP protocol with Hypercorn until cancelled.

        Runs under trio or asyncio. ``port=0`` picks a free port; with
        ``url = await task_group.start(server.serve, "127.0.0.1", 0)`` you
        learn the base URL once it listens. ``local_only`` (see :meth:`app`)
        is on by default when ``host`` is a loopback address.

        Raises:
            AgentCoreError: the address cannot be bound, or serving failed.
        """
        local = is_loopback(host) if local_only is None else local_only
        await _serve(self.app(local_only=local), host, port, task_status)

    async def serve_mcp(
        self,
        host: str = "0.0.0.0",
        port: int = MCP_PORT,
        *,
        local_only: bool | None = None,
        task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the MCP protocol with Hypercorn until cancelled (see :meth:`serve`)."""
        local = is_loopback(host) if local_only is None else local_only
        await _serve(self.mcp_app(local_only=local), host, port, task_status)


@final
class _Invocations:
    """The ``/invocations`` endpoint as a plain ASGI app (so a disconnect is seen)."""

    def __init__(self, server: AgentCoreServer[Any]) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.server._invoke(scope, receive, send)


class _Abandoned(Exception):
    """The client went away while its invocation waited for its session."""


@final
class _SessionLocks:
    """One lock per session id in use; forgotten when nobody holds or waits.

    A client that goes away while its invocation waits for the lock is
    dropped before its run starts, so its session gets no turn it never saw.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, session_id: str | None, receive: Receive) -> AsyncIterator[None]:
        if session_id is None:
            yield
            return
        lock, users = self._locks.get(session_id) or (anyio.Lock(), 0)
        self._locks[session_id] = (lock, users + 1)
        try:
            if not await _acquire(lock, receive):
                raise _Abandoned
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)


async def _acquire(lock: anyio.Lock, receive: Receive) -> bool:
    """Take ``lock``; ``False`` when the client disconnects first (the body is read)."""
    if not lock.locked():
        await lock.acquire()
        return True
    acquired = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await receive()).get("type") != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await lock.acquire()
        acquired = True
        group.cancel_scope.cancel()
    return acquired


@final
class _LocalOnly:
    """ASGI middleware: refuse requests whose ``Host``/``Origin`` is not this machine."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            connection = HTTPConnection(scope)
            problem = foreign_request(connection.headers.get("host"), connection.headers.get("origin"))
            if problem is not None:
                await _refuse(BadInvocation(403, "forbidden", problem), scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise BadInvocation(413, "too_large", f"the request body is limited to {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadInvocation(413, "too_large", f"the request body is limited to {limit} bytes")
    return bytes(body)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def _provide_session(sessions: AgentCoreSessions, session_id: str | None) -> Session | None:
    try:
        session = await _call(sessions, session_id)
    except SessionError as exc:
        status = 503 if exc.kind is SessionErrorKind.UNAVAILABLE else 500
        raise BadInvocation(status, "session_unavailable", f"the session could not be opened: {exc}") from exc
    except Exception as exc:
        raise BadInvocation(
            500, "session_unavailable", f"the session provider failed: {type(exc).__name__}: {exc}"
        ) from exc
    if session is not None and not isinstance(session, Session):
        raise BadInvocation(500, "session_unavailable", f"the session provider returned {session!r}")
    return session


async def _provide_context(
    context: AgentCoreContext, request: Request, session: Session | None
) -> RunContext[Any]:
    try:
        ctx = await _call(context, request, session)
    except Exception as exc:
        raise BadInvocation(
            500, "context_failed", f"the context provider failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(ctx, RunContext):
        raise BadInvocation(500, "context_failed", f"the context provider returned {ctx!r}, not a RunContext")
    return ctx


async def _refuse(bad: BadInvocation, scope: Scope, receive: Receive, send: Send) -> None:
    body = error_body(bad.code, bad.message)
    response = Response(body, status_code=bad.status, media_type="application/json")
    await response(scope, receive, send)


async def _serve(app: Any, host: str, port: int, task_status: anyio.abc.TaskStatus[str]) -> None:
    """Serve ``app`` with Hypercorn on a socket bound here (so ``port=0`` works)."""
    config = Config()
    config.accesslog = None
    config.backlog = BACKLOG
    config.graceful_timeout = WIND_DOWN_S + 1
    await serve_listening(app, host, port, config, task_status=task_status, error=AgentCoreError)


__all__ = [
    "HTTP_PORT",
    "MCP_PORT",
    "AgentCoreContext",
    "AgentCoreError",
    "AgentCoreServer",
    "AgentCoreSessions",
    "MemorySessions",
]
