"""``McpServerHandle``: a connection to an MCP server whose tools an agent can use.

Build one with :meth:`McpServerHandle.stdio` (a child process speaking MCP
over its stdin and stdout) or :meth:`McpServerHandle.streamable_http` (a
server at a URL), then connect it: ``await`` it, or use it as an async
context manager, which also closes it. Connecting runs the MCP handshake
and lists the tools once (all pages); :meth:`~McpServerHandle.tools` then
adapts them as helikon tools, synchronously.

A handle is also a :class:`~helikon.protocols.ToolSource`: give it to
``LlmAgent(tool_sources=[...])`` (or ``mcp_servers=[...]``) and the agent
picks up its tools when resolved, connecting it first if needed.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, final

import anyio
from mcp import types as mcp_types

from helikon._version import __version__
from helikon.errors import ConfigError
from helikon.mcp._connection import Connection, OpenClient, http_client, stdio_client
from helikon.mcp._errors import McpError, McpErrorKind
from helikon.mcp._mapping import remote_tool
from helikon.mcp._tools import McpTool, SearchToolsTool
from helikon.protocols import Tool

#: The default bound on the handshake plus the tool listing, in seconds.
DEFAULT_CONNECT_TIMEOUT: Final = 30.0

_CLIENT_INFO: Final = mcp_types.Implementation(name="helikon", version=__version__)


@final
class McpServerHandle:
    """A connection to one MCP server.

    Don't call the constructor: use :meth:`stdio` or :meth:`streamable_http`.

    >>> handle = McpServerHandle.stdio("npx", args=["-y", "@modelcontextprotocol/server-filesystem", "/data"],
    ...                                tool_prefix="fs_")
    >>> handle
    McpServerHandle(stdio server 'npx', tool_prefix='fs_', lazy=False, connected=False)
    """

    def __init__(
        self,
        label: str,
        open_client: OpenClient,
        *,
        tool_prefix: str,
        lazy: bool,
        connect_timeout: float,
        spawned: bool,
    ) -> None:
        if not isinstance(tool_prefix, str):
            raise ConfigError(f"tool_prefix must be a string, not {tool_prefix!r}")
        if not connect_timeout > 0:
            raise ConfigError(f"connect_timeout must be > 0 seconds, got {connect_timeout!r}")
        self._label = label
        self._connection = Connection(label, open_client, connect_timeout, spawned=spawned)
        self._tool_prefix = tool_prefix
        self._lazy = bool(lazy)
        self._state = "new"
        self._connecting: anyio.Event | None = None
        self._connect_error: McpError | None = None

    # -- construction --------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        tool_prefix: str = "",
        lazy: bool = False,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        stderr: Any = None,
    ) -> McpServerHandle:
        """A server run as a child process, speaking MCP over stdio.

        Args:
            command: the program (``"npx"``, ``"uvx"``, ``"node"``, a path).
            args: its arguments.
            env: extra environment variables. The child gets only a small safe
                set of the parent's (``HOME``, ``PATH``, ``USER``, ...) plus
                these, so secrets in your environment don't leak into it.
            cwd: its working directory.
            tool_prefix: put in front of every tool name (``"fs_"`` makes
                ``read_file`` ``fs_read_file``), to keep servers apart.
            lazy: advertise placeholder schemas plus a ``search_tools`` tool.
            connect_timeout: seconds for the handshake and the tool listing.
            stderr: where the child's stderr goes (a file with a ``fileno``);
                this process's stderr by default.
        """
        if not isinstance(command, str) or not command:
            raise ConfigError("McpServerHandle.stdio needs a command")
        argv = [str(arg) for arg in args]
        environment = {str(k): str(v) for k, v in env.items()} if env is not None else None
        directory = os.fspath(cwd) if cwd is not None else None

        def open_client() -> Any:
            return stdio_client(command, argv, environment, directory, stderr, _CLIENT_INFO)

        return cls(
            f"stdio server {command!r}",
            open_client,
            tool_prefix=tool_prefix,
            lazy=lazy,
            connect_timeout=connect_timeout,
            spawned=True,
        )

    @classmethod
    def streamable_http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        tool_prefix: str = "",
        lazy: bool = False,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> McpServerHandle:
        """A server at ``url``, over MCP's streamable HTTP transport.

        (The older HTTP+SSE transport is not supported: the MCP spec replaced
        it with streamable HTTP in its 2025-03-26 revision.)

        Args:
            url: the MCP endpoint, e.g. ``"http://127.0.0.1:3001/mcp"``.
            headers: sent with every request (``{"Authorization": "Bearer ..."}``).
            tool_prefix: put in front of every tool name.
            lazy: advertise placeholder schemas plus a ``search_tools`` tool.
            connect_timeout: seconds for the handshake and the tool listing;
                also the HTTP connect and write timeout.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"McpServerHandle.streamable_http needs an http(s) URL, not {url!r}")
        header_map = {str(k): str(v) for k, v in (headers or {}).items()}

        def open_client() -> Any:
            return http_client(url, header_map, connect_timeout, _CLIENT_INFO)

        return cls(
            f"MCP server at {url}",
            open_client,
            tool_prefix=tool_prefix,
            lazy=lazy,
            connect_timeout=connect_timeout,
            spawned=False,
        )

    # -- life cycle ----------------------------------------------------------

    async def connect(self) -> McpServerHandle:
        """Connect (handshake, then list the tools); returns the handle.

        Connecting a connected handle does nothing; connecting one that is
        connecting (from another task) waits for that connection.

        Raises:
            McpError: ``SPAWN`` (the command did not start), ``CONNECT`` (no
                handshake: unreachable, not an MCP server, timed out) or
                ``SERVICE`` (listing the tools failed); ``OTHER`` after close.
        """
        if self._state == "connecting" and self._connecting is not None:
            await self._connecting.wait()
        if self._state == "connected":
            return self
        if self._state != "new":
            raise self._connect_error or McpError(
                McpErrorKind.OTHER, f"the handle to the {self._label} is closed; make a new one"
            )
        self._state = "connecting"
        self._connecting = anyio.Event()
        try:
            await self._connection.open()
        except BaseException as exc:
            self._state = "closed"
            self._connect_error = exc if isinstance(exc, McpError) else None
            raise
        else:
            self._state = "connected"
        finally:
            self._connecting.set()
        return self

    async def close(self) -> None:
        """Disconnect (and stop a stdio server). Idempotent.

        The tools made from this handle fail with a ToolError afterwards.
        """
        self._state = "closed"
        await self._connection.close()

    def __await__(self) -> Generator[Any, None, McpServerHandle]:
        return self.connect().__await__()

    async def __aenter__(self) -> McpServerHandle:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- what it offers ------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Connected and not closed (the server may still have gone away)."""
        return self._state == "connected" and self._connection.connected

    @property
    def tool_prefix(self) -> str:
        return self._tool_prefix

    @property
    def lazy(self) -> bool:
        return self._lazy

    @property
    def server_info(self) -> mcp_types.Implementation | None:
        """The server's name and version, as it gave them at the handshake."""
        return self._connection.server_info

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, if it gave any."""
        return self._connection.instructions

    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as helikon tools (discovered at connect).

        In lazy mode the tools advertise a placeholder schema and a
        ``<prefix>search_tools`` tool comes last.

        Raises:
            McpError: ``OTHER`` when the handle is not connected.
        """
        if self._state != "connected":
            raise McpError(
                McpErrorKind.OTHER,
                f"the handle to the {self._label} is not connected: `await` it or `async with` it first",
            )
        remote = tuple(remote_tool(tool, self._tool_prefix) for tool in self._connection.tools)
        tools: list[Tool] = [McpTool(r, self._connection, lazy=self._lazy) for r in remote]
        if self._lazy:
            tools.append(SearchToolsTool(f"{self._tool_prefix}search_tools", remote, self._server_name()))
        return tuple(tools)

    async def resolve_tools(self) -> tuple[Tool, ...]:
        """:class:`~helikon.protocols.ToolSource`: connect if needed, then :meth:`tools`."""
        await self.connect()
        return self.tools()

    def _server_name(self) -> str:
        info = self._connection.server_info
        return repr(info.name) if info is not None and info.name else ""

    def __repr__(self) -> str:
        return (
            f"McpServerHandle({self._label}, tool_prefix={self._tool_prefix!r}, lazy={self._lazy}, "
            f"connected={self.connected})"
        )


__all__ = ["DEFAULT_CONNECT_TIMEOUT", "McpServerHandle"]
