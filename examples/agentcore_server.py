"""A helikon agent served the way AWS Bedrock AgentCore's Runtime calls a container.

Install the ``server`` extra (and ``mcp`` for the MCP protocol). Three ways
to run it:

- ``python examples/agentcore_server.py --serve``: the HTTP protocol on
  ``0.0.0.0:8080`` (``GET /ping``, ``POST /invocations``): the command of
  an AgentCore container. Try it with
  ``curl -H 'Accept: application/json' -d '{"prompt": "Groceries?"}' localhost:8080/invocations``;
- ``python examples/agentcore_server.py --serve-mcp``: the MCP protocol on
  ``0.0.0.0:8000`` (``/mcp``);
- ``python examples/agentcore_server.py``: a demo on a free port of
  127.0.0.1 that calls itself as the platform would: ping, a JSON answer,
  an SSE stream, a follow-up in the same session, then the MCP protocol.

With ``OPENAI_API_KEY`` set (and the ``openai`` extra) a real model
answers; otherwise a small scripted model does, so everything runs offline.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator

import anyio
import httpx

from helikon import LlmAgent, Model, tool
from helikon.cancel import CancellationToken
from helikon.items import ToolResult, UserMessage, text_of
from helikon.model import (
    Finish,
    FinishReason,
    ModelCapabilities,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
)
from helikon.server import AGENTCORE_SESSION_HEADER, AgentCoreServer

SESSION_ID = "demo-session-0123456789abcdef0123456789"  # AgentCore ids are 33 to 256 characters


@tool
def lookup_spending(category: str) -> str:
    """This month's spending in a category.

    Args:
        category: A budget category, e.g. "groceries".
    """
    return {"groceries": "$412", "dining": "$180"}.get(category.lower(), "$0")


class ScriptedBudgetModel:
    """Answers without a network: looks a category up, then reports it; any
    other question gets how many questions it has seen in this session."""

    capabilities = ModelCapabilities(streaming=True, tools=True)
    provider = "example"
    model_id = "scripted-budget"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        asked = [text_of(m.content) for m in request.messages if type(m) is UserMessage]
        if type(last) is ToolResult:
            yield TextChunk(f"You spent {last.content} on that this month.")
            yield Finish(FinishReason.STOP)
            return
        for category in ("groceries", "dining"):
            if category in asked[-1].lower():
                arguments = json.dumps({"category": category})
                yield ToolCallChunk(index=0, call_id=None, name="lookup_spending", arguments=arguments)
                yield Finish(FinishReason.TOOL_CALLS)
                return
        yield TextChunk(f"This is question {len(asked)} of our conversation; ")
        yield TextChunk(f"the first was {asked[0]!r}.")
        yield Finish(FinishReason.STOP)


def choose_model() -> Model:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from helikon.providers.openai import OpenAIModel
        except ImportError:
            print(
                "(OPENAI_API_KEY is set but the OpenAI provider is not available; using the scripted model)"
            )
        else:
            return OpenAIModel.chat("gpt-5-mini")
    return ScriptedBudgetModel()


def budget_server() -> AgentCoreServer[None]:
    agent: LlmAgent[None] = LlmAgent(
        name="budget assistant",
        description="Answers questions about the user's monthly budget.",
        instructions="You are a budgeting assistant. Look spending up before you answer.",
        model=choose_model(),
        tools=[lookup_spending],
    )
    # The session header maps to a helikon session (in memory by default;
    # pass sessions=lambda sid: ... for SQLite, PostgreSQL or Redis).
    return AgentCoreServer(agent)


async def demo() -> None:
    server = budget_server()
    async with anyio.create_task_group() as group:
        url = await group.start(server.serve, "127.0.0.1", 0)
        print(f"HTTP protocol at {url}")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            print("ping:", (await http.get("/ping")).json()["status"])

            session = {AGENTCORE_SESSION_HEADER: SESSION_ID}
            answer = await http.post(
                "/invocations",
                json={"prompt": "How much did I spend on groceries?"},
                headers={**session, "Accept": "application/json"},
            )
            print("JSON answer:", answer.json()["final_output"])

            kinds = []
            async with http.stream(
                "POST",
                "/invocations",
                json={"prompt": "And on dining?"},
                headers={**session, "Accept": "text/event-stream"},
            ) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        kinds.append(json.loads(line[6:])["type"])
            print("SSE events:", " ".join(dict.fromkeys(kinds)))

            again = await http.post(
                "/invocations",
                json={"input": "What did I ask first?"},
                headers={**session, "Accept": "application/json"},
            )
            print("same session:", again.json()["final_output"])
        group.cancel_scope.cancel()

    from mcp import Client, types

    async with anyio.create_task_group() as group:
        url = await group.start(server.serve_mcp, "127.0.0.1", 0)
        async with Client(f"{url}/mcp") as client:
            (listed,) = (await client.list_tools()).tools
            result = await client.call_tool(listed.name, {"input": "How much did I spend on dining?"})
            block = result.content[0]
            print(f"MCP tool {listed.name}:", block.text if isinstance(block, types.TextContent) else block)
        group.cancel_scope.cancel()


if __name__ == "__main__":
    if "--serve" in sys.argv:
        print("AgentCore HTTP protocol on http://0.0.0.0:8080 (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(budget_server().serve)
    elif "--serve-mcp" in sys.argv:
        print("AgentCore MCP protocol on http://0.0.0.0:8000/mcp (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(budget_server().serve_mcp)
    else:
        anyio.run(demo)
