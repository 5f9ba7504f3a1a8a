"""``McpAgentServer`` without a transport: what one ``tools/call`` answers.

The transports (stdio, streamable HTTP) are exercised with the official
client in ``tests/integration/mcp/test_mcp_server.py``; here the boundary's
rules are pinned down directly: the tool's shape, the answers and error
results, the context factory, and the timeout that no run can outlive.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import types

import helikon.mcp
import helikon.mcp._server as server_module
from helikon import ConfigError, LlmAgent, RunConfig, RunContext
from helikon.events import AgentEvent
from helikon.mcp import McpAgentServer, McpError, McpErrorKind, McpServerHandle, sanitize_tool_name
from helikon.testing import MockModel, Pause, say


def text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def call(
    server: McpAgentServer[Any], arguments: dict[str, Any], tool: str | None = None
) -> types.CallToolResult:
    return anyio.run(server.call, tool or server.tool_name, arguments)


def test_the_agent_is_one_tool_named_after_it_taking_one_input_string() -> None:
    agent = LlmAgent(name="budget assistant", description="Answers budget questions.", model=MockModel())
    server = McpAgentServer(agent)
    tool = server.tool()
    assert (tool.name, tool.description) == ("budget_assistant", "Answers budget questions.")
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "input": {"type": "string", "description": "The request for the agent, in plain text."}
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    assert McpAgentServer(LlmAgent(name="x", model=MockModel())).tool().description == "Ask the agent 'x'."


@pytest.mark.parametrize(
    ("name", "tool"),
    [("research-agent", "research-agent"), ("a.b/c d", "a_b_c_d"), ("émile", "_mile"), ("!!!", "agent")],
)
def test_tool_names_are_sanitised_to_letters_digits_underscores_and_dashes(name: str, tool: str) -> None:
    assert sanitize_tool_name(name) == tool


def test_a_call_runs_the_agent_and_answers_its_final_output() -> None:
    model = MockModel([say("You have $1,200 left.")])
    result = call(McpAgentServer(LlmAgent(name="budget", model=model)), {"input": "How much is left?"})
    assert not result.is_error and text(result) == "You have $1,200 left."
    assert model.requests[0].messages[-1].content[0].text == "How much is left?"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("other", {"input": "hi"}, "unknown tool 'other': this server has one tool, 'budget'"),
        (None, {}, "the argument 'input' must be a string"),
        (None, {"input": 3}, "the argument 'input' must be a string"),
        (None, {"input": "hi", "question": "x"}, "unexpected argument(s) 'question'"),
    ],
)
def test_unknown_tools_and_refused_arguments_are_invalid_params_errors(
    tool: str | None, arguments: dict[str, Any], words: str
) -> None:
    from mcp.shared.exceptions import MCPError

    server = McpAgentServer(LlmAgent(name="budget", model=MockModel([say("never")])))
    with pytest.raises(MCPError) as caught:
        call(server, arguments, tool=tool)
    assert caught.value.code == types.INVALID_PARAMS == -32602
    assert words in caught.value.message


def test_a_failed_run_is_an_error_result_not_an_exception() -> None:
    server = McpAgentServer(LlmAgent(name="budget", model=MockModel()))
    failed = call(server, {"input": "hi"})  # the mock model has no script: the run fails
    assert failed.is_error and text(failed).startswith("the agent run failed: model call failed")


def test_each_call_gets_a_context_from_the_factory() -> None:
    made: list[str] = []

    def factory() -> str:
        made.append(f"user-{len(made) + 1}")
        return made[-1]

    model = MockModel([say("one"), say("two")])
    agent = LlmAgent(name="budget", model=model, instructions=lambda ctx: f"You help {ctx.user_ctx}.")
    server = McpAgentServer(agent, context=factory)
    assert text(call(server, {"input": "a"})) == "one" and text(call(server, {"input": "b"})) == "two"
    assert made == ["user-1", "user-2"]
    systems = [r.instructions for r in model.requests]
    assert systems == ["You help user-1.", "You help user-2."]


def test_a_factory_may_return_a_whole_run_context_and_its_token_is_not_spent_by_a_call() -> None:
    shared = RunContext.ephemeral("ada")
    model = MockModel([[Pause(30), *say("late")], say("on time")])
    server = McpAgentServer(
        LlmAgent(name="budget", model=model), context=lambda: shared, config=RunConfig(timeout=0.2)
    )
    timed_out = call(server, {"input": "slow"})
    assert timed_out.is_error and "timed out after 0.2 s" in text(timed_out)
    # The timed-out call fired its own token, not the factory's.
    assert not shared.cancel.cancelled
    assert text(call(server, {"input": "fast"})) == "on time"


def test_the_timeout_cuts_off_a_run_that_ignores_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stubborn:
        name = "stubborn"
        description = "Never listens."

        def run(self, ctx: Any, input: Any, *, config: Any = None) -> AsyncIterator[AgentEvent]:
            async def events() -> AsyncIterator[AgentEvent]:
                await anyio.sleep(30)  # does not look at ctx.cancel
                yield None  # type: ignore[misc]

            return events()

    monkeypatch.setattr(server_module, "WIND_DOWN_S", 0.3)
    server = McpAgentServer(Stubborn(), config=RunConfig(timeout=0.2))
    started = time.monotonic()
    result = call(server, {"input": "go"})
    assert result.is_error and text(result) == "the agent run timed out after 0.2 s"
    assert time.monotonic() - started < 3


def test_the_timeout_comes_from_the_server_config_else_the_agents() -> None:
    agent = LlmAgent(name="a", model=MockModel(), config=RunConfig(timeout=7))
    assert McpAgentServer(agent).timeout == 7
    assert McpAgentServer(agent).with_run_config(RunConfig(timeout=2)).timeout == 2
    assert McpAgentServer(LlmAgent(name="a", model=MockModel())).timeout is None


def test_builder_methods_return_changed_copies() -> None:
    base = McpAgentServer(LlmAgent(name="a", model=MockModel()))
    changed = base.with_name("srv").with_version("1.2.3").with_instructions("Be brief.").with_ctx(lambda: 1)
    assert (changed.name, changed.version, changed.instructions, changed.context()) == (
        "srv",
        "1.2.3",
        "Be brief.",
        1,
    )
    assert (base.name, base.instructions, base.context()) == (None, None, None)
    lowlevel = changed.mcp_server()
    assert (lowlevel.name, lowlevel.version, lowlevel.instructions) == ("srv", "1.2.3", "Be brief.")


def test_misconfiguration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="run"):
        McpAgentServer(object())
    with pytest.raises(ConfigError, match=r"must match \[a-zA-Z0-9_-\]\+"):
        McpAgentServer(LlmAgent(name="a", model=MockModel()), tool_name="has space")
    with pytest.raises(ConfigError, match="http"):
        McpServerHandle.streamable_http("ftp://example.com/mcp")
    with pytest.raises(ConfigError, match="needs a command"):
        McpServerHandle.stdio("")
    with pytest.raises(ConfigError, match="connect_timeout"):
        McpServerHandle.stdio("npx", connect_timeout=0)


def test_serving_http_under_trio_says_to_use_the_asgi_app() -> None:
    server = McpAgentServer(LlmAgent(name="a", model=MockModel()))
    with pytest.raises(McpError) as under_trio:
        anyio.run(server.serve_streamable_http, backend="trio")
    assert under_trio.value.kind is McpErrorKind.SERVE and "asgi_app()" in str(under_trio.value)


def test_a_handle_is_not_usable_before_it_connects() -> None:
    handle = McpServerHandle.streamable_http("http://127.0.0.1:1/mcp", tool_prefix="x_", lazy=True)
    expected = "MCP server at http://127.0.0.1:1/mcp, tool_prefix='x_', lazy=True, connected=False"
    assert repr(handle) == f"McpServerHandle({expected})"
    with pytest.raises(McpError) as early:
        handle.tools()
    assert early.value.kind is McpErrorKind.OTHER and "`await` it or `async with` it first" in str(
        early.value
    )
    assert anyio.run(handle.close) is None  # closing a handle that never connected is fine


def test_the_package_exports_what_it_lists() -> None:
    for name in helikon.mcp.__all__:
        assert getattr(helikon.mcp, name) is not None, name
    assert helikon.mcp.ToolSource is helikon.ToolSource
    assert {k.value for k in McpErrorKind} == {"connect", "spawn", "service", "bind", "serve", "other"}
