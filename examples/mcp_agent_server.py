"""Serve a helikon agent over MCP, so any MCP client can call it as a tool.

Install the ``mcp`` extra. Three ways to run it (no network, no API key: the
served agent's model is scripted):

- ``python examples/mcp_agent_server.py --stdio``: serve over stdin/stdout,
  the way an MCP client (an IDE, a desktop assistant) launches a server;
- ``python examples/mcp_agent_server.py --http 8000``: serve over streamable
  HTTP at ``http://127.0.0.1:8000/mcp`` until Ctrl-C;
- ``python examples/mcp_agent_server.py``: a demo of both. It serves over
  HTTP in-process and calls the agent with the official ``mcp`` client, then
  starts itself with ``--stdio`` as a child process and lets another helikon
  agent use it through :class:`~helikon.mcp.McpServerHandle`.
"""

from __future__ import annotations

import contextlib
import sys

import anyio
from mcp import Client, types

from helikon import LlmAgent, ToolOutputItem, collect, tool
from helikon.mcp import McpAgentServer, McpServerHandle
from helikon.testing import MockModel, call_tools, say


@tool
def lookup_spending(category: str) -> str:
    """This month's spending in a category.

    Args:
        category: A budget category, e.g. "groceries".
    """
    return {"groceries": "$412", "dining": "$180"}.get(category.lower(), "$0")


def budget_server() -> McpAgentServer[None]:
    """The served agent: a budget assistant (scripted for one question)."""
    model = MockModel(
        [
            call_tools(("lookup_spending", {"category": "groceries"})),
            say("You spent $412 on groceries this month, $38 under budget."),
        ]
    )
    agent = LlmAgent(
        name="budget assistant",
        description="Answers questions about the user's monthly budget.",
        instructions="You are a budgeting assistant.",
        model=model,
        tools=[lookup_spending],
    )
    # Each call gets its run context from the factory (here the user context
    # is just a name); RunConfig.timeout, when set, bounds every call.
    return McpAgentServer(agent, context=lambda: "demo user", name="budget-server")


async def demo() -> None:
    # 1. Streamable HTTP on a free port of 127.0.0.1, called with the official client.
    async with anyio.create_task_group() as group:
        url = await group.start(budget_server().serve_streamable_http, "127.0.0.1", 0)
        print(f"serving at {url}")
        async with Client(url) as client:
            (listed,) = (await client.list_tools()).tools
            print(f"the server lists one tool: {listed.name} {listed.input_schema['required']}")
            answer = await client.call_tool(listed.name, {"input": "How much did I spend on groceries?"})
            block = answer.content[0]
            print(f"HTTP answer: {block.text if isinstance(block, types.TextContent) else block}")
        group.cancel_scope.cancel()

    # 2. Stdio: this script as a child process, used by another helikon agent.
    child = McpServerHandle.stdio(sys.executable, args=[__file__, "--stdio"])
    async with child:
        front_desk = LlmAgent(
            name="front desk",
            model=MockModel(
                [
                    call_tools(("budget_assistant", {"input": "How much did I spend on groceries?"})),
                    say("Your budget assistant says you spent $412 on groceries."),
                ]
            ),
            mcp_servers=[child],
        )
        result = await collect(front_desk.run(None, "Ask my budget assistant about groceries."))
    for event in result.events:
        if isinstance(event, ToolOutputItem):
            print(f"stdio answer: {event.item.content}")
    print(result.final_output)


if __name__ == "__main__":
    if "--stdio" in sys.argv:
        anyio.run(budget_server().serve_stdio)
    elif "--http" in sys.argv:
        rest = sys.argv[sys.argv.index("--http") + 1 :]
        port = int(rest[0]) if rest else 8000
        print(f"serving at http://127.0.0.1:{port}/mcp (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(budget_server().serve_streamable_http, "127.0.0.1", port)
    else:
        anyio.run(demo)
