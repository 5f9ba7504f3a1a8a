"""An agent using ``@modelcontextprotocol/server-everything`` over stdio.

The server is the MCP project's own reference server, run with the
machine's Node.js: tools are listed, adapted and called as a real client
would, errors come back as tool errors, a long call is cancelled, and a
server killed mid-call gives a prompt, clear error instead of a hang.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from mcp_support import Servers, pid_alive, run, tool_ctx

from helikon import LlmAgent, RunContext, RunError, ToolEffect, ToolError, ToolOutputItem, collect
from helikon.cancel import CancellationToken
from helikon.errors import Cancelled
from helikon.mcp import McpError, McpErrorKind, McpServerHandle, McpTool
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

LONG = "ev_trigger-long-running-operation"


def outputs(events: tuple[object, ...]) -> dict[str, tuple[object, bool]]:
    return {e.item.name: (e.item.content, e.item.is_error) for e in events if isinstance(e, ToolOutputItem)}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_servers_tools_arrive_prefixed_with_their_schemas_and_effects(
    servers: Servers, backend: str
) -> None:
    async def main() -> None:
        async with servers.everything_stdio(tool_prefix="ev_") as handle:
            tools = {t.name: t for t in handle.tools()}
            assert handle.server_info is not None and handle.server_info.name == "mcp-servers/everything"
            assert {"ev_echo", "ev_get-sum", "ev_get-tiny-image", LONG} <= set(tools)
            assert all(isinstance(t, McpTool) for t in tools.values())
            echo = tools["ev_echo"]
            assert echo.remote_name == "echo" and echo.description == "Echoes back the input string"
            assert echo.parameters["properties"] == {
                "message": {"type": "string", "description": "Message to echo"}
            }
            # readOnlyHint true -> READ_ONLY; false -> SIDE_EFFECT; never WRITE.
            assert echo.effect is ToolEffect.READ_ONLY
            assert tools["ev_toggle-simulated-logging"].effect is ToolEffect.SIDE_EFFECT
            assert ToolEffect.WRITE not in {t.effect for t in tools.values()}

    run(main, backend)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_agent_calls_several_tools_and_reads_text_structured_and_image_results(
    servers: Servers, backend: str
) -> None:
    model = MockModel(
        [
            call_tools(
                ("ev_get-sum", {"a": 2, "b": 40}),
                ("ev_echo", {"message": "over stdio"}),
                ("ev_get-structured-content", {"location": "Chicago"}),
                ("ev_get-tiny-image", {}),
            ),
            say("2 + 40 = 42"),
        ]
    )

    async def main() -> tuple[str, tuple[object, ...]]:
        async with servers.everything_stdio(tool_prefix="ev_") as handle:
            agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])
            result = await collect(agent.run(None, "Add 2 and 40."))
            return result.final_output, result.events

    final, events = run(main, backend)
    assert final == "2 + 40 = 42"
    seen = outputs(events)
    assert seen["ev_get-sum"] == ("The sum of 2 and 40 is 42.", False)
    assert seen["ev_echo"] == ("Echo: over stdio", False)
    structured, failed = seen["ev_get-structured-content"]
    assert not failed and '"conditions"' in str(structured) and '"temperature"' in str(structured)
    image, _ = seen["ev_get-tiny-image"]
    assert "[image: image/png," in str(image) and "iVBOR" not in str(image)
    # The model was offered the remote tools with their real schemas.
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["ev_get-sum"].parameters["required"] == ["a", "b"]


def test_an_is_error_result_is_a_tool_error_the_model_sees(servers: Servers) -> None:
    async def main() -> None:
        async with servers.everything_stdio(lazy=True) as handle:
            # Lazy mode skips helikon's own schema check, so the server judges the arguments.
            tool = next(t for t in handle.tools() if t.name == "get-sum")
            with pytest.raises(ToolError, match="Input validation error"):
                await tool.invoke(tool_ctx(), {"a": "two"})
            model = MockModel([call_tools(("get-sum", {"a": "two", "b": 1})), say("I could not add those.")])
            agent = LlmAgent(name="assistant", model=model, tool_sources=[handle])
            result = await collect(agent.run(None, "Add two and 1."))
            content, is_error = outputs(result.events)["get-sum"]
            assert is_error and "Invalid arguments for tool get-sum" in str(content)
            assert result.final_output == "I could not add those."

    run(main)


def test_cancelling_the_run_cancels_a_long_running_call_and_the_connection_lives_on(servers: Servers) -> None:
    async def main() -> None:
        async with servers.everything_stdio(tool_prefix="ev_") as handle:
            token = CancellationToken()
            model = MockModel([call_tools((LONG, {"duration": 30, "steps": 3})), say("never")])
            agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])

            async def cancel_soon() -> None:
                await anyio.sleep(0.5)
                token.cancel()

            started = time.monotonic()
            async with anyio.create_task_group() as group:
                group.start_soon(cancel_soon)
                with pytest.raises(RunError) as failed:
                    await collect(agent.run(RunContext.ephemeral(None).with_cancel(token), "Go."))
            assert failed.value.error == Cancelled()
            assert time.monotonic() - started < 5
            # The call was abandoned cleanly: the same connection still answers.
            echo = next(t for t in handle.tools() if t.name == "ev_echo")
            assert await echo.invoke(tool_ctx(), {"message": "still here"}) == "Echo: still here"
            # A tool invoked directly races its context's token too.
            direct = CancellationToken()
            long = next(t for t in handle.tools() if t.name == LONG)
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: _later(0.3, direct.cancel))
                with pytest.raises(ToolError, match="was cancelled"):
                    await long.invoke(tool_ctx(direct), {"duration": 30, "steps": 3})

    run(main)


async def gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` seconds (dying takes a moment)."""
    with anyio.move_on_after(timeout):
        while pid_alive(pid):
            await anyio.sleep(0.05)
        return True
    return False


async def _later(seconds: float, action: object) -> None:
    await anyio.sleep(seconds)
    action()  # type: ignore[operator]


def test_a_server_killed_mid_call_gives_a_clear_error_and_the_run_goes_on(
    servers: Servers, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"

    async def main() -> None:
        handle = servers.everything_stdio_with_pid(pid_file, tool_prefix="ev_")
        async with handle:
            pid = int(pid_file.read_text())
            model = MockModel(
                [
                    call_tools((LONG, {"duration": 30, "steps": 3})),
                    call_tools(("ev_echo", {"message": "anyone?"})),
                    say("The tool server went away."),
                ]
            )
            agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])

            async def kill_soon() -> None:
                await anyio.sleep(0.5)
                os.kill(pid, signal.SIGKILL)

            started = time.monotonic()
            with anyio.fail_after(15):
                async with anyio.create_task_group() as group:
                    group.start_soon(kill_soon)
                    result = await collect(agent.run(None, "Go."))
            assert time.monotonic() - started < 10
            seen = outputs(result.events)
            for name in (LONG, "ev_echo"):
                content, is_error = seen[name]
                assert is_error and "stdio server 'sh' is not connected: it exited" in str(content), content
            assert result.final_output == "The tool server went away."
            assert await gone(pid)
        with anyio.fail_after(10):
            await handle.close()  # closing a dead connection is quick, and idempotent

    run(main)


def test_two_servers_with_the_same_tool_names_need_a_prefix(servers: Servers) -> None:
    async def main() -> None:
        async with servers.everything_stdio() as first, servers.everything_stdio() as second:
            agent = LlmAgent(name="assistant", model=MockModel(), tool_sources=[first, second])
            with pytest.raises(Exception, match=r"two tools are named 'echo'.*tool_prefix") as clash:
                await agent.resolved()
            assert type(clash.value).__name__ == "ConfigError"
            async with servers.everything_stdio(tool_prefix="b_") as prefixed:
                resolved = await LlmAgent(
                    name="assistant", model=MockModel(), tool_sources=[first, prefixed]
                ).resolved()
                assert {"echo", "b_echo"} <= set(resolved.tool_map)
                assert resolved.tool_sources == () and len(resolved.spec.tools) == 2 * len(first.tools())

    run(main)


def test_a_handle_connects_when_the_agent_resolves_it_and_fails_cleanly_after_close(servers: Servers) -> None:
    async def main() -> None:
        handle = servers.everything_stdio()
        agent = LlmAgent(name="assistant", model=MockModel([say("hi")]), mcp_servers=[handle])
        assert not handle.connected
        resolved = await agent.resolved()
        assert handle.connected and "echo" in resolved.tool_map
        echo = resolved.tool_map["echo"]
        await handle.close()
        assert not handle.connected
        with pytest.raises(ToolError, match="is not connected"):
            await echo.invoke(tool_ctx(), {"message": "hello?"})
        with pytest.raises(McpError) as closed:
            await handle.connect()
        assert closed.value.kind is McpErrorKind.OTHER and "make a new one" in str(closed.value)
        with pytest.raises(McpError, match="not connected"):
            handle.tools()

    run(main)


def test_agents_resolving_one_handle_at_once_share_its_single_connection(servers: Servers) -> None:
    async def main() -> None:
        handle = servers.everything_stdio()
        agents = [LlmAgent(name=f"agent-{i}", model=MockModel(), mcp_servers=[handle]) for i in range(3)]
        resolved: list[LlmAgent[None]] = []

        async def resolve(agent: LlmAgent[None]) -> None:
            resolved.append(await agent.resolved())

        async with anyio.create_task_group() as group:
            for agent in agents:
                group.start_soon(resolve, agent)
        tools = [agent.tool_map["echo"] for agent in resolved]
        assert len(resolved) == 3 and len({id(t.connection) for t in tools}) == 1  # type: ignore[attr-defined]
        assert await tools[0].invoke(tool_ctx(), {"message": "one server"}) == "Echo: one server"
        await handle.close()

    run(main)


def test_connect_failures_say_which_step_failed(tmp_path: Path) -> None:
    async def main() -> None:
        with pytest.raises(McpError) as spawn:
            await McpServerHandle.stdio("helikon-no-such-mcp-server")
        assert spawn.value.kind is McpErrorKind.SPAWN and "is the command installed and on PATH?" in str(
            spawn.value
        )

        with pytest.raises(McpError) as exited:
            await McpServerHandle.stdio("node", args=["-e", "process.exit(3)"])
        assert exited.value.kind is McpErrorKind.CONNECT and "closed the connection" in str(exited.value)

        started = time.monotonic()
        with pytest.raises(McpError) as silent:
            # Reads its stdin and never answers (and exits when stdin closes, so closing is quick).
            mute = "process.stdin.on('data', () => {}); process.stdin.on('end', () => process.exit(0))"
            await McpServerHandle.stdio("node", args=["-e", mute], connect_timeout=1)
        assert silent.value.kind is McpErrorKind.CONNECT and "within 1 s" in str(silent.value)
        assert time.monotonic() - started < 8

        with pytest.raises(McpError) as unreachable:
            await McpServerHandle.streamable_http("http://127.0.0.1:9/mcp")
        assert unreachable.value.kind is McpErrorKind.CONNECT and "127.0.0.1:9" in str(unreachable.value)

    run(main)
