"""``AgentServer``: helikon agents over HTTP, Server-Sent Events and WebSocket.

A frozen description of the server (agents, providers, auth, limits, the run
backend) whose :meth:`AgentServer.app` is a Starlette ASGI app and whose
:meth:`AgentServer.serve` runs it on Hypercorn, under trio or asyncio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import sniffio
from hypercorn.asyncio import serve as serve_asyncio
from hypercorn.config import Config
from hypercorn.trio import serve as serve_trio
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp

from helikon.errors import ConfigError
from helikon.server._backend import RunBackend
from helikon.server._http import Handlers, guard
from helikon.server._local import InProcessRuns
from helikon.server._providers import (
    Authenticator,
    ContextProvider,
    InMemorySessions,
    SessionProvider,
    constant_context,
    default_context,
)
from helikon.server._retention import Retention

#: The default request body limit: 1 MiB.
MAX_BODY_BYTES = 1 << 20


def _agent_map(agents: Iterable[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for agent in agents:
        name = getattr(agent, "name", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{agent!r} is not an agent with a name")
        if name in found:
            raise ConfigError(f"two agents are named {name!r}")
        found[name] = agent
    return found


def _context_provider(context: Any) -> ContextProvider:
    if context is None:
        return default_context
    if callable(context):
        provider: ContextProvider = context
        return provider
    if hasattr(context, "with_session"):
        return constant_context(context)
    raise ConfigError(f"context must be a RunContext or a function of the request, not {context!r}")


@attrs.frozen
class AgentServer:
    """Serve agents over HTTP, SSE and WebSocket with replayable runs.

    Args:
        agents: the agents, each served under its ``name``.
        context: a :class:`~helikon.RunContext` for every run, or a function
            ``(request, session) -> RunContext`` (sync or async); core
            defaults when omitted.
        sessions: maps ``X-Session-Id`` to a session (in memory by default);
            see :func:`~helikon.server.sessions_from` for SQLite, PostgreSQL
            and Redis sessions.
        auth: :class:`~helikon.server.BearerAuth` or a function
            ``(request) -> identity or None``; ``None`` admits everyone.
        retention: how long finished runs are kept (by the default in-process
            backend; a backend you give keeps its own).
        backend: where runs execute (:class:`InProcessRuns` by default;
            :class:`helikon.server.temporal.TemporalRuns` to scale out).
        max_body_bytes: the largest request body accepted (413 beyond).
        title: the API title in ``/openapi.json`` and on the page.
    """

    agents: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    context: Any = None
    sessions: SessionProvider = attrs.field(factory=InMemorySessions)
    auth: Authenticator | None = None
    retention: Retention = attrs.field(factory=Retention)
    backend: RunBackend | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    title: str = "helikon agent server"
    _runs: RunBackend = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        _agent_map(self.agents)
        _context_provider(self.context)
        if self.max_body_bytes < 1:
            raise ConfigError("max_body_bytes must be positive")
        runs = self.backend if self.backend is not None else InProcessRuns(self.retention)
        object.__setattr__(self, "_runs", runs)

    @classmethod
    def builder(cls) -> AgentServer:
        """An empty server to configure with the ``with_*`` methods."""
        return cls()

    def with_agent(self, *agents: Any) -> AgentServer:
        return attrs.evolve(self, agents=(*self.agents, *agents))

    def with_context(self, context: Any) -> AgentServer:
        return attrs.evolve(self, context=context)

    def with_default_context(self) -> AgentServer:
        return attrs.evolve(self, context=None)

    def with_sessions(self, sessions: SessionProvider) -> AgentServer:
        return attrs.evolve(self, sessions=sessions)

    def with_auth(self, auth: Authenticator | None) -> AgentServer:
        return attrs.evolve(self, auth=auth)

    def with_retention(
        self, *, max_age: float = 3600.0, max_runs: int = 1000, sweep_every: float = 30.0
    ) -> AgentServer:
        """Keep finished runs ``max_age`` seconds, at most ``max_runs`` of them
        (with the default in-process backend)."""
        retention = Retention(max_age, max_runs, sweep_every)
        return attrs.evolve(self, retention=retention)

    def with_backend(self, backend: RunBackend) -> AgentServer:
        return attrs.evolve(self, backend=backend)

    def with_max_body_bytes(self, limit: int) -> AgentServer:
        return attrs.evolve(self, max_body_bytes=limit)

    @property
    def runs(self) -> RunBackend:
        """The run backend (the in-process one unless another was given)."""
        return self._runs

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """The app's lifespan: the backend's work (runs, the retention sweeper).
        Pass it as ``lifespan=`` to the app this server's app is mounted in."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._runs.serve)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    def app(self) -> Starlette:
        """The ASGI app (a Starlette app, mountable under a prefix)."""
        handlers = Handlers(
            agents=_agent_map(self.agents),
            context=_context_provider(self.context),
            sessions=self.sessions,
            runs=self._runs,
            max_body_bytes=self.max_body_bytes,
            title=self.title,
        )
        routes = [
            Route("/", handlers.page, methods=["GET"]),
            Route("/openapi.json", handlers.openapi, methods=["GET"]),
            Route("/agents", handlers.list_agents, methods=["GET"]),
            Route("/agents/{name}/runs", handlers.start_run, methods=["POST"]),
            Route("/agents/{name}/runs/{run_id}", handlers.describe_run, methods=["GET"]),
            Route("/agents/{name}/runs/{run_id}/events", handlers.events_sse, methods=["GET"]),
            WebSocketRoute("/agents/{name}/runs/{run_id}/events", handlers.events_ws),
            Route("/agents/{name}/runs/{run_id}/approvals", handlers.approve, methods=["POST"]),
            Route("/agents/{name}/runs/{run_id}/cancel", handlers.cancel, methods=["POST"]),
        ]
        app = Starlette(routes=routes, lifespan=self.lifespan)
        app.add_exception_handler(404, handlers.not_found)
        app.add_exception_handler(405, handlers.not_allowed)
        app.add_middleware(guard, auth=self.auth)
        return app

    async def serve(self, host: str = "127.0.0.1", port: int = 8080, **config: Any) -> None:
        """Serve the app with Hypercorn until cancelled, under the running
        event loop (trio or asyncio). Extra keywords set Hypercorn's config."""
        settings = Config()
        settings.bind = [f"{host}:{port}"]
        settings.accesslog = None
        for key, value in config.items():
            setattr(settings, key, value)
        await serve_app(self.app(), settings)


async def serve_app(app: ASGIApp, config: Any, shutdown: Any = None) -> None:
    """Run ``app`` on Hypercorn under the current async library."""
    if sniffio.current_async_library() == "trio":
        await serve_trio(app, config, shutdown_trigger=shutdown)  # type: ignore[arg-type]
    else:
        await serve_asyncio(app, config, shutdown_trigger=shutdown)  # type: ignore[arg-type]


__all__ = ["MAX_BODY_BYTES", "AgentServer", "serve_app"]
