"""The agent server's authentication in front of a protocol app.

The authenticator is the agent server's (:class:`~helikon.server.BearerAuth`
or ``(request) -> identity or None``, sync or async); a refusal is answered
as the agent server answers it (401 with ``WWW-Authenticate: Bearer``, or
the :class:`~helikon.server.AuthRejection`'s own status). The identity is
put in ``scope["state"]["identity"]``, where the protocol scopes its runs.
"""

from __future__ import annotations

import logging
from typing import Any, final

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from helikon.protocols._calls import call
from helikon.server._backend import owner_of
from helikon.server._providers import Authenticator, AuthRejection

log = logging.getLogger("helikon.protocols")


async def identify(auth: Authenticator | None, conn: HTTPConnection) -> Any:
    """Who sent ``conn`` (None without auth), or the :class:`AuthRejection` refusing it."""
    if auth is None:
        return None
    try:
        identity = await call(auth, conn)
    except AuthRejection as rejection:
        return rejection
    except Exception:  # fail closed
        log.exception("the authenticator raised; refusing the request")
        return AuthRejection()
    if identity is None or identity is False:
        return AuthRejection()
    return identity


def owner(conn: HTTPConnection) -> str | None:
    """The owner key of the request's identity (None without auth)."""
    return owner_of(conn.scope.get("state", {}).get("identity"))


@final
class Authenticated:
    """``app`` behind ``auth``: every HTTP request but ``public`` paths."""

    def __init__(self, app: Any, auth: Authenticator | None, public: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.auth = auth
        self.public = public

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.auth is None:
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if path in self.public:
            await self.app(scope, receive, send)
            return
        identity = await identify(self.auth, HTTPConnection(scope))
        if isinstance(identity, AuthRejection):
            response = JSONResponse(
                {"error": {"code": identity.code, "message": identity.message}}, identity.status
            )
            if identity.status == 401:
                response.headers["www-authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["identity"] = identity
        await self.app(scope, receive, send)


__all__ = ["Authenticated", "identify", "owner"]
