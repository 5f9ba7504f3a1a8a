"""The A2A server driven by the official ``a2a-sdk`` client over real
loopback HTTP: the agent card, send, stream, cancel, an approval as
``input-required`` answered by the next message, structured output as a
data part, auth and identity scoping."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_data_parts, get_text_parts, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from protocol_support import approving_context, assistant, free_port, reporter, serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helikon import SequentialAgent
from helikon.protocols.a2a import A2AServer
from helikon.server import BearerAuth

pytestmark = pytest.mark.integration


@contextmanager
def a2a_server(agent: Any = None, **options: Any) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = A2AServer(agent or assistant(), base, **options)
    with serving(server.app(), port=port):
        yield base


@asynccontextmanager
async def client_of(base: str, streaming: bool, token: str | None = None) -> AsyncIterator[Any]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=20) as http:
        client = await create_client(base, ClientConfig(streaming=streaming, httpx_client=http))
        try:
            yield client
        finally:
            await client.close()


async def send(client: Any, text: str, task: Any = None, **config: Any) -> list[StreamResponse]:
    message = new_text_message(
        text,
        role=Role.ROLE_USER,
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))
    return [r async for r in client.send_message(request)]


def final_task(client_responses: list[StreamResponse]) -> Any:
    (response,) = client_responses
    assert response.HasField("task")
    return response.task


def test_the_agent_card_names_the_agent_and_its_tools() -> None:
    with a2a_server() as base:
        card = httpx.get(base + "/.well-known/agent-card.json", timeout=10).json()
    assert card["name"] == "assistant"
    assert card["description"] == "Answers questions about the weather and pays bills."
    assert [s["name"] for s in card["skills"]] == ["assistant", "get_weather", "pay"]
    assert card["skills"][1]["description"] == "The weather in a city."
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == base


def test_send_returns_the_completed_task_with_its_output_artifact() -> None:
    async def main(base: str) -> None:
        async with client_of(base, streaming=False) as client:
            task = final_task(await send(client, "weather please"))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            (artifact,) = task.artifacts
            assert artifact.name == "output"
            assert get_text_parts(list(artifact.parts)) == ["The tool said: sunny in Paris"]
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            assert fetched.status.state == TaskState.TASK_STATE_COMPLETED

    with a2a_server() as base:
        asyncio.run(main(base))


def test_stream_goes_submitted_working_artifact_completed() -> None:
    async def main(base: str) -> None:
        async with client_of(base, streaming=True) as client:
            responses = await send(client, "weather please")
        kinds = [r.WhichOneof("payload") for r in responses]
        assert kinds[0] == "task" and responses[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
        assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
        artifacts = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
        assert [get_text_parts(list(a.parts)) for a in artifacts] == [["The tool said: sunny in Paris"]]

    with a2a_server() as base:
        asyncio.run(main(base))


def test_structured_output_is_a_data_part() -> None:
    async def main(base: str) -> None:
        async with client_of(base, streaming=False) as client:
            task = final_task(await send(client, "report"))
        (artifact,) = task.artifacts
        assert get_data_parts(list(artifact.parts)) == [{"city": "Paris", "sunny": True}]

    with a2a_server(reporter()) as base:
        asyncio.run(main(base))


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("answer", ["yes", "no, too much"])
def test_an_approval_is_input_required_and_the_answer_continues_the_task(
    streaming: bool, answer: str
) -> None:
    async def main(base: str) -> None:
        async with client_of(base, streaming=streaming) as client:
            first = await send(client, "pay 5")
            last = first[-1]
            status = last.task.status if last.HasField("task") else last.status_update.status
            assert status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            (asked,) = get_data_parts(list(status.message.parts))
            assert [a["tool"] for a in asked["approvals"]] == ["pay"]
            task_id = last.task.id if last.HasField("task") else last.status_update.task_id
            task = await client.get_task(GetTaskRequest(id=task_id))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            await send(client, answer, task)
            done = await client.get_task(GetTaskRequest(id=task_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        (artifact,) = done.artifacts
        (text,) = get_text_parts(list(artifact.parts))
        assert ("paid 5" in text) is (answer == "yes")
        if answer != "yes":
            assert "too much" in text

    with a2a_server(context=approving_context()) as base:
        asyncio.run(main(base))


def test_cancel_stops_a_running_task() -> None:
    async def main(base: str) -> None:
        async with client_of(base, streaming=False) as client:
            task = final_task(await send(client, "slow", return_immediately=True))
            assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            assert fetched.status.state == TaskState.TASK_STATE_CANCELED

    with a2a_server() as base:
        asyncio.run(main(base))


def test_auth_keeps_the_card_public_and_scopes_tasks_by_identity() -> None:
    auth = BearerAuth({"alice": "alice-token-1", "bob": "bob-token-22"})

    async def main(base: str) -> None:
        card = httpx.get(base + "/.well-known/agent-card.json", timeout=10)
        assert card.status_code == 200
        rpc = httpx.post(
            base + "/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}, timeout=10
        )
        assert rpc.status_code == 401 and rpc.headers["www-authenticate"] == "Bearer"
        async with client_of(base, streaming=False, token="alice-token-1") as alice:
            task = final_task(await send(alice, "hello"))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        async with client_of(base, streaming=False, token="bob-token-22") as bob:
            with pytest.raises(TaskNotFoundError):
                await bob.get_task(GetTaskRequest(id=task.id))

    with a2a_server(auth=auth) as base:
        asyncio.run(main(base))


def test_push_notifications_reach_the_clients_webhook() -> None:
    received: list[tuple[str | None, dict[str, Any]]] = []

    async def webhook(request: Request) -> Response:
        received.append((request.headers.get("x-a2a-notification-token"), await request.json()))
        return Response(status_code=200)

    hook_port = free_port()
    hook_url = f"http://127.0.0.1:{hook_port}/hook"
    allowed: set[str] = {hook_url}

    async def only_the_test_hook(url: str) -> bool:  # loopback, allowed by this test alone
        return url in allowed

    async def main(base: str) -> None:
        async with client_of(base, streaming=False) as client:
            config = TaskPushNotificationConfig(url=hook_url, token="sentinel-token-31337")
            task = final_task(await send(client, "weather please", task_push_notification_config=config))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            refused = TaskPushNotificationConfig(url="http://127.0.0.1:9/elsewhere")
            with pytest.raises(Exception, match=r"(?i)push notification url"):
                await send(client, "hello", task_push_notification_config=refused)

    hooks = Starlette(routes=[Route("/hook", webhook, methods=["POST"])])
    with (
        serving(hooks, port=hook_port),
        a2a_server(push=True, push_url_validator=only_the_test_hook) as base,
    ):
        card = httpx.get(base + "/.well-known/agent-card.json", timeout=10).json()
        assert card["capabilities"]["pushNotifications"] is True
        asyncio.run(main(base))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("COMPLETED" in json.dumps(b) for _, b in received):
            time.sleep(0.05)
    assert received and {token for token, _ in received} == {"sentinel-token-31337"}
    assert any("TASK_STATE_COMPLETED" in json.dumps(body) for _, body in received)


def test_a_workflow_is_served_too() -> None:
    flow = (
        SequentialAgent("flow", "Two assistants in a row.").then(assistant("first")).then(assistant("second"))
    )

    async def main(base: str) -> None:
        async with client_of(base, streaming=True) as client:
            responses = await send(client, "weather please")
        states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        (artifact,) = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
        assert get_text_parts(list(artifact.parts)) == ["The tool said: sunny in Paris"]

    with a2a_server(flow) as base:
        card = httpx.get(base + "/.well-known/agent-card.json", timeout=10).json()
        assert (card["name"], card["description"]) == ("flow", "Two assistants in a row.")
        asyncio.run(main(base))


def test_tasks_kept_in_memory_are_bounded() -> None:
    """``max_runs=1``: a working task fills the only slot, so a second task
    fails as busy (the server does not grow); once a task waits for input,
    a new task evicts it."""

    async def main(base: str) -> None:
        async with client_of(base, streaming=False) as client:
            slow = final_task(await send(client, "slow", return_immediately=True))
            busy = final_task(await send(client, "hello"))
            assert busy.status.state == TaskState.TASK_STATE_FAILED
            (text,) = get_text_parts(list(busy.status.message.parts))
            assert "busy" in text
            await client.cancel_task(CancelTaskRequest(id=slow.id))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the cancelled run leaves its slot
                waiting = final_task(await send(client, "pay 5"))
                if waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    break
                await asyncio.sleep(0.05)
            assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            fresh = final_task(await send(client, "hello"))
            assert fresh.status.state == TaskState.TASK_STATE_COMPLETED
            await send(client, "yes", waiting)  # its run was evicted: nothing is paid
            evicted = await client.get_task(GetTaskRequest(id=waiting.id))
            texts = [t for a in evicted.artifacts for t in get_text_parts(list(a.parts))]
            assert not any("paid 5" in t for t in texts)

    with a2a_server(context=approving_context(), max_runs=1) as base:
        asyncio.run(main(base))
