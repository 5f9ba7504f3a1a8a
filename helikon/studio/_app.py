"""``Studio``: the studio's ASGI app (Starlette) and its server.

Routes: the page at ``/`` (its script and style beside it), the JSON API
under ``/api`` (``GET /api/runs``, ``GET /api/runs/{id}``), and the agent
server's app mounted at ``/server/`` (its chat page, runs and approvals,
unchanged), whose runs the studio records.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from helikon.server import AgentServer, InMemorySessions
from helikon.server._page import page_html
from helikon.server._server import serve_listening
from helikon.studio import _evals, _regression, _sessions
from helikon.studio._catalog import Catalogue, summary, timeline
from helikon.studio._fork import fork_routes
from helikon.studio._guard import LocalOnly
from helikon.studio._record import Recorded
from helikon.trace import Trace, TraceFormatError

#: The studio listens on this machine only.
HOST = "127.0.0.1"
_ASSETS = {
    "/dom.js": ("dom.js", "text/javascript; charset=utf-8"),
    "/studio.js": ("studio.js", "text/javascript; charset=utf-8"),
    "/studio.css": ("studio.css", "text/css; charset=utf-8"),
    "/fork.js": ("fork.js", "text/javascript; charset=utf-8"),
    "/fork.css": ("fork.css", "text/css; charset=utf-8"),
    "/views.js": ("views.js", "text/javascript; charset=utf-8"),
    "/regression.js": ("regression.js", "text/javascript; charset=utf-8"),
}
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


@cache
def _asset(name: str) -> str:
    return files("helikon.studio").joinpath("static", name).read_text(encoding="utf-8")


def _inline_hashes(html: str) -> tuple[str, ...]:
    """The CSP hashes of a page's inline scripts and styles."""
    return tuple(
        "sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        for _, body in _INLINE.findall(html)
    )


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _paths(directories: Iterable[str | Path]) -> tuple[Path, ...]:
    return tuple(Path(d) for d in directories)


@attrs.frozen
class Studio:
    """The studio: recorded runs from disk and the runs made through it.

    Args:
        agents: the agents to chat with (served by an
            :class:`~helikon.server.AgentServer` at ``/server/``; every run recorded).
        context: the runs' :class:`~helikon.RunContext` (as ``AgentServer``'s ``context``).
        traces: directories whose ``*.jsonl`` trace files are listed.
        golden: the project's golden traces directory (listed when it exists).
        title: the page's title.
        evals: directories searched for saved eval runs (``report.json``).
        sessions: the session backend to browse (a
            :class:`~helikon.studio.SessionBrowser`, or ``--sessions``'s
            value); by default the studio's own chat sessions.
        chat_sessions: the chat's session provider (as ``AgentServer``'s
            ``sessions``; an app's own when ``--app`` names an agent server);
            by default one :class:`~helikon.server.InMemorySessions`.
    """

    agents: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    context: Any = None
    traces: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    golden: Path | None = None
    title: str = "helikon studio"
    evals: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    sessions: Any = None
    chat_sessions: Any = None
    catalogue: Catalogue = attrs.field(init=False)
    server: AgentServer = attrs.field(init=False)
    session_browser: Any = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        sources: list[tuple[str, Path]] = [("traces", d) for d in self.traces]
        if self.golden is not None:
            sources.append(("golden", self.golden))
        sources.extend((_evals.SOURCE, d) for d in self.evals)
        catalogue = Catalogue(sources)
        object.__setattr__(self, "catalogue", catalogue)
        recorded: Any = tuple(Recorded(agent, catalogue.add) for agent in self.agents)
        chats = self.chat_sessions if self.chat_sessions is not None else InMemorySessions()
        server = AgentServer(
            agents=recorded, context=self.context, title=f"{self.title}: chat", sessions=chats
        )
        object.__setattr__(self, "server", server)
        browser = self.sessions
        if browser is None:
            browser = _sessions.MemoryBrowser(chats if isinstance(chats, InMemorySessions) else None)
        elif isinstance(browser, str | Path):
            browser = _sessions.browser_for(str(browser))
        object.__setattr__(self, "session_browser", browser)

    def record(self, trace: Trace, when: float) -> str:
        """Add a recorded run to the list; returns its studio id."""
        return self.catalogue.add(trace, when).id

    async def page(self, request: Request) -> Response:
        return Response(_asset("studio.html"), media_type="text/html; charset=utf-8")

    async def asset(self, request: Request) -> Response:
        name, media = _ASSETS[request.url.path]
        return Response(_asset(name), media_type=media)

    async def no_icon(self, request: Request) -> Response:
        """``GET /favicon.ico``: none (a browser asks for it on every page, the chat page's too)."""
        return Response(status_code=204)

    async def list_runs(self, request: Request) -> JSONResponse:
        """``GET /api/runs``: every run, newest first (a file that is no trace is listed with its error)."""
        rows: list[dict[str, Any]] = []
        for entry in await anyio.to_thread.run_sync(self.catalogue.entries):
            try:
                trace = await anyio.to_thread.run_sync(self.catalogue.load, entry)
            except TraceFormatError as exc:
                rows.append({"id": entry.id, "source": entry.source, "name": entry.name, "error": str(exc)})
                continue
            rows.append(summary(entry, trace))
        return JSONResponse({"runs": rows, "agents": [a.name for a in self.agents]})

    async def show_run(self, request: Request) -> JSONResponse:
        """``GET /api/runs/{id}``: the run's timeline."""
        entry = self.catalogue.get(str(request.path_params["run_id"]))
        if entry is None:
            return _error(404, "not_found", "no such run")
        try:
            trace = await anyio.to_thread.run_sync(self.catalogue.load, entry)
        except TraceFormatError as exc:
            return _error(422, "not_a_trace", str(exc))
        return JSONResponse(timeline(entry, trace))

    def app(self) -> Starlette:
        """The ASGI app: guarded (loopback ``Host`` and same ``Origin`` only)."""
        routes = [
            Route("/", self.page, methods=["GET"]),
            *(Route(path, self.asset, methods=["GET"]) for path in _ASSETS),
            Route("/favicon.ico", self.no_icon, methods=["GET"]),
            Route("/api/runs", self.list_runs, methods=["GET"]),
            Route("/api/runs/{run_id}", self.show_run, methods=["GET"]),
            *fork_routes(self),
            *_regression.routes(self),
            *_evals.routes(self),
            *_sessions.routes(self),
            Mount("/server", self.server.app()),
        ]
        app = Starlette(routes=routes, lifespan=self.server.lifespan)
        app.add_middleware(LocalOnly, inline=_inline_hashes(page_html(self.server.title)))
        return app

    async def serve(
        self, port: int = 8765, *, task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the studio on ``127.0.0.1:port`` until cancelled (``port=0``: a free one).

        Raises:
            helikon.server.ServeError: the port cannot be bound.
        """
        settings = Config()
        settings.accesslog = None
        settings.graceful_timeout = 2.0
        await serve_listening(self.app(), HOST, port, settings, task_status=task_status)


def agents_of(value: Any) -> tuple[tuple[Any, ...], Any]:
    """``(agents, context)`` from what ``--app module:attr`` names: an
    :class:`~helikon.server.AgentServer`, an agent, or an iterable of agents."""
    if isinstance(value, AgentServer):
        return tuple(value.agents), value.context
    if isinstance(getattr(value, "name", None), str) and callable(getattr(value, "run", None)):
        return (value,), None
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return tuple(value), None
    raise TypeError(f"{value!r} is not an agent server, an agent or a list of agents")


__all__ = ["HOST", "Studio", "agents_of"]
