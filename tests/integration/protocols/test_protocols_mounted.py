"""AG-UI and A2A mounted next to the agent server in one app, all behind
one authenticator (a user function here), over real loopback HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_text_parts, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState
from ag_ui.core import EventType
from protocol_support import assistant, free_port, serving
from starlette.requests import HTTPConnection

from helikon.protocols.a2a import A2AServer, RemoteA2AAgent
from helikon.protocols.agui import AguiServer, mount_protocols, parse_events
from helikon.server import AgentServer, AuthRejection

pytestmark = pytest.mark.integration

KEYS = {"key-of-carol": "carol"}


async def by_api_key(request: HTTPConnection) -> Any:
    """A user function: an ``X-Api-Key`` names the caller; a banned key is 403."""
    key = request.headers.get("x-api-key")
    if key == "banned-key":
        raise AuthRejection(403, "this key is banned")
    return KEYS.get(key or "")


def test_agent_server_agui_and_a2a_in_one_app_behind_one_authenticator() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    agent = assistant()
    server = AgentServer(agents=[agent], auth=by_api_key)
    app = mount_protocols(
        server,
        {
            "/agui/assistant": AguiServer(agent, auth=by_api_key),
            "/a2a/assistant": A2AServer(agent, f"{base}/a2a/assistant", auth=by_api_key),
        },
    )
    carol = {"x-api-key": "key-of-carol"}
    with serving(app, port=port):
        # the agent server itself
        assert httpx.get(base + "/agents", timeout=10).status_code == 401
        assert httpx.get(base + "/agents", headers=carol, timeout=10).status_code == 200
        # AG-UI
        body = {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "hi"}]}
        assert httpx.post(base + "/agui/assistant/", json=body, timeout=10).status_code == 401
        banned = httpx.post(
            base + "/agui/assistant/", json=body, headers={"x-api-key": "banned-key"}, timeout=10
        )
        assert banned.status_code == 403 and "banned" in banned.text
        answer = httpx.post(base + "/agui/assistant/", json=body, headers=carol, timeout=10)
        events = parse_events(answer.text)
        assert events[-1]["type"] == EventType.RUN_FINISHED.value and events[-1]["result"] == "echo: hi"
        # A2A: the card is public, the tasks are not
        card = httpx.get(base + "/a2a/assistant/.well-known/agent-card.json", timeout=10)
        assert card.status_code == 200 and card.json()["name"] == "assistant"
        assert httpx.post(base + "/a2a/assistant/", json={}, timeout=10).status_code == 401
        asyncio.run(_a2a(f"{base}/a2a/assistant", carol))


async def _a2a(url: str, headers: dict[str, str]) -> None:
    async with httpx.AsyncClient(headers=headers, timeout=20) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
        message = new_text_message("hello", role=Role.ROLE_USER)
        (response,) = [r async for r in client.send_message(SendMessageRequest(message=message))]
        await client.close()
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(list(response.task.artifacts[0].parts)) == ["echo: hello"]
    # helikon calling helikon: a RemoteA2AAgent with the same key
    remote = RemoteA2AAgent(url, name="assistant", headers=headers)
    events = [e async for e in remote.run(None, "again")]
    assert type(events[-1]).__name__ == "RunCompleted"
