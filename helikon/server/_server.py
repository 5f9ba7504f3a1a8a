"""``AgentServer``: helikon agents over HTTP, Server-Sent Events and WebSocket.

A frozen description of the server (agents, providers, auth, limits, the run
backend) whose :meth:`AgentServer.app` is a Starlette ASGI app and whose
:meth:`AgentServer.serve` runs it on Hypercorn, under trio or asyncio.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, final

import anyio
import anyio.abc
import anyio.to_thread
import attrs
import sniffio
from hypercorn.asyncio import serve as serve_asyncio
from hypercorn.config import Config
from hypercorn.trio import serve as serve_trio
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from helikon.errors import ConfigError, HelikonError
from helikon.server._backend import RunBackend
from helikon.server._http import BODY_TIMEOUT_SECONDS, Handlers, guard, readiness
from helikon.server._local import Admission, InProcessRuns
from helikon.server._providers import (
    Authenticator,
    ContextProvider,
    InMemorySessions,
    SessionProvider,
    constant_context,
    default_context,
)
from helikon.server._retention import Retention

log = logging.getLogger("helikon.server")

#: The default request body limit: 1 MiB.
MAX_BODY_BYTES = 1 << 20
#: The default listen backlog. Hypercorn's own is 100: under a burst of
#: connections the kernel's queue overflows and clients retry after a second
#: or more (at 1,000 concurrent runs, 428 overflowed and the p99 time to the
#: first event doubled). The kernel caps it at ``net.core.somaxconn``.
BACKLOG = 2048
#: Seconds an idle keep-alive connection is kept open (longer than the
#: 60-second idle timeout common load balancers use, so the balancer closes first).
KEEP_ALIVE_SECONDS = 75.0
#: Seconds running runs get to finish when the server drains before the rest are cancelled.
DRAIN_GRACE_SECONDS = 30.0
#: While ``serve`` runs (with ``tune_gc``), a full garbage collection waits
#: for this many collections of the middle generation (CPython's default: 10).
FULL_GC_AFTER = 100


class ServeError(HelikonError):
    """The server could not listen, or stopped on a failure."""


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
        admission: how many runs execute at once and how many may queue
            (with the default in-process backend); beyond, 503 with ``Retry-After``.
        body_timeout: seconds to receive a request body (408 and the
            connection closed beyond).
        drain_grace: seconds running runs get to finish when the server
            drains (SIGTERM, or the app's shutdown) before the rest are cancelled.
        authorize: with ``auth``, runs and session ids belong to the identity
            that made them (another identity gets 404); ``(identity, owner,
            action) -> bool`` (sync or async; ``action`` is ``"read"``,
            ``"approve"`` or ``"cancel"``) lets an identity at another's run
            when it answers true, for applications that share runs on purpose.
    """

    agents: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    context: Any = None
    sessions: SessionProvider = attrs.field(factory=InMemorySessions)
    auth: Authenticator | None = None
    retention: Retention = attrs.field(factory=Retention)
    backend: RunBackend | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    title: str = "helikon agent server"
    admission: Admission = attrs.field(factory=Admission)
    body_timeout: float = BODY_TIMEOUT_SECONDS
    drain_grace: float = DRAIN_GRACE_SECONDS
    authorize: Any = None
    _runs: RunBackend = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        _agent_map(self.agents)
        _context_provider(self.context)
        if self.max_body_bytes < 1:
            raise ConfigError("max_body_bytes must be positive")
        if self.body_timeout <= 0 or self.drain_grace < 0:
            raise ConfigError("body_timeout must be positive and drain_grace not negative")
        runs = self.backend if self.backend is not None else InProcessRuns(self.retention, self.admission)
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

    def with_admission(
        self,
        *,
        max_running: int = 1024,
        max_queued: int = 1024,
        retry_after: int = 2,
        max_awaiting: int = 1024,
    ) -> AgentServer:
        """At most ``max_running`` runs execute at once, ``max_queued`` more
        wait their turn; beyond, 503 with ``Retry-After: retry_after``. At
        most ``max_awaiting`` runs wait for a human at once (beyond, the
        call that would wait is denied)."""
        return attrs.evolve(self, admission=Admission(max_running, max_queued, retry_after, max_awaiting))

    def with_authorize(self, authorize: Any) -> AgentServer:
        return attrs.evolve(self, authorize=authorize)

    def with_drain_grace(self, seconds: float) -> AgentServer:
        return attrs.evolve(self, drain_grace=seconds)

    async def drain(self) -> None:
        """Stop admitting runs (``/ready`` answers 503, new runs 503), let the
        running ones finish within :attr:`drain_grace`, then cancel the rest
        (their partial turns persisted). ``serve`` does this on SIGTERM, the
        lifespan on the app's shutdown."""
        drain: Callable[[float], Awaitable[None]] | None = getattr(self._runs, "drain", None)
        if drain is not None:
            await drain(self.drain_grace)

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
                await self.drain()  # the app shuts down: finish or cancel the runs first
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
            body_timeout=self.body_timeout,
            authorize=self.authorize,
            authenticated=self.auth is not None,
        )
        routes = [
            Route("/", handlers.page, methods=["GET"]),
            Route("/health", handlers.health, methods=["GET"]),
            Route("/ready", handlers.ready, methods=["GET"]),
            Route("/openapi.json", handlers.openapi, methods=["GET"]),
            Route("/agents", handlers.list_agents, methods=["GET"]),
            Route("/agents/{name}/runs", handlers.runs_route, methods=["GET", "POST"], name="runs"),
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

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        backlog: int = BACKLOG,
        keep_alive: float = KEEP_ALIVE_SECONDS,
        drain_on_sigterm: bool = True,
        probe_port: int | None = None,
        tune_gc: bool = True,
        task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
        **config: Any,
    ) -> None:
        """Serve the app with Hypercorn until cancelled (or, with
        ``drain_on_sigterm``, until SIGTERM has drained it), under the
        running event loop (trio or asyncio).

        ``port=0`` picks a free port: ``url = await group.start(server.serve,
        "127.0.0.1", 0)`` gives the base URL once it listens (it is logged
        too). Extra keywords set Hypercorn's config (``read_timeout`` applies
        to every read, an idle SSE client's too: the body timeout is
        :attr:`body_timeout`).

        ``probe_port`` also answers ``GET /health`` and ``GET /ready`` on
        that port (``0``: a free one, logged) from a thread of its own: the
        probes on the main port share the event loop with the runs and, in a
        burst of new connections, wait behind their intake; these never do.
        On the main port, ``GET /health`` and ``GET /ready`` are answered
        before the app's routing (:class:`ProbeFastPath`). Under trio the
        port has :data:`TRIO_ACCEPTORS` listening sockets (``SO_REUSEPORT``),
        so a burst of connections is accepted in parallel accept loops.

        ``tune_gc`` (the default) sets the process's garbage collector for
        latency while serving (:func:`latency_gc`): the objects alive at
        start are frozen out of collections, and full collections are rarer.
        A full collection stops the event loop for the time it takes to walk
        every object, about 0.1 to 0.3 s with 1,000 runs streaming on a
        2-core machine, several times during a burst; it is the largest pause
        a probe on the main port otherwise meets.

        Raises:
            ServeError: the address cannot be bound, or serving failed.
        """
        settings = Config()
        settings.accesslog = None
        settings.backlog = backlog
        settings.keep_alive_timeout = keep_alive
        settings.graceful_timeout = 5.0
        for key, value in config.items():
            if not hasattr(settings, key):
                raise ConfigError(f"Hypercorn has no setting {key!r}")
            setattr(settings, key, value)
        probes = None if probe_port is None else ProbeServer(host, probe_port, self._runs)
        try:
            with latency_gc(tune_gc):
                await serve_listening(
                    ProbeFastPath(self.app(), self._runs),
                    host,
                    port,
                    settings,
                    task_status=task_status,
                    before_stop=self.drain if drain_on_sigterm else None,
                )
        finally:
            if probes is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(probes.close)


@final
class ProbeFastPath:
    """``GET /health`` and ``GET /ready`` answered before the app: no
    routing, no middleware, no request object (the answers and headers are
    the routes' own, ``X-Run-Id`` included). Everything else, a probe with a
    body or under another method too, goes to the app."""

    def __init__(self, app: ASGIApp, runs: object) -> None:
        self.app = app
        self.runs = runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if (
            scope["type"] != "http"
            or (path != "/health" and path != "/ready")
            or scope.get("method") != "GET"
            or scope.get("root_path")
            or any(name in (b"content-length", b"transfer-encoding") for name, _ in scope.get("headers", ()))
        ):
            await self.app(scope, receive, send)
            return
        status, state = (200, "ok") if path == "/health" else readiness(self.runs)
        body = b'{"status":"%s"}' % state.encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"x-run-id", uuid.uuid4().hex.encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


_gc_lock = threading.Lock()
_gc_users = 0
_gc_threshold: tuple[int, int, int] = (700, 10, 10)


@contextmanager
def latency_gc(enabled: bool = True) -> Iterator[None]:
    """Set CPython's garbage collector for a server's latency while inside.

    On entering: a collection, then :func:`gc.freeze` (the objects alive
    now, the imported modules and the app, leave every later collection),
    and the full collection's threshold raised to :data:`FULL_GC_AFTER`
    (young collections are unchanged). A full collection walks every
    tracked object and stops the event loop meanwhile; under a burst of
    runs the heap grows by a quarter again and again, and each growth
    triggered one (pauses of 0.1 to 0.3 s, several per burst of 1,000
    runs). Cyclic garbage is still collected by the young collections;
    what survives them waits longer (a few objects per run, measured).
    On leaving (the last of several servers in one process), the threshold
    is restored and the frozen objects are given back to the collector.
    """
    global _gc_users, _gc_threshold
    if not enabled:
        yield
        return
    with _gc_lock:
        if not _gc_users:
            _gc_threshold = gc.get_threshold()
            gc.collect()
            gc.freeze()
            young, middle, full = _gc_threshold
            gc.set_threshold(young, middle, max(full, FULL_GC_AFTER))
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if not _gc_users:
                gc.set_threshold(*_gc_threshold)
                gc.unfreeze()


@final
class ProbeServer:
    """``GET /health`` and ``GET /ready`` on a port of their own, answered
    by a thread (Python's ``http.server``): a load balancer's health check
    never queues behind the event loop's work. Readiness reads the backend's
    ``draining`` and ``ready`` flags, as the main port's ``/ready`` does."""

    def __init__(self, host: str, port: int, runs: object) -> None:
        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/health":
                    status, state = 200, "ok"
                elif self.path == "/ready":
                    status, state = readiness(runs)
                else:
                    status, state = 404, "not_found"
                body = b'{"status":"%s"}' % state.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        try:
            self._server = ThreadingHTTPServer((host, port), _Handler)
        except OSError as exc:
            raise ServeError(f"cannot listen for probes on {host}:{port}: {exc}") from exc
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="helikon-probes", daemon=True)
        self._thread.start()
        log.info("probes (/health, /ready) on http://%s:%d", host, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


async def serve_app(app: ASGIApp, config: Any, shutdown: Any = None) -> None:
    """Run ``app`` on Hypercorn under the current async library."""
    if sniffio.current_async_library() == "trio":
        await serve_trio(app, config, shutdown_trigger=shutdown)  # type: ignore[arg-type]
    else:
        await serve_asyncio(app, config, shutdown_trigger=shutdown)  # type: ignore[arg-type]


#: Listening sockets sharing the port (``SO_REUSEPORT``) under trio: its
#: server accepts one connection per pass of the scheduler on each socket,
#: so the intake of a burst of connections takes a pass per connection and a
#: probe waits for every connection ahead of it; the kernel spreads new
#: connections over the sockets, whose accept loops run side by side.
TRIO_ACCEPTORS = 8


def listen(
    host: str, port: int, backlog: int, error: type[Exception] = ServeError, *, reuse_port: bool = False
) -> socket.socket:
    """A listening TCP socket on ``(host, port)`` (``port=0``: a free one), or
    ``error``; with ``reuse_port``, others may listen on the same port
    (``SO_REUSEPORT``: only sockets of the same user that set it too)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise error(f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        hint = " (is another server on that port? pass port=0 for a free one)" if port else ""
        raise error(f"cannot listen on {host}:{port}: {exc}{hint}") from exc
    return sock


async def _sigterm() -> None:
    """Return at the first SIGTERM (never, off the main thread, where no handler can be set)."""
    try:
        receiver = anyio.open_signal_receiver(signal.SIGTERM)
        with receiver as signals:
            async for _ in signals:
                return
    except (RuntimeError, ValueError, NotImplementedError):
        await anyio.sleep_forever()


async def serve_listening(
    app: ASGIApp,
    host: str,
    port: int,
    config: Any,
    *,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    before_stop: Callable[[], Awaitable[None]] | None = None,
    error: type[Exception] = ServeError,
) -> None:
    """Serve ``app`` with Hypercorn on a socket bound here (so ``port=0``
    works), reporting ``http://host:port`` through ``task_status`` and the log.

    With ``before_stop``, the first SIGTERM awaits it (a drain) and then stops
    Hypercorn gracefully, and this returns. Cancelled from outside, Hypercorn
    is stopped gracefully too (through its shutdown trigger, never cut off
    from the side), within its ``graceful_timeout``.
    """
    backlog = int(getattr(config, "backlog", BACKLOG))
    spread = sniffio.current_async_library() == "trio" and hasattr(socket, "SO_REUSEPORT")
    sock = listen(host, port, backlog, error, reuse_port=spread)
    bound = sock.getsockname()[1]
    socks = [sock]
    try:
        if spread:  # under trio, more accept loops for one port (TRIO_ACCEPTORS)
            socks += [listen(host, bound, backlog, error, reuse_port=True) for _ in range(TRIO_ACCEPTORS - 1)]
    except BaseException:
        for each in socks:
            each.close()
        raise
    # Hypercorn takes its own descriptor of each listening socket.
    config.bind = [f"fd://{os.dup(each.fileno())}" for each in socks]
    stop = anyio.Event()
    failure: list[BaseException] = []
    done = anyio.Event()
    shield = anyio.CancelScope(shield=True)

    async def run() -> None:
        try:
            with shield:
                await serve_app(app, config, shutdown=stop.wait)
        except BaseException as exc:  # reported below, in the caller's task
            failure.append(exc)
        finally:
            done.set()

    async def on_sigterm() -> None:
        await _sigterm()
        log.info("SIGTERM: draining")
        if before_stop is not None:
            await before_stop()
        stop.set()

    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}"
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            if before_stop is not None:
                group.start_soon(on_sigterm)
            log.info("serving on %s", url)
            task_status.started(url)
            try:
                await done.wait()
            finally:
                stop.set()
                with anyio.CancelScope(shield=True), anyio.move_on_after(config.graceful_timeout + 1):
                    await done.wait()
                shield.cancel()
                group.cancel_scope.cancel()
    finally:
        for each in socks:
            each.close()
    if failure and not isinstance(failure[0], (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
        exc = failure[0]
        raise error(f"the server stopped: {type(exc).__name__}: {exc}") from exc


__all__ = [
    "BACKLOG",
    "MAX_BODY_BYTES",
    "TRIO_ACCEPTORS",
    "FULL_GC_AFTER",
    "AgentServer",
    "ProbeFastPath",
    "ProbeServer",
    "ServeError",
    "latency_gc",
    "listen",
    "serve_app",
    "serve_listening",
]
