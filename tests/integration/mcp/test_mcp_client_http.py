"""An agent using ``@modelcontextprotocol/server-everything`` over streamable HTTP.

The server runs in its ``streamableHttp`` mode on a free 127.0.0.1 port
(``loopback.cjs`` keeps it off other interfaces). Killing it mid-call shows
the HTTP side of "no hang": the call in flight and every later call fail as
tool errors within seconds, and the user's task is never cancelled from
the side by the transport's failure.
"""

from __future__ import annotations

import time

import anyio
import pytest
from mcp_support import Servers, everything_http, run, tool_ctx

from helikon import LlmAgent, RunContext, RunError, ToolOutputItem, collect
from helikon.cancel import CancellationToken
from helikon.errors import Cancelled
from helikon.mcp import McpServerHandle
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

LONG = "trigger-long-running-operation"


def outputs(events: tuple[object, ...]) -> dict[str, tuple[object, bool]]:
    return {e.item.name: (e.item.content, e.item.is_error) for e in events if isinstance(e, ToolOutputItem)}


def test_tools_are_listed_and_called_over_http(servers: Servers) -> None:
    model = MockModel(
        [
            call_tools(("get-sum", {"a": 1, "b": 2}), ("echo", {"message": "over HTTP"})),
            call_tools(("get-structured-content", {"location": "Los Angeles"})),
            say("Done."),
        ]
    )

    async def main() -> tuple[object, ...]:
        with everything_http(servers) as server:
            async with McpServerHandle.streamable_http(
                server.url, headers={"X-Client": "helikon-tests"}
            ) as handle:
                assert {"echo", "get-sum", LONG} <= {t.name for t in handle.tools()}
                agent = LlmAgent(name="assistant", model=model, tool_sources=[handle])
                return (await collect(agent.run(None, "Go."))).events

    seen = outputs(run(main))
    assert seen["get-sum"] == ("The sum of 1 and 2 is 3.", False)
    assert seen["echo"] == ("Echo: over HTTP", False)
    assert seen["get-structured-content"][1] is False and "humidity" in str(seen["get-structured-content"][0])


def test_a_long_http_call_is_cancelled_with_the_run(servers: Servers) -> None:
    async def main() -> None:
        with everything_http(servers) as server:
            async with McpServerHandle.streamable_http(server.url) as handle:
                token = CancellationToken()
                model = MockModel([call_tools((LONG, {"duration": 30, "steps": 3})), say("never")])
                agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])
                started = time.monotonic()
                async with anyio.create_task_group() as group:
                    group.start_soon(_later, 0.5, token.cancel)
                    with pytest.raises(RunError) as failed:
                        await collect(agent.run(RunContext.ephemeral(None).with_cancel(token), "Go."))
                assert failed.value.error == Cancelled() and time.monotonic() - started < 5
                echo = next(t for t in handle.tools() if t.name == "echo")
                assert await echo.invoke(tool_ctx(), {"message": "still here"}) == "Echo: still here"

    run(main)


def test_an_http_server_that_dies_mid_call_fails_the_calls_promptly(servers: Servers) -> None:
    async def main() -> None:
        with everything_http(servers) as server:
            handle = McpServerHandle.streamable_http(server.url)
            async with handle:
                model = MockModel(
                    [
                        call_tools((LONG, {"duration": 30, "steps": 3})),
                        call_tools(("echo", {"message": "anyone?"})),
                        say("The tool server is down."),
                    ]
                )
                agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])

                async def kill_soon() -> None:
                    await anyio.sleep(0.5)
                    await anyio.to_thread.run_sync(server.kill)

                started = time.monotonic()
                with anyio.fail_after(20):
                    async with anyio.create_task_group() as group:
                        group.start_soon(kill_soon)
                        result = await collect(agent.run(None, "Go."))
                assert time.monotonic() - started < 15
                seen = outputs(result.events)
                for name in (LONG, "echo"):
                    content, is_error = seen[name]
                    assert is_error and f"the MCP server at {server.url} is not connected" in str(content), (
                        content
                    )
                assert result.final_output == "The tool server is down."
            with anyio.fail_after(10):
                await handle.close()

    run(main)


async def _later(seconds: float, action: object) -> None:
    await anyio.sleep(seconds)
    action()  # type: ignore[operator]
