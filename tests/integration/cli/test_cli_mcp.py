"""``helikon mcp serve``: a sidecar agent answered by the official ``mcp`` client, over stdio and HTTP."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from cli_support import HELIKON, env, free_port, project
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.integration


def text(result: mcp_types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def test_mcp_serve_over_stdio(tmp_path: Path) -> None:
    project(tmp_path)
    params = StdioServerParameters(
        command=str(HELIKON),
        args=["mcp", "serve", "--agents", str(tmp_path / "agents.toml"), "--agent", "triage"],
        env=env(tmp_path),
        cwd=str(tmp_path),
    )

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                assert client.server_info is not None and client.server_info.name == "triage"
                (tool,) = (await client.list_tools()).tools
                assert tool.name == "triage" and tool.description == "Routes personal-finance questions"
                answer = await client.call_tool("triage", {"input": "How much did I spend?"})
                assert not answer.is_error and text(answer) == "You spent $412 in November."
                # The scripted model is used up: the next call is an error result; the server goes on.
                again = await client.call_tool("triage", {"input": "And again?"})
                assert again.is_error and "no script left" in text(again)
                with pytest.raises(MCPError) as refused:  # the schema says 'input' is required
                    await client.call_tool("triage", {})
                assert refused.value.code == -32602

    anyio.run(main)


def test_mcp_serve_over_http(tmp_path: Path) -> None:
    project(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [str(HELIKON), "mcp", "serve", "--agent", "budgeting", "--http", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "the server did not start listening"
            time.sleep(0.1)

        async def main() -> None:
            with anyio.fail_after(60):
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    answer = await client.call_tool("budgeting", {"input": "How much?"})
                    assert not answer.is_error and text(answer) == "You spent $412 in November."

        anyio.run(main)
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert f"serving budgeting at http://127.0.0.1:{port}/mcp" in stderr
    assert "Traceback" not in stderr


def test_a_bad_http_address_is_a_usage_error(tmp_path: Path) -> None:
    project(tmp_path)
    done = subprocess.run(
        [str(HELIKON), "mcp", "serve", "--agent", "budgeting", "--http", "nowhere"],
        cwd=tmp_path,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "must be HOST:PORT" in done.stderr
