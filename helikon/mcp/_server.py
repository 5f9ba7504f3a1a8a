"""``McpAgentServer``: serve a helikon agent as one MCP tool.

The tool is named after the agent (sanitised to ``[a-zA-Z0-9_-]+``), carries
the agent's description, and takes ``{"input": string}``; calling it runs
the agent on that text and answers its final output. Each call gets a fresh
run context from the context factory (and a fresh cancellation token).

At this boundary:

- ``RunConfig.timeout`` is enforced with a timer of its own (the run's own
  deadline normally ends it first): when it passes, the run's token fires,
  and the call answers an error result saying so instead of hanging;
- a client's ``notifications/cancelled`` (or a dropped connection) fires
  the run's token, so the run stops as a cancelled run does (its session is
  still written, its hooks still hear of it);
- an unknown tool, or arguments the input schema refuses (extra ones
  included), are a JSON-RPC error ``-32602`` (invalid params), as the MCP
  specification lists;
- a run that fails answers an MCP error result (``isError: true``) with the
  reason; the server itself keeps serving.

The run itself executes inside a shielded scope and is only ever stopped
through its token, so it ends by its own rules; if it ignores the token for
:data:`WIND_DOWN_S` seconds it is cut off.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final

import anyio
import attrs
import sniffio
from mcp import types as mcp_types

from helikon._version import __version__
from helikon.config import RunConfig
from helikon.context import RunContext
from helikon.errors import ConfigError, RunError
from helikon.mcp._errors import McpError, McpErrorKind
from helikon.results import collect

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

Ctx = TypeVar("Ctx")

#: Seconds a run gets to end by itself after its token fired, before it is cut off.
WIND_DOWN_S: Final = 5.0

_INPUT_SCHEMA: Final = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The request for the agent, in plain text."}},
    "required": ["input"],
    "additionalProperties": False,
}


def sanitize_tool_name(name: str) -> str:
    """An agent's name as an MCP tool name: runs of other characters become ``_``.

    >>> sanitize_tool_name("budget assistant (v2)")
    'budget_assistant_v2_'
    >>> sanitize_tool_name("research-agent"), sanitize_tool_name("???")
    ('research-agent', 'agent')
    """
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", name)
    return cleaned if cleaned.strip("_") else "agent"


def _agent_tool_name(server: McpAgentServer[Any]) -> str:
    return sanitize_tool_name(str(getattr(server.agent, "name", "") or "agent"))


def _default_context() -> None:
    return None


@final
@attrs.frozen
class McpAgentServer(Generic[Ctx]):
    """An agent served as a single MCP tool.

    Args:
        agent: any helikon agent (``LlmAgent``, a workflow agent, ...).
        context: makes each call's context: a function returning the user's
            context object (the run gets ``RunContext.ephemeral(obj)``) or a
            whole :class:`~helikon.context.RunContext` (to carry hooks,
            permission rules, a session...). By default the user context is
            ``None``.
        name: the server name reported at initialize (default: the agent's).
        version: the server version reported at initialize.
        instructions: optional instructions for the client's model.
        config: the run config of every call (default: the agent's own).
        tool_name: the tool's name (default: the agent's name, sanitised).
    """

    agent: Any
    context: Callable[[], Any] = _default_context
    name: str | None = None
    version: str = __version__
    instructions: str | None = None
    config: RunConfig | None = None
    tool_name: str = attrs.field(default=attrs.Factory(_agent_tool_name, takes_self=True))

    def __attrs_post_init__(self) -> None:
        if not callable(getattr(self.agent, "run", None)):
            raise ConfigError(f"McpAgentServer needs an agent with a run() method, not {self.agent!r}")
        if not callable(self.context):
            raise ConfigError("McpAgentServer: context must be a function returning a context")
        if sanitize_tool_name(self.tool_name) != self.tool_name:
            raise ConfigError(f"McpAgentServer: tool_name {self.tool_name!r} must match [a-zA-Z0-9_-]+")

    def with_ctx(self, factory: Callable[[], Any]) -> McpAgentServer[Ctx]:
        """The book's ``with_ctx``: the context factory."""
        return attrs.evolve(self, context=factory)

    def with_name(self, name: str) -> McpAgentServer[Ctx]:
        return attrs.evolve(self, name=name)

    def with_version(self, version: str) -> McpAgentServer[Ctx]:
        return attrs.evolve(self, version=version)

    def with_instructions(self, instructions: str | None) -> McpAgentServer[Ctx]:
        return attrs.evolve(self, instructions=instructions)

    def with_run_config(self, config: RunConfig | None) -> McpAgentServer[Ctx]:
        return attrs.evolve(self, config=config)

    @property
    def timeout(self) -> float | None:
        """``RunConfig.timeout`` of each call (the server's config, else the agent's)."""
        config = self.config if self.config is not None else getattr(self.agent, "config", None)
        return config.timeout if isinstance(config, RunConfig) else None

    # -- the MCP server --------------------------------------------------------

    def tool(self) -> mcp_types.Tool:
        """The one tool this server lists."""
        description = getattr(self.agent, "description", "") or f"Ask the agent {self.agent.name!r}."
        return mcp_types.Tool(name=self.tool_name, description=description, input_schema=_INPUT_SCHEMA)

    def mcp_server(self) -> Server[Any]:
        """A fresh low-level SDK server with this agent's handlers (for custom transports)."""
        from mcp.server.lowlevel import Server

        async def list_tools(
            ctx: Any, params: mcp_types.PaginatedRequestParams | None
        ) -> mcp_types.ListToolsResult:
            return mcp_types.ListToolsResult(tools=[self.tool()])

        async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
            return await self.call(params.name, params.arguments or {})

        return Server(
            self.name or self.agent.name,
            version=self.version,
            instructions=self.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Answer one ``tools/call``: run the agent on ``arguments["input"]``.

        Raises:
            mcp.shared.exceptions.MCPError: ``-32602`` (invalid params), as the
                MCP specification lists, for an unknown tool or arguments the
                advertised input schema refuses (``input`` missing or not a
                string, or any other argument); the client sees a JSON-RPC
                error. A run that fails is an ``isError`` result instead.
        """
        from mcp.shared.exceptions import MCPError

        if tool != self.tool_name:
            message = f"unknown tool {tool!r}: this server has one tool, {self.tool_name!r}"
            raise MCPError(mcp_types.INVALID_PARAMS, message)
        extra = sorted(set(arguments) - {"input"})
        if extra:
            named = ", ".join(map(repr, extra))
            message = f"unexpected argument(s) {named}: {self.tool_name!r} takes only 'input'"
            raise MCPError(mcp_types.INVALID_PARAMS, message)
        text = arguments.get("input")
        if not isinstance(text, str):
            raise MCPError(mcp_types.INVALID_PARAMS, "the argument 'input' must be a string")
        try:
            run_ctx = self._new_context()
        except Exception as exc:
            return _error(f"the server could not make a run context: {type(exc).__name__}: {exc}")
        try:
            return await _Call(self.agent, run_ctx, text, self.config, self.timeout).run()
        finally:
            run_ctx.cancel.detach()

    def _new_context(self) -> RunContext[Any]:
        made = self.context()
        run_ctx = made if isinstance(made, RunContext) else RunContext.ephemeral(made)
        # A fresh token per call, following the factory's (a shared token would cancel every call).
        return run_ctx.with_cancel(run_ctx.cancel.child())

    # -- transports -------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve over this process's stdin and stdout until the client disconnects.

        While serving, anything printed to stdout goes to stderr instead, so it
        cannot corrupt the protocol.

        Raises:
            McpError: ``SERVE`` when serving ends abnormally.
        """
        from mcp.server.stdio import stdio_server

        server = self.mcp_server()
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        except Exception as exc:
            raise McpError(
                McpErrorKind.SERVE, f"serving {self.tool_name!r} over stdio failed: {exc}"
            ) from exc

    def asgi_app(self, *, path: str = "/mcp", host: str = "127.0.0.1") -> Starlette:
        """An ASGI app serving the agent over streamable HTTP at ``path``.

        Its lifespan runs the MCP session manager: run it with any ASGI
        server, or mount it in your own app and enter
        ``app.router.lifespan_context(app)`` in your app's lifespan. With a
        loopback ``host`` (the default) the app refuses requests whose
        ``Host``/``Origin`` is not loopback (DNS-rebinding protection).
        """
        return self.mcp_server().streamable_http_app(streamable_http_path=path, host=host)

    async def serve_streamable_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        path: str = "/mcp",
        task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve over streamable HTTP at ``http://host:port/path`` until cancelled.

        Runs under asyncio (uvicorn). ``port=0`` picks a free port; start it
        with ``url = await task_group.start(server.serve_streamable_http,
        "127.0.0.1", 0)`` to learn the URL once it listens.

        Raises:
            McpError: ``BIND`` when the address cannot be bound, ``SERVE``
                when serving fails (or under trio).
        """
        if sniffio.current_async_library() != "asyncio":
            raise McpError(
                McpErrorKind.SERVE,
                "serve_streamable_http runs under asyncio; under trio, serve asgi_app() with hypercorn",
            )
        import uvicorn

        sock = _bind(host, port)
        bound_port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        config = uvicorn.Config(
            self.asgi_app(path=path, host=host),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=int(WIND_DOWN_S),
        )
        server = uvicorn.Server(config)
        done = anyio.Event()
        failure: list[BaseException] = []
        # uvicorn is stopped through should_exit (a graceful shutdown that runs
        # the app's lifespan exit), never by cancelling it from the side.
        shield = anyio.CancelScope(shield=True)

        async def serve() -> None:
            try:
                with shield:
                    await server.serve(sockets=[sock])
            except BaseException as exc:  # reported below, in the caller's task
                failure.append(exc)
            finally:
                done.set()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(serve)
                try:
                    while not server.started and not done.is_set():
                        await anyio.sleep(0.01)
                    if server.started:
                        task_status.started(f"http://{shown}:{bound_port}{path}")
                    await done.wait()
                finally:
                    server.should_exit = True
                    with anyio.CancelScope(shield=True), anyio.move_on_after(WIND_DOWN_S + 1):
                        await done.wait()
                    shield.cancel()
        finally:
            sock.close()
        if failure and not isinstance(failure[0], (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
            exc = failure[0]
            raise McpError(
                McpErrorKind.SERVE, f"the MCP HTTP server stopped: {type(exc).__name__}: {exc}"
            ) from exc
        if not server.started:
            raise McpError(McpErrorKind.SERVE, f"the MCP HTTP server on {shown}:{bound_port} did not start")


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``(host, port)``, or ``McpError(BIND)``."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise McpError(McpErrorKind.BIND, f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        hint = " (is another server on that port? pass port=0 for a free one)" if port else ""
        raise McpError(McpErrorKind.BIND, f"cannot listen on {host}:{port}: {exc}{hint}") from exc
    return sock


@final
class _Call:
    """One ``tools/call``: the agent's run under the boundary's rules."""

    def __init__(
        self, agent: Any, ctx: RunContext[Any], text: str, config: RunConfig | None, timeout: float | None
    ):
        self.agent = agent
        self.ctx = ctx
        self.text = text
        self.config = config
        self.timeout = timeout
        self.answer: mcp_types.CallToolResult | None = None
        self.done = anyio.Event()
        self.scope = anyio.CancelScope(shield=True)

    async def run(self) -> mcp_types.CallToolResult:
        token = self.ctx.cancel
        async with anyio.create_task_group() as group:
            group.start_soon(self._drive)
            try:
                with anyio.move_on_after(self.timeout if self.timeout is not None else math.inf) as timer:
                    await self.done.wait()
            except anyio.get_cancelled_exc_class():
                # The client cancelled the call (or went away): stop the run.
                token.cancel()
                with anyio.CancelScope(shield=True):
                    await self._wind_down()
                raise
            if timer.cancelled_caught:
                token.cancel()
                await self._wind_down()
                return _error(f"the agent run timed out after {self.timeout:g} s")
        assert self.answer is not None
        return self.answer

    async def _wind_down(self) -> None:
        with anyio.move_on_after(WIND_DOWN_S):
            await self.done.wait()
        self.scope.cancel()

    async def _drive(self) -> None:
        try:
            with self.scope:
                self.answer = await self._collect(collect)
        finally:
            if self.answer is None:
                self.answer = _error("the agent run was stopped")
            self.done.set()

    async def _collect(self, collect: Any) -> mcp_types.CallToolResult:
        try:
            result = await collect(self.agent.run(self.ctx, self.text, config=self.config))
        except RunError as exc:
            return _error(f"the agent run failed: {exc}")
        except Exception as exc:
            return _error(f"the agent run failed: {type(exc).__name__}: {exc}")
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=str(result.final_output))]
        )


def _error(message: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=message)], is_error=True)


__all__ = ["WIND_DOWN_S", "McpAgentServer", "sanitize_tool_name"]
