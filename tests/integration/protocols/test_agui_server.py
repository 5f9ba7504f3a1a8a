"""The AG-UI endpoint over real loopback HTTP: every event it emits is
validated by the ``ag-ui-protocol`` package's own types; tool calls, a
front-end tool run by the client, an approval answered through ``resume``,
auth and identity scoping, mounting in an outer app."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from protocol_support import answer, approving_context, assistant, serving
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.routing import Mount

from helikon import Handoff, LlmAgent, SequentialAgent
from helikon.errors import ConfigError
from helikon.protocols.agui import APPROVAL_EVENT, AguiServer, parse_events
from helikon.server import BearerAuth
from helikon.testing import FunctionModel

pytestmark = pytest.mark.integration

EVENT = TypeAdapter(Event)
LOCATE_TOOL = {
    "name": "where_am_i",
    "description": "Where the user is, from the browser.",
    "parameters": {"type": "object", "properties": {"precision": {"type": "string"}}},
}


def run(base: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[Any]:
    """POST one AG-UI run; its events, each validated by the official types."""
    response = httpx.post(
        base + "/", json=body, headers={"accept": "text/event-stream", **(headers or {})}, timeout=20
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [EVENT.validate_python(e) for e in parse_events(response.text)]
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    return events


def user(thread: str, run_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": text}],
        **extra,
    }


def types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_tool_call_streams_as_ag_ui_events(backend: str) -> None:
    with serving(AguiServer(assistant()).app(), backend) as base:
        events = run(base, user("t1", "r1", "weather please", state={"theme": "dark"}))
    assert types(events)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert events[1].snapshot == {"theme": "dark", "agent": "assistant"}
    start = next(e for e in events if e.type is EventType.TOOL_CALL_START)
    assert start.tool_call_name == "get_weather"
    args = next(e for e in events if e.type is EventType.TOOL_CALL_ARGS)
    assert args.delta == '{"city":"Paris"}'
    result = next(e for e in events if e.type is EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content) == (start.tool_call_id, "sunny in Paris")
    text = "".join(e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert text == "The tool said: sunny in Paris"
    starts = [e for e in events if e.type is EventType.TEXT_MESSAGE_START]
    ends = [e for e in events if e.type is EventType.TEXT_MESSAGE_END]
    assert [s.message_id for s in starts] == [e.message_id for e in ends]
    assert events[-1].type is EventType.RUN_FINISHED
    assert (events[-1].thread_id, events[-1].run_id) == ("t1", "r1")
    assert events[-1].result == "The tool said: sunny in Paris"


def test_the_client_runs_a_front_end_tool_and_the_same_run_goes_on() -> None:
    server = AguiServer(assistant())
    with serving(server.app()) as base:
        first = run(base, user("t2", "r1", "locate me", tools=[LOCATE_TOOL]))
        start = next(e for e in first if e.type is EventType.TOOL_CALL_START)
        assert start.tool_call_name == "where_am_i"
        assert not [e for e in first if e.type is EventType.TOOL_CALL_RESULT]  # the client runs it
        assert first[-1].outcome.type == "success"
        assert first[-1].outcome.pending_tool_call_ids == [start.tool_call_id]
        history = [
            {"id": "u1", "role": "user", "content": "locate me"},
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": start.tool_call_id,
                        "type": "function",
                        "function": {"name": "where_am_i", "arguments": '{"precision":"city"}'},
                    }
                ],
            },
            {"id": "t1", "role": "tool", "toolCallId": start.tool_call_id, "content": "Lyon"},
        ]
        second = run(base, {"threadId": "t2", "runId": "r2", "messages": history, "tools": [LOCATE_TOOL]})
    text = "".join(e.delta for e in second if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert text == "The tool said: Lyon"
    assert second[-1].outcome.type == "success" and not second[-1].outcome.pending_tool_call_ids
    assert not server.runs.runs  # the run ended: nothing waits


@pytest.mark.parametrize("approved", [True, False])
def test_an_approval_is_an_interrupt_answered_by_resume(approved: bool) -> None:
    with serving(AguiServer(assistant(), context=approving_context()).app()) as base:
        first = run(base, user("t3", "r1", "pay 5"))
        custom = [e for e in first if e.type is EventType.CUSTOM]
        assert [c.name for c in custom] == [APPROVAL_EVENT]
        assert custom[0].value["tool"] == "pay" and custom[0].value["arguments"] == {"amount": 5}
        outcome = first[-1].outcome
        assert outcome.type == "interrupt"
        (interrupt,) = outcome.interrupts
        assert interrupt.reason == "tool_approval" and interrupt.tool_call_id == custom[0].value["callId"]
        assert not [e for e in first if e.type is EventType.TOOL_CALL_RESULT]  # not paid yet
        resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": approved}}]
        second = run(base, {"threadId": "t3", "runId": "r2", "messages": [], "resume": resume})
    result = next(e for e in second if e.type is EventType.TOOL_CALL_RESULT)
    assert result.tool_call_id == interrupt.tool_call_id
    assert ("paid 5" in result.content) is approved
    assert second[-1].type is EventType.RUN_FINISHED and second[-1].outcome.type == "success"


def test_a_new_message_instead_of_an_answer_starts_over() -> None:
    server = AguiServer(assistant(), context=approving_context())
    with serving(server.app()) as base:
        first = run(base, user("t4", "r1", "pay 9"))
        assert first[-1].outcome.type == "interrupt"
        second = run(base, user("t4", "r2", "hello"))
    text = "".join(e.delta for e in second if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert text == "echo: hello"
    assert not server.runs.runs


def test_a_workflow_child_is_a_step() -> None:
    flow = SequentialAgent("flow").then(assistant("first")).then(assistant("second"))
    with serving(AguiServer(flow).app()) as base:
        events = run(base, user("t5", "r1", "hi", state={}))
    steps = [
        (e.type.value, e.step_name)
        for e in events
        if e.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED)
    ]
    assert steps == [
        ("STEP_STARTED", "first"),
        ("STEP_FINISHED", "first"),
        ("STEP_STARTED", "second"),
        ("STEP_FINISHED", "second"),
    ]
    deltas = [[op.model_dump() for op in e.delta] for e in events if e.type is EventType.STATE_DELTA]
    assert deltas == [
        [{"op": "add", "path": "/agent", "value": "first"}],
        [{"op": "add", "path": "/agent", "value": "second"}],
    ]


def test_bad_input_is_422_naming_the_field() -> None:
    with serving(AguiServer(assistant()).app()) as base:
        response = httpx.post(base + "/", json={"threadId": "t"}, timeout=10)
    assert response.status_code == 422
    assert "runId" in response.text or "run_id" in response.text


def test_auth_and_identity_scoping() -> None:
    auth = BearerAuth({"alice": "alice-token-1", "bob": "bob-token-22"})
    with serving(AguiServer(assistant(), context=approving_context(), auth=auth).app()) as base:
        refused = httpx.post(base + "/", json=user("t6", "r1", "hi"), timeout=10)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        wrong = httpx.post(
            base + "/", json=user("t6", "r1", "hi"), headers={"authorization": "Bearer nope-nope"}, timeout=10
        )
        assert wrong.status_code == 401
        alice = {"authorization": "Bearer alice-token-1"}
        bob = {"authorization": "Bearer bob-token-22"}
        first = run(base, user("t6", "r1", "pay 7"), alice)
        (interrupt,) = first[-1].outcome.interrupts
        resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
        # Bob's thread "t6" is not Alice's: his resume answers nothing and his run is his own.
        bobs = run(base, {**user("t6", "r2", "hello"), "resume": resume}, bob)
        assert not [e for e in bobs if e.type is EventType.TOOL_CALL_RESULT]
        assert "".join(e.delta for e in bobs if e.type is EventType.TEXT_MESSAGE_CONTENT) == "echo: hello"
        alices = run(base, {"threadId": "t6", "runId": "r3", "messages": [], "resume": resume}, alice)
    assert next(e for e in alices if e.type is EventType.TOOL_CALL_RESULT).content == "paid 7"


def test_mounted_in_an_outer_app_with_its_lifespan() -> None:
    server = AguiServer(assistant())
    outer = Starlette(routes=[Mount("/agui", server.app())], lifespan=server.lifespan)
    with serving(outer) as base:
        events = run(base + "/agui", user("t7", "r1", "hi"))
    assert events[-1].result == "echo: hi"


def test_an_approval_inside_a_handoff_target_is_answered_by_its_path() -> None:
    front = LlmAgent(name="front", model=FunctionModel(answer), handoffs=[Handoff.to(assistant("billing"))])
    with serving(AguiServer(front, context=approving_context()).app()) as base:
        first = run(base, user("t8", "r1", "transfer pay 3"))
        steps = [e.step_name for e in first if e.type is EventType.STEP_STARTED]
        assert steps == ["billing"]
        (interrupt,) = first[-1].outcome.interrupts
        assert interrupt.id == f"billing/{interrupt.tool_call_id}"
        resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": True}]
        second = run(base, {"threadId": "t8", "runId": "r2", "messages": [], "resume": resume})
    assert next(e for e in second if e.type is EventType.TOOL_CALL_RESULT).content == "paid 3"
    assert second[-1].result == "The tool said: paid 3"


def test_a_client_that_goes_away_cancels_its_run() -> None:
    server = AguiServer(assistant())
    with serving(server.app()) as base:
        with httpx.stream("POST", base + "/", json=user("t9", "r1", "slow"), timeout=10) as response:
            lines = response.iter_lines()
            assert "RUN_STARTED" in next(lines)
            assert server.runs.runs, list(lines)
        deadline = time.monotonic() + 10
        while server.runs.runs and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not server.runs.runs


def test_a_body_over_the_limit_is_413() -> None:
    with serving(AguiServer(assistant(), max_body_bytes=2048).app()) as base:
        big = user("t10", "r1", "x" * 4096)
        response = httpx.post(base + "/", json=big, timeout=10)
        assert response.status_code == 413 and "2048" in response.text
        chunked = httpx.post(base + "/", content=iter([json.dumps(big).encode()]), timeout=10)
        assert chunked.status_code == 413
        assert run(base, user("t10", "r2", "small"))[-1].result == "echo: small"


def test_waiting_runs_are_bounded_the_longest_waiting_is_evicted() -> None:
    """A client cannot make the server keep runs without bound: with
    ``max_runs=2`` a third waiting thread evicts the one that waited longest
    (its call denied, never run); the others still answer."""
    server = AguiServer(assistant(), context=approving_context(), max_runs=2)
    with serving(server.app()) as base:
        interrupts = {}
        for thread, amount in (("b1", 1), ("b2", 2), ("b3", 3)):
            (interrupts[thread],) = run(base, user(thread, "r1", f"pay {amount}"))[-1].outcome.interrupts
            time.sleep(0.05)  # b1 has waited longest
        assert sorted(key for _, key in server.runs.runs) == ["b2", "b3"]
        for thread, paid in (("b2", "paid 2"), ("b3", "paid 3")):
            resume = [{"interruptId": interrupts[thread].id, "status": "resolved", "payload": True}]
            second = run(base, {"threadId": thread, "runId": "r2", "messages": [], "resume": resume})
            assert next(e for e in second if e.type is EventType.TOOL_CALL_RESULT).content == paid
        resume = [{"interruptId": interrupts["b1"].id, "status": "resolved", "payload": True}]
        evicted = run(base, {**user("b1", "r2", "hello"), "resume": resume})
    assert not [e for e in evicted if e.type is EventType.TOOL_CALL_RESULT]
    assert evicted[-1].result == "echo: hello"


def test_when_every_slot_holds_a_working_run_a_new_thread_gets_503() -> None:
    server = AguiServer(assistant(), max_runs=1)
    with serving(server.app()) as base:
        with httpx.stream("POST", base + "/", json=user("w1", "r1", "slow"), timeout=10) as response:
            lines = response.iter_lines()  # kept: a collected iterator closes the stream
            assert "RUN_STARTED" in next(lines)
            busy = httpx.post(base + "/", json=user("w2", "r1", "hi"), timeout=10)
            assert busy.status_code == 503, busy.text
            assert busy.headers["retry-after"] == "2" and busy.json()["error"]["code"] == "busy"
        deadline = time.monotonic() + 10
        while server.runs.runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run(base, user("w2", "r2", "hi"))[-1].result == "echo: hi"


def test_a_question_unanswered_for_max_wait_is_denied_and_its_run_ends() -> None:
    server = AguiServer(assistant(), context=approving_context(), max_wait=0.3)
    with serving(server.app()) as base:
        first = run(base, user("m1", "r1", "pay 5"))
        assert first[-1].outcome.interrupts
        deadline = time.monotonic() + 10
        while server.runs.runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.runs.runs
    with pytest.raises(ConfigError, match="max_runs"):
        AguiServer(assistant(), max_runs=0)
    with pytest.raises(ConfigError, match="max_wait"):
        AguiServer(assistant(), max_wait=0)
