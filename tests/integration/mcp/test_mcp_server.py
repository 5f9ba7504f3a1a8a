"""An agent served over MCP, driven by the official ``mcp`` Python client.

Over stdio (the server a child process, ``served_agent.py``) and over
streamable HTTP (uvicorn in-process on a free 127.0.0.1 port): initialize,
list the one tool, call it for the agent's answer, cancel a call mid-run
(the run's tool sees the cancellation), and keep serving afterwards.
``RunConfig.timeout`` turns a run that takes too long into an error result.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError
from mcp_support import run
from served_agent import build
from starlette.applications import Starlette
from starlette.routing import Mount

from helikon import LlmAgent, RunConfig, ToolOutputItem, collect
from helikon.mcp import McpAgentServer, McpError, McpErrorKind, McpServerHandle
from helikon.testing import MockModel, Pause, call_tools, say

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parent / "served_agent.py"
INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The request for the agent, in plain text."}},
    "required": ["input"],
    "additionalProperties": False,
}


def text(result: mcp_types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def wait_for(path: Path, timeout: float = 10.0) -> str:
    with anyio.fail_after(timeout):
        while not path.exists():
            await anyio.sleep(0.02)
    return path.read_text()


async def exercise(client: Client, markers: Path) -> None:
    """The conversation both transports must support."""
    assert client.server_info is not None
    assert (client.server_info.name, client.server_info.version) == ("budget-server", "9.9.9")
    (tool,) = (await client.list_tools()).tools
    assert tool.name == "budget_assistant" and tool.description == "Answers questions about your budget."
    assert tool.input_schema == INPUT_SCHEMA

    answer = await client.call_tool("budget_assistant", {"input": "Hi!"})
    assert not answer.is_error and text(answer) == "Hello from the budget assistant!"

    # A call cancelled mid-run: the client stops waiting and tells the server,
    # which cancels the run; the run's tool sees the cancellation.
    with anyio.move_on_after(15) as scope:
        async with anyio.create_task_group() as group:

            async def cancel_once_started() -> None:
                await wait_for(markers / "started")
                group.cancel_scope.cancel()

            group.start_soon(cancel_once_started)
            await client.call_tool("budget_assistant", {"input": "Look it up."})
            raise AssertionError("the slow call answered before it was cancelled")
    assert not scope.cancelled_caught
    assert await wait_for(markers / "cancelled", timeout=3) == "archive"  # well before WIND_DOWN_S

    again = await client.call_tool("budget_assistant", {"input": "Still there?"})
    assert text(again) == "still serving"
    with pytest.raises(MCPError) as wrong:  # the input schema refuses it: invalid params
        await client.call_tool("budget_assistant", {"question": "no input"})
    assert wrong.value.code == -32602


def test_the_agent_served_over_stdio(tmp_path: Path) -> None:
    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(SCRIPT), str(tmp_path)])
        async with Client(params) as client:
            await exercise(client, tmp_path)

    run(main)


def test_the_agent_served_over_streamable_http(tmp_path: Path) -> None:
    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await group.start(build(tmp_path).serve_streamable_http, "127.0.0.1", 0)
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            async with Client(url) as client:
                await exercise(client, tmp_path)
            # DNS-rebinding protection: a foreign Host header is refused.
            async with httpx.AsyncClient() as http:
                refused = await http.post(url, headers={"Host": "evil.example"}, json={})
            assert refused.status_code in (400, 403, 421)
            group.cancel_scope.cancel()

    run(main)


def test_run_config_timeout_is_enforced_at_the_boundary() -> None:
    slow = LlmAgent(name="slow", model=MockModel([[Pause(30), *say("too late")]]))
    server = McpAgentServer(slow, config=RunConfig(timeout=0.5))

    async def main() -> tuple[mcp_types.CallToolResult, float]:
        async with anyio.create_task_group() as group:
            url = await group.start(server.serve_streamable_http, "127.0.0.1", 0)
            async with Client(url) as client:
                started = time.monotonic()
                result = await client.call_tool("slow", {"input": "Take your time."})
                elapsed = time.monotonic() - started
            group.cancel_scope.cancel()
        return result, elapsed

    result, elapsed = run(main)
    assert result.is_error and "timed out after 0.5 s" in text(result)
    assert elapsed < 5


def test_the_asgi_app_mounts_in_another_app_and_a_helikon_agent_calls_it(tmp_path: Path) -> None:
    """The ASGI app under ``/agents`` of a parent app; a helikon agent uses it
    through McpServerHandle, and the handle's headers reach the server."""
    served = build(tmp_path).asgi_app()
    seen_headers: list[dict[str, str]] = []

    async def record_headers(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen_headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await served(scope, receive, send)

    async def lifespan(app: Starlette) -> Any:
        async with served.router.lifespan_context(served):
            yield

    from contextlib import asynccontextmanager

    parent = Starlette(routes=[Mount("/agents", app=record_headers)], lifespan=asynccontextmanager(lifespan))
    model = MockModel([call_tools(("budget_assistant", {"input": "Hi!"})), say("It said hello.")])

    async def main() -> tuple[Any, ...]:
        config = uvicorn.Config(parent, host="127.0.0.1", port=0, log_level="warning")
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve)
            with anyio.fail_after(10):
                while not server.started:
                    await anyio.sleep(0.02)
            port = server.servers[0].sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}/agents/mcp"
            async with McpServerHandle.streamable_http(
                url, headers={"Authorization": "Bearer t0ken"}
            ) as handle:
                agent = LlmAgent(name="front-desk", model=model, mcp_servers=[handle])
                result = await collect(agent.run(None, "Say hi to the budget assistant."))
            server.should_exit = True
        return result.final_output, result.events

    final, events = run(main)
    assert final == "It said hello."
    (output,) = [e.item for e in events if isinstance(e, ToolOutputItem)]
    assert (output.name, output.content, output.is_error) == (
        "budget_assistant",
        "Hello from the budget assistant!",
        False,
    )
    assert seen_headers and all(h.get("authorization") == "Bearer t0ken" for h in seen_headers)


def test_a_port_in_use_is_a_bind_error() -> None:
    server = McpAgentServer(LlmAgent(name="a", model=MockModel()))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await group.start(server.serve_streamable_http, "127.0.0.1", 0)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            with pytest.raises(McpError) as taken:
                await server.serve_streamable_http("127.0.0.1", port)
            assert taken.value.kind is McpErrorKind.BIND and "pass port=0" in str(taken.value)
            group.cancel_scope.cancel()

    run(main)
