"""``helikon mcp serve``: one sidecar agent as an MCP server (loaded lazily by the app)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import click
from rich.markup import escape

from helikon.cli._options import AGENTS_OPTION, agent_name_of
from helikon.cli._render import console
from helikon.cli._sidecar import load_sidecar
from helikon.mcp import McpAgentServer


@click.group(name="mcp")
def mcp_group() -> None:
    """Serve agents over the Model Context Protocol."""


@mcp_group.command(name="serve")
@AGENTS_OPTION
@click.option("--agent", "agent_name", required=True, help="The agent to serve.")
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp (default: stdio).",
)
def mcp_serve(agents_file: Path, agent_name: str, http: str | None) -> None:
    """Serve one agent as an MCP server: one tool, named after it, taking {"input": text}.

    Over stdio by default (for an MCP client that starts this command), or
    streamable HTTP with --http.
    """
    sidecar = load_sidecar(agents_file)
    name = agent_name_of(sidecar, agent_name)
    server: McpAgentServer[None] = McpAgentServer(sidecar.build(name), context=sidecar.context)
    if http is None:
        anyio.run(server.serve_stdio)
        return
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter("must be HOST:PORT, e.g. 127.0.0.1:8000", param_hint="--http")

    async def serve() -> None:
        async with anyio.create_task_group() as group:
            url = await group.start(server.serve_streamable_http, host, int(port))
            console(sys.stderr).print(f"serving {escape(name)} at {url}")

    anyio.run(serve, backend="asyncio")


__all__ = ["mcp_group"]
