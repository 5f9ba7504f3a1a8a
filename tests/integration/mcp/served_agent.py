"""A scripted agent served over MCP (stdio, or HTTP in-process) for the server tests.

Run as a script, it serves over stdio: ``python served_agent.py <marker dir>``.
Its model answers three calls in order: a greeting; a call to ``slow_lookup``
(which writes ``started`` into the marker directory, then waits, and writes
``cancelled`` if it is cancelled); and ``still serving``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from helikon import LlmAgent, tool
from helikon.mcp import McpAgentServer
from helikon.testing import MockModel, call_tools, say


def build(markers: Path) -> McpAgentServer[None]:
    @tool
    async def slow_lookup(topic: str) -> str:
        """Look a topic up in the slow archive.

        Args:
            topic: What to look up.
        """
        (markers / "started").write_text(topic)
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            (markers / "cancelled").write_text(topic)
            raise
        return "found nothing"

    model = MockModel(
        [
            say("Hello from the budget assistant!"),
            call_tools(("slow_lookup", {"topic": "archive"})),
            say("still serving"),
        ]
    )
    agent = LlmAgent(
        name="budget assistant",
        description="Answers questions about your budget.",
        model=model,
        tools=[slow_lookup],
    )
    return McpAgentServer(agent, name="budget-server", version="9.9.9")


if __name__ == "__main__":
    anyio.run(build(Path(sys.argv[1])).serve_stdio)
