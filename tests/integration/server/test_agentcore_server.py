"""``AgentCoreServer`` on a real Hypercorn server on 127.0.0.1, called with httpx
(and with the official ``mcp`` client for the MCP protocol), under trio and
asyncio.

What the AgentCore Runtime relies on: ``/ping`` (busy while a run is in
flight), ``/invocations`` answering JSON or SSE, the session header mapping
to a helikon session, a client that walks away cancelling its run while the
session still gets the turn, and clear 4xx answers for bad requests.
"""

from __future__ import annotations

import contextlib
import functools
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from mcp import Client
from mcp import types as mcp_types

from helikon import LlmAgent, RunContext, TracerHandle, tool
from helikon.codec import unstructure
from helikon.items import Item, TextPart, ToolCall, ToolResult, UserMessage
from helikon.model import Usage
from helikon.server import AGENTCORE_SESSION_HEADER, AgentCoreError, AgentCoreServer
from helikon.sessions import (
    MemorySession,
    SessionError,
    SqliteSession,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
)
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

BACKENDS = ["trio", "asyncio"]
SESSION = "session-" + "0123456789abcdef" * 2  # 40 characters
OTHER_SESSION = "session-" + "fedcba9876543210" * 2
JSON = {"accept": "application/json"}
SSE = {"accept": "text/event-stream"}


def run(main: Callable[[], Awaitable[Any]], backend: str = "trio") -> Any:
    return anyio.run(main, backend=backend)


async def serving(
    server: AgentCoreServer[Any],
    group: anyio.abc.TaskGroup,
    mcp: bool = False,
    local_only: bool | None = None,
) -> str:
    serve = functools.partial(server.serve_mcp if mcp else server.serve, local_only=local_only)
    url: str = await group.start(serve, "127.0.0.1", 0)
    return url


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(0.02)


def sse_events(body: str) -> list[dict[str, Any]]:
    """The ``data:`` payloads of an SSE body (every message is one line of data)."""
    events = []
    for message in body.split("\n\n"):
        lines = [line for line in message.split("\n") if line and not line.startswith(":")]
        if lines:
            (line,) = lines
            assert line.startswith("data: "), line
            events.append(msgspec.json.decode(line[6:]))
    return events


def user_texts(request_messages: tuple[Item, ...]) -> list[str]:
    return [
        p.text for m in request_messages if type(m) is UserMessage for p in m.content if type(p) is TextPart
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ping_and_a_json_invocation(backend: str) -> None:
    model = MockModel([say("You spent $412 on groceries.", usage=Usage(input_tokens=30, output_tokens=7))])
    server = AgentCoreServer(LlmAgent(name="budget", model=model))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url) as http:
                ping = await http.get("/ping")
                assert ping.status_code == 200 and ping.headers["content-type"] == "application/json"
                body = ping.json()
                assert body["status"] == "Healthy" and isinstance(body["time_of_last_update"], int)

                answer = await http.post("/invocations", json={"prompt": "Groceries?"}, headers=JSON)
                assert answer.status_code == 200, answer.text
                assert answer.headers["content-type"] == "application/json"
                assert answer.json() == {
                    "final_output": "You spent $412 on groceries.",
                    "usage": {
                        "input_tokens": 30,
                        "output_tokens": 7,
                        "cached_input_tokens": 0,
                        "reasoning_tokens": 0,
                        "cache_creation_input_tokens": 0,
                        "requests": 1,
                        "tool_calls": 0,
                        "cost": None,
                    },
                }
                assert user_texts(model.requests[0].messages) == ["Groceries?"]
            group.cancel_scope.cancel()

    run(main, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_sse_invocation_streams_every_event(backend: str) -> None:
    model = MockModel(
        [
            call_tools(("lookup", {"category": "dining"})),
            say("Dining is at $180."),
            say("Plain JSON, asked for in the body."),
        ]
    )

    @tool
    def lookup(category: str) -> str:
        """Spending in a category.

        Args:
            category: the category.
        """
        return "$180"

    server = AgentCoreServer(LlmAgent(name="budget", model=model, tools=[lookup]))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url) as http:
                # SSE when asked for (without it, JSON: the official app's default).
                answer = await http.post("/invocations", json={"input": "Dining?"}, headers=SSE)
                assert answer.status_code == 200
                assert answer.headers["content-type"].startswith("text/event-stream")
                events = sse_events(answer.text)
                kinds = [e["type"] for e in events]
                assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
                assert kinds.count("RunCompleted") == 1
                assert "TokenDelta" in kinds and "ToolCallItem" in kinds and "ToolOutputItem" in kinds
                (output,) = [e for e in events if e["type"] == "ToolOutputItem"]
                assert "$180" in str(output)
                texts = "".join(e["text"] for e in events if e["type"] == "TokenDelta")
                assert texts == "Dining is at $180."

                # The body's "stream": false wins over an SSE Accept header.
                plain = await http.post(
                    "/invocations",
                    json={"prompt": "JSON please", "stream": False},
                    headers={"accept": "text/event-stream"},
                )
                assert plain.json()["final_output"] == "Plain JSON, asked for in the body."
            group.cancel_scope.cancel()

    run(main, backend)


def test_a_failed_run_is_a_500_in_json_and_a_run_failed_event_in_sse() -> None:
    server = AgentCoreServer(LlmAgent(name="broken", model=MockModel([])))  # no script: the model fails

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url) as http:
                answer = await http.post("/invocations", json={"prompt": "hi"}, headers=JSON)
                assert answer.status_code == 500
                error = answer.json()["error"]
                assert error["code"] == "run_failed" and "MockModel has no script left" in error["message"]

                streamed = await http.post("/invocations", json={"prompt": "hi"}, headers=SSE)
                assert streamed.status_code == 200
                last = sse_events(streamed.text)[-1]
                assert last["type"] == "RunFailed" and "no script left" in str(last["error"])
            group.cancel_scope.cancel()

    run(main)


def test_the_session_header_maps_to_a_helikon_session() -> None:
    model = MockModel([say("Hello Ada."), say("You are Ada."), say("I do not know you."), say("Nor you.")])
    sessions: dict[str | None, MemorySession] = {}

    def provide(session_id: str | None) -> MemorySession | None:
        if session_id is None:
            return None
        return sessions.setdefault(session_id, MemorySession())

    server = AgentCoreServer(LlmAgent(name="chat", model=model), sessions=provide)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url, headers=JSON) as http:
                # The AWS spelling of the header; HTTP header names are case-insensitive.
                first = await http.post(
                    "/invocations", json={"prompt": "I am Ada."}, headers={AGENTCORE_SESSION_HEADER: SESSION}
                )
                assert first.json()["final_output"] == "Hello Ada."
                second = await http.post(
                    "/invocations",
                    json={"prompt": "Who am I?"},
                    headers={AGENTCORE_SESSION_HEADER.lower(): SESSION},
                )
                assert second.json()["final_output"] == "You are Ada."
                other = await http.post(
                    "/invocations",
                    json={"prompt": "Who am I?"},
                    headers={AGENTCORE_SESSION_HEADER: OTHER_SESSION},
                )
                assert other.status_code == 200
                anonymous = await http.post("/invocations", json={"prompt": "Who am I?"})
                assert anonymous.status_code == 200
            group.cancel_scope.cancel()

    run(main)
    assert user_texts(model.requests[1].messages) == ["I am Ada.", "Who am I?"]  # the session's history
    assert user_texts(model.requests[2].messages) == ["Who am I?"]  # another session: none
    assert user_texts(model.requests[3].messages) == ["Who am I?"]  # no header: no session
    assert set(sessions) == {SESSION, OTHER_SESSION}
    assert len(anyio.run(sessions[SESSION].events)) == 4


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_client_that_walks_away_cancels_the_run_and_the_session_keeps_the_turn(
    backend: str, mode: str
) -> None:
    seen: list[str] = []
    model = MockModel([call_tools(("c1", "wait_for_bank", {})), say("The bank is back.")])
    session = MemorySession()

    async def main() -> None:
        started = anyio.Event()

        @tool
        async def wait_for_bank() -> str:
            """Wait for the bank's answer (it never comes)."""
            started.set()
            try:
                await anyio.sleep(60)
            except anyio.get_cancelled_exc_class():
                seen.append("tool cancelled")
                raise
            return "never"

        agent = LlmAgent(name="banker", model=model, tools=[wait_for_bank])
        server = AgentCoreServer(agent, sessions=lambda sid: session if sid == SESSION else None)
        headers = {AGENTCORE_SESSION_HEADER: SESSION, **(JSON if mode == "json" else {})}
        async with anyio.create_task_group() as group:
            url = await serving(server, group)

            async def walk_away_mid_run() -> None:
                async with httpx.AsyncClient(base_url=url) as http:
                    with anyio.move_on_after(30) as timeout:
                        async with anyio.create_task_group() as client:

                            async def leave() -> None:
                                await started.wait()
                                client.cancel_scope.cancel()  # closes the connection

                            client.start_soon(leave)
                            if mode == "json":
                                await http.post(
                                    "/invocations", json={"prompt": "Pay my rent."}, headers=headers
                                )
                            else:
                                async with http.stream(
                                    "POST", "/invocations", json={"prompt": "Pay my rent."}, headers=headers
                                ) as response:
                                    async for _ in response.aiter_bytes():
                                        pass
                            raise AssertionError("the run answered before the client left")
                    assert not timeout.cancelled_caught

            await walk_away_mid_run()
            async with httpx.AsyncClient(base_url=url) as http:

                async def idle() -> bool:
                    return (await http.get("/ping")).json()["status"] == "Healthy"

                await wait_until(idle, timeout=5)  # well before the 5 s wind-down cut-off
                assert seen == ["tool cancelled"]
                events = await session.events()
                kinds = [type(e) for e in events]
                assert kinds == [UserMessageEvent, ToolCallRecorded, ToolResultRecorded], events
                user, call, result = events
                assert isinstance(user, UserMessageEvent) and user.content == (TextPart("Pay my rent."),)
                assert isinstance(call, ToolCallRecorded) and call.name == "wait_for_bank"
                assert isinstance(result, ToolResultRecorded) and result.call_id == call.call_id
                assert result.is_error  # closed as interrupted/cancelled, never left open

                again = await http.post(
                    "/invocations",
                    json={"prompt": "Is it paid?"},
                    headers={AGENTCORE_SESSION_HEADER: SESSION, **JSON},
                )
                assert again.status_code == 200 and again.json()["final_output"] == "The bank is back."
            group.cancel_scope.cancel()

    run(main, backend)
    history = model.requests[1].messages
    assert user_texts(history) == ["Pay my rent.", "Is it paid?"]
    calls = [m for m in history if type(m) is ToolCall]
    results = [m for m in history if type(m) is ToolResult]
    assert [c.name for c in calls] == ["wait_for_bank"] and len(results) == 1 and results[0].is_error


@pytest.mark.parametrize("backend", BACKENDS)
def test_ping_stays_healthy_during_an_invocation_and_is_busy_for_registered_work(backend: str) -> None:
    async def main() -> None:
        started, release = anyio.Event(), anyio.Event()

        @tool
        async def slow_report() -> str:
            """Build the monthly report."""
            started.set()
            await release.wait()
            return "report ready"

        model = MockModel([call_tools(("slow_report", {})), say("Here is your report.")])
        server = AgentCoreServer(LlmAgent(name="reporter", model=model, tools=[slow_report]))
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url) as http:
                before = (await http.get("/ping")).json()
                assert before["status"] == "Healthy"
                answers: list[httpx.Response] = []

                async def invoke() -> None:
                    answers.append(await http.post("/invocations", json={"prompt": "Report?"}, headers=JSON))

                group.start_soon(invoke)
                await started.wait()
                during = (await http.get("/ping")).json()
                assert during == before  # an ordinary invocation: Healthy, as the official app
                with server.ping.busy():  # background work the application registers
                    busy = (await http.get("/ping")).json()
                    assert busy["status"] == "HealthyBusy"
                    assert busy["time_of_last_update"] >= before["time_of_last_update"]
                    again = (await http.get("/ping")).json()
                    assert again == busy  # the same status does not move the stamp
                release.set()
                await wait_until(lambda: _true(bool(answers)))
                assert answers[0].json()["final_output"] == "Here is your report."

                async def idle() -> bool:  # at once, or as soon as the handler has returned
                    return (await http.get("/ping")).json()["status"] == "Healthy"

                await wait_until(idle, timeout=2)
                after = (await http.get("/ping")).json()
                assert after["time_of_last_update"] >= busy["time_of_last_update"]
            group.cancel_scope.cancel()

    run(main, backend)


async def _true(value: bool) -> bool:
    return value


def waiting(server: AgentCoreServer[Any]) -> int:
    """How many invocations of ``SESSION`` hold or wait for its lock (white box)."""
    entry = server._locks._locks.get(SESSION)
    return 0 if entry is None else entry[1]


def test_bad_requests_get_clear_4xx_answers_and_the_server_keeps_serving() -> None:
    model = MockModel([say("Still here.")])
    server = AgentCoreServer(LlmAgent(name="guarded", model=model), max_body_bytes=1024)
    long_text = "x" * 2000

    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", "/invocations", {"content": b""}, 400, "bad_json"),
        ("POST", "/invocations", {"content": b"{oops"}, 400, "bad_json"),
        ("POST", "/invocations", {"json": ["prompt"]}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"question": "hi"}}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"prompt": "a", "input": "b"}}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"prompt": 42}}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"messages": [{"type": "Bogus"}]}}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"prompt": "hi", "stream": "no"}}, 422, "bad_input"),
        ("POST", "/invocations", {"json": {"prompt": long_text}}, 413, "too_large"),
        (
            "POST",
            "/invocations",
            {"json": {"prompt": "hi"}, "headers": {AGENTCORE_SESSION_HEADER: "too-short"}},
            400,
            "bad_session_id",
        ),
        (
            "POST",
            "/invocations",
            {"json": {"prompt": "hi"}, "headers": {AGENTCORE_SESSION_HEADER: "a" * 257}},
            400,
            "bad_session_id",
        ),
        (
            "POST",
            "/invocations",
            {"json": {"prompt": "hi"}, "headers": {AGENTCORE_SESSION_HEADER: "a b" * 20}},
            400,
            "bad_session_id",
        ),
    ]

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url, headers=JSON) as http:
                for method, path, kwargs, status, code in cases:
                    answer = await http.request(method, path, **kwargs)
                    assert answer.status_code == status, (kwargs, answer.text)
                    assert answer.json()["error"]["code"] == code
                    assert answer.json()["error"]["message"]

                # A chunked body past the limit (no Content-Length to refuse early).
                async def chunks() -> Any:
                    for _ in range(4):
                        yield b"x" * 512

                chunked = await http.post("/invocations", content=chunks())
                assert chunked.status_code == 413
                assert (await http.get("/invocations")).status_code == 405
                assert (await http.post("/ping")).status_code == 405
                assert (await http.get("/nowhere")).status_code == 404
                ok = await http.post("/invocations", json={"prompt": "Are you there?"})
                assert ok.status_code == 200 and ok.json()["final_output"] == "Still here."
            group.cancel_scope.cancel()

    run(main)
    assert model.calls == 1  # no bad request reached the model


def test_provider_failures_are_answered_not_crashed() -> None:
    def broken_sessions(session_id: str | None) -> None:
        raise SessionError.unavailable("the database is down")

    async def broken_context(request: Any, session: Any) -> str:
        return "not a context"

    agent = LlmAgent(name="any", model=MockModel([]))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(AgentCoreServer(agent, sessions=broken_sessions), group)
            url2 = await serving(AgentCoreServer(agent, context=broken_context), group)
            async with httpx.AsyncClient(headers=JSON) as http:
                down = await http.post(f"{url}/invocations", json={"prompt": "hi"})
                assert down.status_code == 503 and "the database is down" in down.json()["error"]["message"]
                wrong = await http.post(f"{url2}/invocations", json={"prompt": "hi"})
                assert wrong.status_code == 500 and "not a RunContext" in wrong.json()["error"]["message"]
            group.cancel_scope.cancel()

    run(main)


def test_the_context_provider_sees_the_request_and_its_session() -> None:
    seen: list[tuple[str | None, bool]] = []
    traced: list[str | None] = []

    class Tracer:
        """Records the trace attributes each run is stamped with."""

        def instrument(self, interpreter: Any, handle: TracerHandle) -> Any:
            traced.append(handle.session_id)
            return interpreter

    def context(request: Any, session: Any) -> RunContext[str]:
        seen.append((request.headers.get("x-tenant"), session is not None))
        ctx = RunContext.ephemeral(request.headers.get("x-tenant", "")).with_session(session)
        return ctx.with_tracer(TracerHandle(tracer=Tracer()))

    server = AgentCoreServer(LlmAgent(name="any", model=MockModel([say("ok")])), context=context)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url, headers=JSON) as http:
                answer = await http.post(
                    "/invocations",
                    json={"prompt": "hi"},
                    headers={"x-tenant": "acme", AGENTCORE_SESSION_HEADER: SESSION},
                )
                assert answer.status_code == 200
            group.cancel_scope.cancel()

    run(main)
    assert seen == [("acme", True)]
    assert traced == [SESSION]  # the AgentCore session id names the conversation in spans


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_mcp_protocol_serves_the_agent_as_one_tool(backend: str) -> None:
    model = MockModel([say("You spent $412 on groceries."), say("Second call.")])
    agent = LlmAgent(name="budget assistant", description="Answers budget questions.", model=model)
    server = AgentCoreServer(agent)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            # As on the platform: not loopback-only (its own Host names).
            url = await serving(server, group, mcp=True, local_only=False)
            async with Client(f"{url}/mcp") as client:
                (listed,) = (await client.list_tools()).tools
                assert listed.name == "budget_assistant" and listed.description == "Answers budget questions."
                answer = await client.call_tool("budget_assistant", {"input": "Groceries?"})
                (block,) = answer.content
                assert (
                    isinstance(block, mcp_types.TextContent) and block.text == "You spent $412 on groceries."
                )
            async with httpx.AsyncClient(base_url=url) as http:
                # What the platform does: its own Mcp-Session-Id, its own Host, no initialize first.
                raw = await http.post(
                    "/mcp",
                    json={
                        "jsonrpc": "2.0",
                        "id": 7,
                        "method": "tools/call",
                        "params": {"name": "budget_assistant", "arguments": {"input": "Again?"}},
                    },
                    headers={
                        "accept": "application/json, text/event-stream",
                        "host": "agentcore-runtime.internal",
                        "mcp-session-id": "platform-generated-0123456789abcdef",
                        "mcp-protocol-version": "2025-06-18",
                    },
                )
                assert raw.status_code == 200, raw.text
                assert "Second call." in raw.text

                async def idle() -> bool:  # busy until the call's handler has returned
                    return (await http.get("/ping")).json()["status"] == "Healthy"

                await wait_until(idle)
            group.cancel_scope.cancel()

    run(main, backend)


def test_serving_on_a_port_in_use_is_a_clear_error() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    server = AgentCoreServer(LlmAgent(name="any", model=MockModel([])))
    try:
        with pytest.raises(AgentCoreError, match=f"cannot listen on 127.0.0.1:{port}"):
            run(lambda: server.serve("127.0.0.1", port))
    finally:
        holder.close()


def test_messages_bodies_run_as_a_conversation() -> None:
    model = MockModel([say("Noted.")])
    server = AgentCoreServer(LlmAgent(name="chat", model=model))
    messages = [
        unstructure(UserMessage((TextPart("I earn $3,000."),)), Item),
        unstructure(UserMessage((TextPart("What can I save?"),)), Item),
    ]

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url, headers=JSON) as http:
                answer = await http.post("/invocations", json={"messages": messages})
                assert answer.json()["final_output"] == "Noted."
            group.cancel_scope.cancel()

    run(main)
    assert user_texts(model.requests[0].messages) == ["I earn $3,000.", "What can I save?"]


def gated_reporter(
    model: MockModel, session: MemorySession
) -> tuple[AgentCoreServer, anyio.Event, anyio.Event]:
    """``(server, started, release)``: an AgentCore server of one agent on
    ``session`` whose ``slow_report`` tool sets ``started``, then waits for
    ``release``. Made inside the run (its events belong to the running loop)."""
    started, release = anyio.Event(), anyio.Event()

    @tool
    async def slow_report() -> str:
        """Build the monthly report."""
        started.set()
        await release.wait()
        return "report ready"

    agent = LlmAgent(name="reporter", model=model, tools=[slow_report])
    return AgentCoreServer(agent, sessions=lambda sid: session if sid else None), started, release


def test_invocations_of_one_session_run_one_at_a_time() -> None:
    session = MemorySession()
    model = MockModel([call_tools(("slow_report", {})), say("First done."), say("Second done.")])

    async def main() -> None:
        server, started, release = gated_reporter(model, session)
        headers = {AGENTCORE_SESSION_HEADER: SESSION, **JSON}
        answers: dict[str, str] = {}
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:

                async def invoke(prompt: str) -> None:
                    answer = await http.post("/invocations", json={"prompt": prompt})
                    answers[prompt] = answer.json()["final_output"]

                async with anyio.create_task_group() as calls:
                    calls.start_soon(invoke, "first")
                    await started.wait()
                    calls.start_soon(invoke, "second")
                    await wait_until(lambda: _true(waiting(server) == 2))
                    await anyio.sleep(0.1)
                    assert model.calls == 1  # the second waits for the first's turn
                    release.set()
            group.cancel_scope.cancel()
        assert answers == {"first": "First done.", "second": "Second done."}

    run(main)
    assert user_texts(model.requests[2].messages) == ["first", "second"]


def test_a_quiet_sse_stream_gets_keep_alive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("helikon.server._agentcore_run.SSE_KEEPALIVE_S", 0.05)

    @tool
    async def think() -> str:
        """Think for a while."""
        await anyio.sleep(0.5)
        return "thought"

    model = MockModel([call_tools(("think", {})), say("Done thinking.")])
    server = AgentCoreServer(LlmAgent(name="thinker", model=model, tools=[think]))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group)
            async with httpx.AsyncClient(base_url=url) as http:
                answer = await http.post("/invocations", json={"prompt": "Think."}, headers=SSE)
                assert ": keep-alive\n\n" in answer.text
                assert sse_events(answer.text)[-1]["type"] == "RunCompleted"
            group.cancel_scope.cancel()

    run(main)


def test_stopping_the_server_cancels_the_runs_in_flight_and_keeps_their_turns() -> None:
    session = MemorySession()
    seen: list[str] = []

    async def main() -> None:
        started = anyio.Event()

        @tool
        async def wait_for_bank() -> str:
            """Wait for the bank's answer (it never comes)."""
            started.set()
            try:
                await anyio.sleep(60)
            except anyio.get_cancelled_exc_class():
                seen.append("tool cancelled")
                raise
            return "never"

        model = MockModel([call_tools(("wait_for_bank", {}))])
        agent = LlmAgent(name="banker", model=model, tools=[wait_for_bank])
        server = AgentCoreServer(agent, sessions=lambda sid: session if sid else None)
        async with anyio.create_task_group() as outer:
            async with anyio.create_task_group() as group:
                url = await serving(server, group)

                async def invoke() -> None:
                    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                        with contextlib.suppress(httpx.HTTPError):
                            await http.post(
                                "/invocations",
                                json={"prompt": "Pay my rent."},
                                headers={AGENTCORE_SESSION_HEADER: SESSION, **JSON},
                            )

                outer.start_soon(invoke)
                await started.wait()
                group.cancel_scope.cancel()  # stop the server
            # serve() has returned: the run was cancelled and its turn written.
            assert seen == ["tool cancelled"]
            kinds = [type(e) for e in await session.events()]
            assert kinds == [UserMessageEvent, ToolCallRecorded, ToolResultRecorded]

    run(main)


@pytest.mark.parametrize("mcp", [False, True])
def test_a_loopback_server_refuses_other_hosts_and_origins(mcp: bool) -> None:
    """DNS rebinding (a foreign Host) and cross-site POSTs (a foreign Origin)
    cannot reach a developer's server on 127.0.0.1."""
    model = MockModel([say("ok")])
    server = AgentCoreServer(LlmAgent(name="local", model=model))
    path = "/mcp" if mcp else "/invocations"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if mcp else {"prompt": "hi"}
    refused = [
        {"host": "evil.example"},
        {"host": "evil.example:8080"},
        {"host": "127.0.0.1.evil.example"},
        {"host": "0.0.0.0"},
        {"origin": "https://evil.example"},
        {"origin": "http://127.0.0.1.evil.example:80"},
        {"origin": "null"},
    ]

    async def main() -> None:
        async with anyio.create_task_group() as group:
            url = await serving(server, group, mcp=mcp)  # loopback: local-only by default
            accept = {"accept": "application/json, text/event-stream"}
            async with httpx.AsyncClient(base_url=url, headers=accept) as http:
                for headers in refused:
                    for method, where in (("POST", path), ("GET", "/ping")):
                        answer = await http.request(method, where, json=body, headers=headers)
                        assert answer.status_code == 403, (headers, where, answer.text)
                        assert answer.json()["error"]["code"] == "forbidden"
                port = url.rsplit(":", 1)[1]
                for headers in (
                    {},
                    {"host": f"localhost:{port}"},
                    {"origin": f"http://localhost:{port}"},
                    {"origin": "http://[::1]:3000"},
                ):
                    assert (await http.get("/ping", headers=headers)).status_code == 200, headers
                ok = await http.post(path, json=body, headers={"origin": f"http://127.0.0.1:{port}"})
                assert ok.status_code == 200, ok.text
            group.cancel_scope.cancel()

    run(main)
    assert model.calls == (0 if mcp else 1)


def test_a_client_gone_while_waiting_for_its_session_never_runs() -> None:
    session = MemorySession()
    model = MockModel([call_tools(("slow_report", {})), say("First done."), say("Third done.")])

    async def main() -> None:
        server, started, release = gated_reporter(model, session)
        headers = {AGENTCORE_SESSION_HEADER: SESSION, **JSON}
        answers: dict[str, str] = {}
        async with anyio.create_task_group() as group:
            url = await serving(server, group)

            async def invoke(prompt: str) -> None:
                async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
                    answer = await http.post("/invocations", json={"prompt": prompt})
                    answers[prompt] = answer.json()["final_output"]

            async with anyio.create_task_group() as calls:
                calls.start_soon(invoke, "first")
                await started.wait()
                async with anyio.create_task_group() as impatient:
                    impatient.start_soon(invoke, "second")
                    await wait_until(lambda: _true(waiting(server) == 2))  # queued behind "first"
                    impatient.cancel_scope.cancel()  # ... and gone
                await anyio.sleep(0.2)
                release.set()
            await invoke("third")
            group.cancel_scope.cancel()
        assert answers == {"first": "First done.", "third": "Third done."}

    run(main)
    assert model.calls == 3  # "second" never reached the model
    assert user_texts(model.requests[2].messages) == ["first", "third"]
    assert [e.content[0].text for e in anyio.run(session.events) if isinstance(e, UserMessageEvent)] == [
        "first",
        "third",
    ]


def test_a_durable_session_outlives_the_container(tmp_path: Any) -> None:
    """AgentCore stops containers without warning: with a SQLite provider a
    new server (a new container) continues the conversation."""
    database = str(tmp_path / "sessions.db")
    SqliteSession.migrate(database)
    models = [MockModel([say("Noted: Ada.")]), MockModel([say("You are Ada.")])]

    opened: list[SqliteSession] = []

    def provide(session_id: str | None) -> SqliteSession | None:
        if session_id is None:
            return None
        opened.append(SqliteSession.open_without_migrate(database, session_id))
        return opened[-1]

    async def main() -> None:
        for model, prompt in zip(models, ["I am Ada.", "Who am I?"], strict=True):
            server = AgentCoreServer(LlmAgent(name="chat", model=model), sessions=provide)
            async with anyio.create_task_group() as group:
                url = await serving(server, group)
                async with httpx.AsyncClient(base_url=url, headers=JSON) as http:
                    answer = await http.post(
                        "/invocations", json={"prompt": prompt}, headers={AGENTCORE_SESSION_HEADER: SESSION}
                    )
                    assert answer.status_code == 200, answer.text
                group.cancel_scope.cancel()
        for session in opened:
            await session.aclose()

    run(main)
    assert len(opened) == 2
    assert user_texts(models[1].requests[0].messages) == ["I am Ada.", "Who am I?"]
