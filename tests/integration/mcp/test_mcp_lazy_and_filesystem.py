"""Lazy mode against server-everything, and an agent on
``@modelcontextprotocol/server-filesystem`` under helikon's governance.

MCP tools sit in the agent's tool map like local tools, so the permission
pipeline judges them the same way: ``PLAN`` lets the read-only ones through
and denies the rest, a deny rule names them like any tool, and since an MCP
tool is never ``WRITE``, ``ACCEPT_EDITS`` does not auto-approve a remote
write (the policy is asked, and here it says no).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_support import Servers, run, tool_ctx

from helikon import (
    Allow,
    Deny,
    DenyRule,
    LlmAgent,
    PermissionDenied,
    PermissionMode,
    RunContext,
    ToolEffect,
    ToolOutputItem,
    collect,
)
from helikon.mcp import McpTool, SearchToolsTool
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

NOTES = '{"content":"Pay rent on the 1st.\\n"}'
PLACEHOLDER = {"type": "object", "additionalProperties": True}


def outputs(events: tuple[object, ...]) -> list[tuple[str, object, bool]]:
    return [(e.item.name, e.item.content, e.item.is_error) for e in events if isinstance(e, ToolOutputItem)]


def test_lazy_mode_offers_placeholders_and_a_prefixed_search_tools(servers: Servers) -> None:
    model = MockModel(
        [
            call_tools(("ev_search_tools", {"query": "SUM"})),
            call_tools(("ev_get-sum", {"a": 20, "b": 22})),
            say("20 + 22 = 42"),
        ]
    )

    async def main() -> tuple[Any, ...]:
        async with servers.everything_stdio(tool_prefix="ev_", lazy=True) as handle:
            tools = handle.tools()
            assert isinstance(tools[-1], SearchToolsTool) and tools[-1].name == "ev_search_tools"
            assert tools[-1].effect is ToolEffect.READ_ONLY
            remote = [t for t in tools if isinstance(t, McpTool)]
            assert len(remote) == len(tools) - 1 and all(t.parameters == PLACEHOLDER for t in remote)

            search = tools[-1]
            everything = await search.invoke(tool_ctx(), {"query": ""})
            assert everything["total_matches"] == len(remote) and "truncated" not in everything
            echoes = await search.invoke(tool_ctx(), {"query": "EcHo"})
            assert [t["name"] for t in echoes["tools"]] == ["ev_echo"]  # name or description, any case

            agent = LlmAgent(name="assistant", model=model, mcp_servers=[handle])
            result = await collect(agent.run(None, "What is 20 + 22?"))
            return result.final_output, result.events, len(remote)

    final, events, count = run(main)
    assert final == "20 + 22 = 42"
    (_, found, failed), (_, total, _) = outputs(events)
    assert not failed and '"total_matches":1' in str(found) and '"name":"ev_get-sum"' in str(found)
    # search_tools answers the real schema the placeholder hides.
    assert '"required":["a","b"]' in str(found)
    assert total == "The sum of 20 and 22 is 42."
    offered = {t.name: t.parameters for t in model.requests[0].tools}
    assert len(offered) == count + 1 and offered["ev_get-sum"] == PLACEHOLDER


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "notes.txt").write_text("Pay rent on the 1st.\n")
    (tmp_path / "secret.txt").write_text("outside the workspace\n")
    return root.resolve()


def test_an_agent_reads_lists_and_writes_through_the_filesystem_server(
    servers: Servers, workspace: Path
) -> None:
    model = MockModel(
        [
            call_tools(
                ("fs_list_directory", {"path": str(workspace)}),
                ("fs_read_text_file", {"path": str(workspace / "notes.txt")}),
                ("fs_read_text_file", {"path": str(workspace.parent / "secret.txt")}),
            ),
            call_tools(("fs_write_file", {"path": str(workspace / "todo.txt"), "content": "Pay rent\n"})),
            say("Noted."),
        ]
    )

    async def main() -> tuple[Any, ...]:
        async with servers.filesystem_stdio(workspace, tool_prefix="fs_") as handle:
            tools = {t.name: t for t in handle.tools()}
            assert tools["fs_read_text_file"].effect is ToolEffect.READ_ONLY
            assert tools["fs_write_file"].effect is ToolEffect.SIDE_EFFECT  # never WRITE
            agent = LlmAgent(name="assistant", model=model, tool_sources=[handle])
            return (await collect(agent.run(None, "Put the rent on my todo list."))).events

    listing, notes, secret, written = outputs(run(main))
    assert listing[2] is False and "[FILE] notes.txt" in str(listing[1])
    assert notes[1:] == (NOTES, False)  # the server's structured content, as JSON
    assert secret[2] is True and "outside allowed directories" in str(secret[1])  # the server's isError
    assert written[2] is False and (workspace / "todo.txt").read_text() == "Pay rent\n"


def _write_attempt(workspace: Path) -> MockModel:
    return MockModel(
        [
            call_tools(
                ("fs_read_text_file", {"path": str(workspace / "notes.txt")}),
                ("fs_write_file", {"path": str(workspace / "notes.txt"), "content": "wiped"}),
            ),
            say("Done."),
        ]
    )


@pytest.mark.parametrize(
    "governed",
    [
        pytest.param(
            lambda ctx: ctx.with_permission_mode(PermissionMode.PLAN).with_permission_policy(
                lambda *_: Allow()
            ),
            id="plan-mode-even-when-the-policy-allows",
        ),
        pytest.param(lambda ctx: ctx.with_deny_rules([DenyRule.tool("fs_write_file")]), id="deny-rule"),
        pytest.param(
            lambda ctx: ctx.with_permission_mode(PermissionMode.ACCEPT_EDITS).with_permission_policy(
                lambda _ctx, tool, _args: Deny("remote writes need a human") if "write" in tool else Allow()
            ),
            id="accept-edits-asks-the-policy",
        ),
    ],
)
def test_mcp_tools_go_through_the_permission_pipeline(
    servers: Servers, workspace: Path, governed: Any
) -> None:
    async def main() -> tuple[Any, ...]:
        async with servers.filesystem_stdio(workspace, tool_prefix="fs_") as handle:
            agent = LlmAgent(name="assistant", model=_write_attempt(workspace), mcp_servers=[handle])
            ctx = governed(RunContext.ephemeral(None))
            return (await collect(agent.run(ctx, "Wipe my notes."))).events

    events = run(main)
    denied = [e for e in events if isinstance(e, PermissionDenied)]
    assert [d.tool for d in denied] == ["fs_write_file"]
    read, write = outputs(events)
    assert read[1:] == (NOTES, False) and write[2] is True
    assert (workspace / "notes.txt").read_text() == "Pay rent on the 1st.\n"
