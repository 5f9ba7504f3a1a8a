"""``McpError``: what goes wrong connecting to, or serving, MCP.

One exception with a :class:`McpErrorKind` saying which step failed, each
message written to say what to do next. Tool calls never raise it: a remote
tool that fails (an ``isError`` result, a dropped connection, a cancelled
call) raises :class:`~helikon.errors.ToolError`, which the model sees, since
an agent only ever talks to tools.
"""

from __future__ import annotations

import enum
from typing import final

from helikon.errors import HelikonError


class McpErrorKind(enum.Enum):
    """Which step of the MCP life cycle failed (the book's ``McpError`` variants)."""

    #: The initialize handshake with a server failed, timed out, or the
    #: server could not be reached.
    CONNECT = "connect"
    #: A stdio server's process could not be started.
    SPAWN = "spawn"
    #: A request on an established connection failed (e.g. listing tools).
    SERVICE = "service"
    #: An HTTP server could not bind its address.
    BIND = "bind"
    #: A server ended abnormally while serving.
    SERVE = "serve"
    #: Anything else (a handle used after ``close()``, ...).
    OTHER = "other"


@final
class McpError(HelikonError):
    """An MCP connection or server failed; :attr:`kind` says at which step.

    >>> error = McpError(McpErrorKind.SPAWN, "could not start 'nope'")
    >>> error.kind.value, str(error)
    ('spawn', "could not start 'nope'")
    """

    def __init__(self, kind: McpErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"McpError({self.kind.name}, {self.message!r})"


__all__ = ["McpError", "McpErrorKind"]
