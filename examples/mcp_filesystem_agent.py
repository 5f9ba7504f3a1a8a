"""An agent that uses an MCP server's tools: ``@modelcontextprotocol/server-filesystem``.

Run it with ``python examples/mcp_filesystem_agent.py`` (install the ``mcp``
extra; the server needs Node.js). The model is scripted, so no API key is
needed. The server is found, in this order:

- ``$HELIKON_MCP_SERVERS``: a directory where the server is installed
  (``python3 tests/integration/mcp/npm_servers.py`` makes one);
- ``npx --no-install @modelcontextprotocol/server-filesystem``: an install
  npx can find without downloading (``npm install -g ...`` or a local one).

When neither works the example says so and exits cleanly. In your own code
you would usually write ``McpServerHandle.stdio("npx", args=["-y",
"@modelcontextprotocol/server-filesystem", root])``.

The server's tools arrive prefixed (``fs_read_text_file``, ...) and go through
the same permission pipeline as local tools: here a deny rule forbids
``fs_move_file``, and the refusal reaches the model as a tool result.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

from helikon import DenyRule, LlmAgent, RunContext, ToolCallItem, ToolOutputItem, collect
from helikon.mcp import McpError, McpServerHandle
from helikon.testing import MockModel, call_tools, say

PACKAGE = "@modelcontextprotocol/server-filesystem"


def server_command(root: Path) -> tuple[str, list[str]] | None:
    """How to start the filesystem server on ``root``, or ``None``."""
    installed = os.environ.get("HELIKON_MCP_SERVERS")
    if installed:
        entry = Path(installed) / "node_modules" / PACKAGE / "dist" / "index.js"
        if entry.is_file() and shutil.which("node"):
            return "node", [str(entry), str(root)]
    if shutil.which("npx"):
        return "npx", ["--no-install", PACKAGE, str(root)]
    return None


def scripted_model(root: Path) -> MockModel:
    return MockModel(
        [
            call_tools(("fs_list_directory", {"path": str(root)})),
            call_tools(
                ("fs_read_text_file", {"path": str(root / "bills.txt")}),
                ("fs_move_file", {"source": str(root / "bills.txt"), "destination": str(root / "old.txt")}),
            ),
            call_tools(
                ("fs_write_file", {"path": str(root / "summary.txt"), "content": "Bills due: $1,450\n"})
            ),
            say("Your bills add up to $1,450; I saved that in summary.txt."),
        ]
    )


async def main(root: Path) -> int:
    (root / "bills.txt").write_text("rent: $1,200\npower: $90\ninternet: $60\nphone: $100\n")
    command = server_command(root)
    if command is None:
        print(f"skipping: {PACKAGE} needs Node.js (node or npx on PATH); see the docstring")
        return 0
    program, args = command
    handle = McpServerHandle.stdio(program, args=args, tool_prefix="fs_", stderr=sys.stderr)
    try:
        await handle.connect()
    except McpError as exc:
        print(f"skipping: could not start {PACKAGE} ({exc.kind.value}): {exc}")
        return 0
    async with handle:
        print(f"connected to {handle.server_info.name if handle.server_info else 'the server'}:")
        for tool in handle.tools():
            print(f"  {tool.name:<32} {tool.effect.name}")
        agent = LlmAgent(
            name="bookkeeper",
            instructions="You keep the user's household files tidy.",
            model=scripted_model(root),
            mcp_servers=[handle],
        )
        ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.tool("fs_move_file")])
        result = await collect(agent.run(ctx, "Add up my bills and write a summary."))
    for event in result.events:
        if isinstance(event, ToolCallItem):
            print(f"-> {event.item.name}")
        elif isinstance(event, ToolOutputItem):
            flag = " (error)" if event.item.is_error else ""
            print(f"<- {event.item.name}{flag}: {str(event.item.content).strip()[:80]}")
    print(result.final_output)
    print(f"summary.txt: {(root / 'summary.txt').read_text().strip()}")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workspace:
        sys.exit(anyio.run(main, Path(workspace).resolve()))
