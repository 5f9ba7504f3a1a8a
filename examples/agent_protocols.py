"""One helikon agent behind AG-UI and A2A, and an A2A agent called back as a sub-agent.

    python examples/agent_protocols.py

Starts one app on a loopback port: the agent server at ``/``, the AG-UI
endpoint at ``/agui`` and the A2A endpoint at ``/a2a`` (one bearer token
guards all three). Then, as clients would:

1. an AG-UI front end asks for the weather (a tool call streams as AG-UI
   events), for its location (a front-end tool: the client runs it and the
   same run goes on) and to pay a bill (an approval: an ``interrupt``,
   answered with ``resume``);
2. an A2A client (the official ``a2a-sdk``) sends a task that pays a bill:
   it becomes ``input-required`` and the answer ``yes`` completes it;
3. a helikon workflow uses the A2A endpoint as a child
   (``RemoteA2AAgent``); the run is recorded and replayed with the server gone.

The model is scripted (it answers by rule), so this runs offline. Needs
``pip install 'paigasus-helikon[agui,a2a]'``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import anyio
import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_text_parts, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState
from hypercorn.config import Config

from helikon import LlmAgent, RunContext, SequentialAgent, tool
from helikon.governance import GuardRule
from helikon.interpreters import RecordingInterpreter, ReplayInterpreter
from helikon.items import ToolResult, UserMessage, text_of
from helikon.model import ModelRequest
from helikon.protocols.a2a import A2AServer, RemoteA2AAgent
from helikon.protocols.agui import AguiServer, mount_protocols, parse_events
from helikon.server import AgentServer, BearerAuth, serve_app
from helikon.testing import FunctionModel, call_tools
from helikon.trace import Trace

TOKEN = "example-token-123"
HEADERS = {"authorization": f"Bearer {TOKEN}"}


def answer(request: ModelRequest) -> Any:
    """The scripted model: weather, location (a front-end tool), pay N; echo otherwise."""
    last = request.messages[-1]
    if isinstance(last, ToolResult):
        return f"The tool said: {last.content}"
    text = next(text_of(m.content) for m in reversed(request.messages) if isinstance(m, UserMessage))
    words = text.split()
    if words[:1] == ["weather"]:
        return call_tools(("get_weather", {"city": "Paris"}))
    if words[:1] == ["locate"]:
        return call_tools(("where_am_i", {}))
    if words[:1] == ["pay"]:
        return call_tools(("pay_bill", {"amount": int(words[1])}))
    return f"echo: {text}"


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool
def pay_bill(amount: int) -> str:
    """Pay a bill.

    Args:
        amount: how much.
    """
    return f"paid {amount} USD"


agent = LlmAgent(
    name="assistant",
    model=FunctionModel(answer),
    tools=[get_weather, pay_bill],
    description="Answers about the weather and pays bills.",
)
# Payments need a human: the run waits (in memory) for the answer.
ctx = RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay_bill")])


def agui(base: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(f"{base}/agui", json=body, headers=HEADERS, timeout=20)
    return parse_events(response.text)


def agui_tour(base: str) -> None:
    user = {"id": "u1", "role": "user"}
    events = agui(base, {"threadId": "t1", "runId": "r1", "messages": [{**user, "content": "weather now"}]})
    print("AG-UI events:", " ".join(e["type"] for e in events))
    # A front-end tool: the client declares it, the run stops with the call pending.
    tools = [{"name": "where_am_i", "description": "The user's city, from the browser."}]
    first = [{**user, "content": "locate me"}]
    events = agui(base, {"threadId": "t2", "runId": "r1", "messages": first, "tools": tools})
    (call_id,) = events[-1]["outcome"]["pendingToolCallIds"]
    call = {"id": call_id, "type": "function", "function": {"name": "where_am_i", "arguments": "{}"}}
    history = [
        *first,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "Lyon"},
    ]
    events = agui(base, {"threadId": "t2", "runId": "r2", "messages": history, "tools": tools})
    print("front-end tool:", events[-1]["result"])
    # An approval: an interrupt, answered with resume.
    events = agui(base, {"threadId": "t3", "runId": "r1", "messages": [{**user, "content": "pay 42"}]})
    custom = next(e for e in events if e["type"] == "CUSTOM")
    print("approval event:", custom["name"], json.dumps(custom["value"]["arguments"]))
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    events = agui(base, {"threadId": "t3", "runId": "r2", "messages": [], "resume": resume})
    print("after approval:", events[-1]["result"])


async def a2a_tour(url: str) -> None:
    async with httpx.AsyncClient(headers=HEADERS, timeout=20) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
        message = new_text_message("pay 7", role=Role.ROLE_USER)
        (response,) = [r async for r in client.send_message(SendMessageRequest(message=message))]
        task = response.task
        print("A2A task:", TaskState.Name(task.status.state))
        reply = new_text_message("yes", role=Role.ROLE_USER, task_id=task.id, context_id=task.context_id)
        (response,) = [r async for r in client.send_message(SendMessageRequest(message=reply))]
        done = response.task
        output = get_text_parts(list(done.artifacts[0].parts))[0]
        print("A2A answered:", TaskState.Name(done.status.state), output)
        await client.close()


def remote_tour(url: str, stop: threading.Event, thread: threading.Thread) -> None:
    remote = RemoteA2AAgent(url, name="assistant", headers=HEADERS)
    flow = SequentialAgent("flow").then(remote)

    async def run(interpreter: Any) -> list[Any]:
        return [
            e async for e in flow.run(RunContext.ephemeral(None), "weather please", interpreter=interpreter)
        ]

    recorder = RecordingInterpreter()
    recorded = anyio.run(run, recorder)
    print("remote child said:", text_of(recorded[-2].item.content))
    stop.set()  # the server goes away
    thread.join(timeout=10)
    replayed = anyio.run(run, ReplayInterpreter(Trace.from_bytes(recorder.trace.to_bytes())))
    print("replayed with the server gone, same events:", replayed == recorded)


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    auth = BearerAuth([TOKEN])
    app = mount_protocols(
        AgentServer(agents=[agent], context=ctx.with_suspend_on_approval(), auth=auth),
        {
            "/agui": AguiServer(agent, context=ctx, auth=auth),
            "/a2a": A2AServer(agent, f"{base}/a2a", context=ctx, auth=auth),
        },
    )
    stop = threading.Event()

    async def serve() -> None:
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 1.0

        async def until_stopped() -> None:
            while not stop.is_set():
                await anyio.sleep(0.02)

        await serve_app(app, config, until_stopped)

    thread = threading.Thread(target=lambda: anyio.run(serve), daemon=True)
    thread.start()
    for _ in range(200):
        try:
            httpx.get(f"{base}/health", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    print("without the token:", httpx.post(f"{base}/agui", json={}, timeout=5).status_code)
    agui_tour(base)
    asyncio.run(a2a_tour(f"{base}/a2a"))
    remote_tour(f"{base}/a2a", stop, thread)


if __name__ == "__main__":
    main()
