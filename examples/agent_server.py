"""An agent server: HTTP, Server-Sent Events and WebSocket, with a chat page.

    python examples/agent_server.py            # a tour: starts the server, talks to it, stops
    python examples/agent_server.py --serve    # serve on http://127.0.0.1:8080 (open it in a browser)

The agent's model is scripted (it answers by rule, for any number of runs),
so this runs offline; swap in OpenAIModel / AnthropicModel for a real one.
Sessions (``X-Session-Id``) are kept in SQLite (``./server-sessions.db``);
payments wait for a human, who answers through the approvals route (or the
page's approve/deny buttons). Needs ``pip install 'paigasus-helikon[server]'``.
"""

from __future__ import annotations

import functools
import json
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx

from helikon import LlmAgent, RunContext, tool
from helikon.cancel import CancellationToken
from helikon.governance import GuardRule
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
from helikon.server import AgentServer, BearerAuth, sessions_from
from helikon.sessions import SqliteSession

TOKEN = "example-token-please-change"


class RuleModel:
    """Answers by rule: "bill ..." looks the bill up, "pay N" pays it, else it counts your messages."""

    capabilities = ModelCapabilities(streaming=True, tools=True)
    provider = "example"
    model_id = "rules"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        return self._answer(request.messages)

    async def _answer(self, messages: tuple[Any, ...]) -> AsyncIterator[ModelEvent]:
        said = [text_of(m.content) for m in messages if isinstance(m, UserMessage)]
        if isinstance(messages[-1], ToolResult):
            for word in f"Done: {messages[-1].content}.".split(" "):
                yield TextChunk(word + " ")
        elif said[-1].startswith("bill"):
            yield ToolCallChunk(0, None, "latest_bill", "{}")
        elif said[-1].startswith("pay "):
            yield ToolCallChunk(0, None, "pay_bill", json.dumps({"amount": float(said[-1][4:])}))
        else:
            yield TextChunk(f"You said {said[-1]!r}; this session has {len(said)} message(s).")
        last = messages[-1]
        calls = not isinstance(last, ToolResult) and (said[-1].startswith(("bill", "pay ")))
        yield Finish(FinishReason.TOOL_CALLS if calls else FinishReason.STOP)


@tool
def latest_bill() -> str:
    """The latest electricity bill."""
    return "City Power, 184.20 USD, due Friday"


@tool
def pay_bill(amount: float) -> str:
    """Pay the electricity bill.

    Args:
        amount: the amount in USD.
    """
    return f"paid {amount:.2f} USD to City Power"


@functools.cache
def sqlite_session(session_id: str) -> SqliteSession:
    """One open session per id (SQLite keeps it across restarts)."""
    return SqliteSession.open("server-sessions.db", session_id)


def make_server() -> AgentServer:
    agent = LlmAgent(
        name="bills",
        model=RuleModel(),
        instructions="Help with bills.",
        tools=[latest_bill, pay_bill],
        description="looks up and pays bills",
    )
    # Network clients get a tight posture: payments need a human's approval.
    context = (
        RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay_bill")]).with_suspend_on_approval()
    )
    return AgentServer(
        agents=[agent],
        context=context,
        sessions=sessions_from(sqlite_session),
        auth=BearerAuth([TOKEN]),
    ).with_retention(max_age=3600, max_runs=500)


async def sse(client: httpx.AsyncClient, url: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
    async with client.stream("POST", url, **kw) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


async def tour(base: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        refused = await client.get("/agents", headers={"Authorization": "Bearer wrong"})
        print("without the token:", refused.status_code)
        print("agents:", [a["name"] for a in (await client.get("/agents")).json()["agents"]])

        one_shot = (await client.post("/agents/bills/runs", json={"input": "hello"})).json()
        print("one-shot:", one_shot["output"])

        print("streamed:", end=" ")
        async for frame in sse(client, "/agents/bills/runs?stream=sse", json={"input": "bill please"}):
            if frame["type"] == "ToolCallItem":
                print(f"[tool call {frame['item']['name']}]", end=" ")
            elif frame["type"] == "TokenDelta":
                print(frame["text"], end="")
        print()

        session = {"X-Session-Id": "ada"}
        for text in ("hi", "again"):
            answer = (await client.post("/agents/bills/runs", json={"input": text}, headers=session)).json()
            print("session ada:", answer["output"])

        started = await client.post("/agents/bills/runs?mode=async", json={"input": "pay 184.20"})
        run_url = started.json()["status_url"]
        print("async run:", started.status_code, started.headers["x-run-id"] == started.json()["run_id"])
        while (status := (await client.get(run_url)).json())["status"] != "awaiting_approval":
            await anyio.sleep(0.05)
        (question,) = status["pending_approvals"]
        print(f"approval requested: {question['tool']}({question['arguments']})")
        decision = {"call_id": question["call_id"], "approved": True}
        await client.post(f"{run_url}/approvals", json={"decisions": [decision]})
        while (status := (await client.get(run_url)).json())["status"] not in ("completed", "failed"):
            await anyio.sleep(0.05)
        print("after approval:", status["output"])

        # a late reader replays the run's events from the start (or after Last-Event-ID)
        async with client.stream("GET", f"{run_url}/events", headers={"Last-Event-ID": "2"}) as replay:
            kinds = [
                json.loads(line[6:])["type"]
                async for line in replay.aiter_lines()
                if line.startswith("data: ")
            ]
        print("replayed after event 2:", kinds[:3], "...", kinds[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def main() -> None:
    server = make_server()
    if "--serve" in sys.argv:
        print(f"serving on http://127.0.0.1:8080 (token: {TOKEN})")
        await server.serve("127.0.0.1", 8080)
        return
    port = free_port()
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, "127.0.0.1", port)
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):  # wait until it listens
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                await anyio.sleep(0.02)
        await tour(base)
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, backend="trio")
