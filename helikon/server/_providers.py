"""The server's extension points: sessions, run contexts, authentication.

Each is a plain callable (sync or async), so a function or a small class
does: a session provider maps the ``X-Session-Id`` header to a
:class:`~helikon.Session`; a context provider builds the run's
:class:`~helikon.RunContext` from the request; an authenticator says who
the caller is (``None`` or ``False`` refuses the request with 401; an
:class:`AuthRejection`, raised or returned, refuses it with its own status
and message).
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar, final

from starlette.requests import HTTPConnection

from helikon.context import RunContext
from helikon.errors import ConfigError
from helikon.protocols import Session
from helikon.sessions import MemorySession

T = TypeVar("T")

#: ``(session_id or None) -> Session | None`` (may be async).
SessionProvider = Callable[[str | None], "Session | Awaitable[Session | None] | None"]
#: ``(request, session) -> RunContext`` (may be async).
ContextProvider = Callable[[HTTPConnection, "Session | None"], "RunContext[Any] | Awaitable[RunContext[Any]]"]
#: ``(request) -> identity or None`` (may be async); ``None`` or ``False``
#: means 401, an :class:`AuthRejection` (raised or returned) its own status.
Authenticator = Callable[[HTTPConnection], Any]


class AuthRejection(Exception):
    """An authenticator's refusal with a status and a message for the client.

    Raise it (or return it) from an authenticator to refuse a request with
    more than a bare 401, e.g. ``raise AuthRejection(403, "this token may
    not run agents")``. The client gets ``status`` and ``{"error": {"code":
    "unauthorized" (401) or "forbidden" (other statuses), "message":
    message}}``; a WebSocket is closed with code 1008 and the message as
    its reason.

    Raises:
        ConfigError: ``status`` is not a client error (400 to 499).
    """

    def __init__(self, status: int = 401, message: str = "authentication is required") -> None:
        if not isinstance(status, int) or not 400 <= status <= 499:
            raise ConfigError(f"AuthRejection needs a 4xx status, not {status!r}")
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def code(self) -> str:
        """The error code of the answer: ``unauthorized`` for 401, else ``forbidden``."""
        return "unauthorized" if self.status == 401 else "forbidden"


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user function that may be sync or async."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


@final
class InMemorySessions:
    """The default session provider: one :class:`~helikon.MemorySession` per
    session id, kept for the process's life; a request without an id gets a
    fresh session that is never stored."""

    def __init__(self) -> None:
        self.sessions: dict[str, MemorySession] = {}

    def __call__(self, session_id: str | None) -> Session:
        if session_id is None:
            return MemorySession()
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = MemorySession()
        return session


def sessions_from(factory: Callable[[str], Session]) -> SessionProvider:
    """A session provider from a factory of sessions by id (e.g.
    ``lambda sid: SqliteSession(path, sid)``); no id, no session."""

    def provide(session_id: str | None) -> Session | None:
        return None if session_id is None else factory(session_id)

    return provide


def default_context(request: HTTPConnection, session: Session | None) -> RunContext[Any]:
    """The default context: core defaults, the request's session."""
    return RunContext.ephemeral(None).with_session(session)


def constant_context(ctx: RunContext[Any]) -> ContextProvider:
    """A context provider that gives ``ctx`` (with the request's session) to every run."""

    def provide(request: HTTPConnection, session: Session | None) -> RunContext[Any]:
        return ctx.with_session(session)

    return provide


@final
class BearerAuth:
    """Admit requests whose ``Authorization: Bearer <token>`` is one of
    ``tokens`` (compared in constant time); the identity is the token's name
    when ``tokens`` is a mapping of name -> token, else ``"bearer"``."""

    def __init__(self, tokens: Iterable[str] | dict[str, str]) -> None:
        pairs = list(tokens.items()) if isinstance(tokens, dict) else [("bearer", t) for t in tokens]
        if not pairs or any(not isinstance(t, str) or len(t) < 8 for _, t in pairs):
            raise ConfigError("BearerAuth needs at least one token, each a string of 8 or more characters")
        self._tokens = [(name, token.encode()) for name, token in pairs]

    def __call__(self, request: HTTPConnection) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        candidate = given.strip().encode()
        found = None
        for name, token in self._tokens:  # check every token: no early exit to time
            if hmac.compare_digest(candidate, token):
                found = name
        return found


__all__ = [
    "AuthRejection",
    "Authenticator",
    "BearerAuth",
    "ContextProvider",
    "InMemorySessions",
    "SessionProvider",
    "call",
    "constant_context",
    "default_context",
    "sessions_from",
]
