"""Protocol endpoints next to the agent server, in one ASGI app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount


def mount_protocols(server: Any, endpoints: Mapping[str, Any]) -> Starlette:
    """One app: each of ``endpoints`` (path -> an :class:`~helikon.protocols.agui.AguiServer`,
    an :class:`~helikon.protocols.a2a.A2AServer`, or anything with ``app()`` and
    ``lifespan``) mounted at its path, and ``server`` (an
    :class:`~helikon.server.AgentServer`, or None) at ``/``; the lifespans of all
    of them run as the app's.

    Pass the agent server's ``auth`` to each endpoint to guard them alike.
    """
    parts = [*endpoints.values(), *([server] if server is not None else [])]
    routes = [Mount(path.rstrip("/"), endpoint.app()) for path, endpoint in endpoints.items()]
    if server is not None:
        routes.append(Mount("/", server.app()))

    @asynccontextmanager
    async def lifespan(app: object = None) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for part in parts:
                await stack.enter_async_context(part.lifespan(app))
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(_Slash, prefixes=frozenset(path.rstrip("/") for path in endpoints))
    return app


class _Slash:
    """``POST /a2a/x`` reaches the endpoint mounted at ``/a2a/x`` (its ``/``
    route), as a client given the bare URL sends it (an A2A card's URL)."""

    def __init__(self, app: Any, prefixes: frozenset[str]) -> None:
        self.app = app
        self.prefixes = prefixes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") in self.prefixes:
            scope = {**scope, "path": scope["path"] + "/", "raw_path": scope.get("raw_path", b"") + b"/"}
        await self.app(scope, receive, send)


__all__ = ["mount_protocols"]
