"""One live connection to an MCP server, owned by a task of its own.

The SDK's client is a stack of async context managers with task groups
inside (the stdio pipe pumps, the HTTP transport, the JSON-RPC dispatcher).
Task groups belong to the task that entered them: had the caller's task
entered them, a transport failure (the HTTP server going away, say) would
cancel that task, i.e. the user's agent run, from the side. So the
connection lives in an *owner task* spawned for it (an asyncio task, or a
trio system task): it enters the client, lists the tools, reports ready,
and waits to be told to close. Tool calls are made from whatever task runs
the tool, through the client's thread-safe request API.

Nothing waits forever:

- connecting is bounded by ``connect_timeout``;
- every call runs under a cancel scope that the run's cancellation token
  (and deadline) and the connection's end both cancel, so a server that
  exits mid-call gives a prompt error instead of a hang;
- closing is bounded by the SDK's shielded, time-limited shutdown (stdin
  closed, then SIGTERM, then SIGKILL for a stdio server).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, final

import anyio
import sniffio
from mcp import Client
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError

from helikon.cancel import CancellationToken
from helikon.errors import ToolError
from helikon.mcp._errors import McpError, McpErrorKind

#: JSON-RPC code the SDK uses when the connection is gone.
_CONNECTION_CLOSED: Final = mcp_types.CONNECTION_CLOSED
#: Stop paginating ``tools/list`` after this many pages (a paginator that never ends).
_MAX_PAGES: Final = 1000

#: Opens the SDK client (entered and left in the owner task).
OpenClient = Callable[[], AbstractAsyncContextManager[Client]]

#: Owner tasks of asyncio loops, kept referenced until they end.
_TASKS: set[Any] = set()


@final
class Connection:
    """A connected (or connecting, or closed) SDK client.

    Args:
        label: names the server in messages (``"stdio server 'npx'"``).
        open_client: opens the SDK client; called once, in the owner task.
        connect_timeout: seconds for the handshake and the tool listing.
        spawned: whether ``open_client`` starts a process (an ``OSError``
            from it is then a ``SPAWN`` error, not a ``CONNECT`` one).
    """

    def __init__(self, label: str, open_client: OpenClient, connect_timeout: float, *, spawned: bool) -> None:
        self.label = label
        self._open_client = open_client
        self._connect_timeout = connect_timeout
        self._spawned = spawned
        self._client: Client | None = None
        self._tools: tuple[mcp_types.Tool, ...] = ()
        self._failure: McpError | None = None
        self._lost: str | None = None
        self._scope: anyio.CancelScope | None = None
        self._calls: set[anyio.CancelScope] = set()
        self._close_requested: anyio.Event | None = None
        self._ended: anyio.Event | None = None
        self.server_info: mcp_types.Implementation | None = None
        self.instructions: str | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def tools(self) -> tuple[mcp_types.Tool, ...]:
        """The tools listed at connect time."""
        return self._tools

    async def open(self) -> None:
        """Start the owner task and wait until it is connected.

        Raises:
            McpError: ``SPAWN``, ``CONNECT`` or ``SERVICE`` (see :class:`McpErrorKind`).
        """
        ready = anyio.Event()
        self._close_requested = anyio.Event()
        self._ended = anyio.Event()
        _spawn(lambda: self._own(ready))
        try:
            await ready.wait()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise
        if self._failure is not None:
            raise self._failure

    async def close(self) -> None:
        """Ask the owner task to disconnect and wait until it has. Idempotent."""
        if self._close_requested is None or self._ended is None:
            return
        self._close_requested.set()
        if self._client is None and self._scope is not None:
            self._scope.cancel()  # still connecting
        await self._ended.wait()

    async def call_tool(
        self, name: str, args: dict[str, Any], cancel: CancellationToken
    ) -> mcp_types.CallToolResult:
        """Call ``name``, racing the run's cancellation and the connection's end.

        Raises:
            ToolError: the call was cancelled, the connection is gone, or the
                server answered with a protocol error.
        """
        client = self._client
        if client is None:
            raise ToolError(self._gone())
        result: mcp_types.CallToolResult | None = None
        with cancel.scope() as scope:
            self._calls.add(scope)
            try:
                result = await client.call_tool(name, args)
            except MCPError as exc:
                if exc.error.code == _CONNECTION_CLOSED:
                    raise ToolError(self._gone()) from exc
                raise ToolError(
                    f"the call to {name!r} on the {self.label} failed: {exc.error.message}"
                ) from exc
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(f"calling {name!r} on the {self.label} failed: {_describe(exc)}") from exc
            finally:
                self._calls.discard(scope)
        if result is None:
            if self._client is None:
                raise ToolError(self._gone())
            raise ToolError(f"the call to {name!r} on the {self.label} was cancelled")
        return result

    def _gone(self) -> str:
        why = f" ({self._lost})" if self._lost else ""
        return f"the {self.label} is not connected: it exited or closed the connection{why}"

    async def _own(self, ready: anyio.Event) -> None:
        """The owner task: connect, list, serve calls until told to close."""
        assert self._close_requested is not None and self._ended is not None
        phase = McpErrorKind.CONNECT
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout) as scope:
                self._scope = scope
                async with self._open_client() as client:
                    phase = McpErrorKind.SERVICE
                    self._tools = await _list_all_tools(client)
                    self.server_info = client.server_info
                    self.instructions = client.instructions
                    scope.deadline = math.inf
                    self._client = client
                    ready.set()
                    await self._close_requested.wait()
            if scope.cancelled_caught and not ready.is_set() and not self._close_requested.is_set():
                self._failure = McpError(
                    McpErrorKind.CONNECT,
                    f"the {self.label} did not finish the MCP handshake and tool listing within "
                    f"{self._connect_timeout:g} s (is it an MCP server? raise connect_timeout if it is slow)",
                )
        except Exception as exc:
            if ready.is_set():
                self._lost = _describe(exc)
            else:
                self._failure = self._classify(exc, phase)
        finally:
            self._client = None
            for call in tuple(self._calls):
                call.cancel()
            if not ready.is_set() and self._failure is None:
                self._failure = McpError(McpErrorKind.CONNECT, f"the {self.label} closed before it was ready")
            ready.set()
            self._ended.set()

    def _classify(self, exc: BaseException, phase: McpErrorKind) -> McpError:
        leaf = _leaf(exc)
        if phase is McpErrorKind.SERVICE:
            return McpError(
                McpErrorKind.SERVICE, f"the {self.label} failed to list its tools: {_describe(leaf)}"
            )
        if self._spawned and isinstance(leaf, OSError) and not isinstance(leaf, ConnectionError):
            return McpError(
                McpErrorKind.SPAWN,
                f"could not start the {self.label}: {leaf} (is the command installed and on PATH?)",
            )
        if isinstance(leaf, MCPError) and leaf.error.code == _CONNECTION_CLOSED:
            hint = "did it start? see its stderr" if self._spawned else "is the URL an MCP endpoint?"
            return McpError(
                McpErrorKind.CONNECT,
                f"the {self.label} closed the connection during the MCP handshake ({hint})",
            )
        return McpError(McpErrorKind.CONNECT, f"could not connect to the {self.label}: {_describe(leaf)}")


async def _list_all_tools(client: Client) -> tuple[mcp_types.Tool, ...]:
    """Every tool the server lists, following ``nextCursor`` page by page."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _spawn(owner: Callable[[], Awaitable[None]]) -> None:
    """Run ``owner`` in a task of its own, outside the caller's task tree."""
    if sniffio.current_async_library() == "trio":
        import trio

        trio.lowlevel.spawn_system_task(owner)
        return
    import asyncio

    async def run() -> None:
        await owner()

    task = asyncio.get_running_loop().create_task(run())
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups.

    >>> _leaf(ExceptionGroup("g", [ExceptionGroup("h", [KeyError("k")])]))
    KeyError('k')
    """
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """A one-line account of an error.

    >>> _describe(ExceptionGroup("g", [ConnectionRefusedError(111, "Connection refused")]))
    'ConnectionRefusedError: [Errno 111] Connection refused'
    """
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return leaf.error.message
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


@asynccontextmanager
async def stdio_client(
    command: str,
    args: list[str],
    env: dict[str, str] | None,
    cwd: str | None,
    stderr: Any,
    client_info: mcp_types.Implementation,
) -> AsyncIterator[Client]:
    """The SDK client over a stdio child process."""
    import sys

    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client as sdk_stdio_client

    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    transport = sdk_stdio_client(params, errlog=stderr if stderr is not None else sys.stderr)
    async with Client(transport, client_info=client_info, cache=None) as client:
        yield client


@asynccontextmanager
async def http_client(
    url: str, headers: dict[str, str], timeout: float, client_info: mcp_types.Implementation
) -> AsyncIterator[Client]:
    """The SDK client over streamable HTTP (with our own HTTP client, for the headers)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's defaults: ``timeout`` for connect/write/pool, five minutes for
    # reads, since a server may hold a response stream open that long.
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout, read=300.0))
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), client_info=client_info, cache=None) as c,
    ):
        yield c


__all__ = ["Connection", "OpenClient", "http_client", "stdio_client"]
