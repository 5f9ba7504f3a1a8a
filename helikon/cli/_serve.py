"""``helikon serve``: the sidecar's agents behind the agent server (loaded lazily by the app).

:class:`helikon.server.AgentServer` serves every agent (or the ``--agent``
ones) over HTTP, SSE and WebSocket, with its page at ``/`` — the
``adk api_server`` / ``langgraph dev`` of a sidecar.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import trio
from rich.markup import escape

from helikon.cli._options import AGENTS_OPTION, agent_name_of
from helikon.cli._render import console
from helikon.cli._sidecar import load_sidecar


@click.command(name="serve")
@AGENTS_OPTION
@click.option(
    "--agent",
    "agent_names",
    multiple=True,
    help="An agent to serve (repeatable; default: every agent in the sidecar).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="The port.")
def serve_command(agents_file: Path, agent_names: tuple[str, ...], host: str, port: int) -> None:
    """Serve the sidecar's agents with the agent server: its page at /, the API under /agents.

    Each agent is built once, when the server starts (a missing API key fails
    then), and serves every run. Ctrl-C stops the server.
    """
    try:
        from helikon.server import AgentServer
    except ImportError as exc:
        raise click.UsageError(f"{exc} (helikon serve needs it)") from None
    sidecar = load_sidecar(agents_file)
    names = [agent_name_of(sidecar, name) for name in agent_names] or list(sidecar.agent_names)
    agents = [sidecar.build(name) for name in dict.fromkeys(names)]
    server = AgentServer(agents=agents, context=sidecar.context(), title=f"helikon: {agents_file.name}")
    base = f"http://{host}:{port}"
    served = escape(", ".join(dict.fromkeys(names)))
    console(sys.stderr).print(f"serving {served} at {base}/ (API: {base}/agents, {base}/openapi.json)")
    trio.run(server.serve, host, port)


__all__ = ["serve_command"]
