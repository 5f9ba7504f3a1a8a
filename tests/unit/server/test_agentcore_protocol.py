"""The AgentCore wire rules, one function at a time: which answer a request
gets, which bodies and session ids are accepted, and what ``/ping`` says."""

from __future__ import annotations

import msgspec
import pytest

from helikon.codec import unstructure
from helikon.events import RunCompleted, TokenDelta
from helikon.items import AssistantMessage, Item, TextPart, UserMessage
from helikon.model import Usage
from helikon.server import AGENTCORE_SESSION_HEADER, PingState, PingStatus
from helikon.server._agentcore_protocol import (
    BadInvocation,
    check_session_id,
    foreign_request,
    json_answer,
    parse_invocation,
    sse_message,
    wants_json,
)


@pytest.mark.parametrize(
    ("accept", "stream", "json_mode"),
    [
        (None, None, True),  # JSON unless SSE is asked for, as the official app
        ("", None, True),
        ("*/*", None, True),
        ("application/json", None, True),
        ("Application/JSON; charset=utf-8", None, True),
        ("text/event-stream", None, False),
        ("application/json, text/event-stream", None, True),  # the first listed wins a tie
        ("text/event-stream, application/json", None, False),
        ("text/event-stream;q=0.2, application/json;q=0.9", None, True),
        ("application/json;q=0, text/event-stream", None, False),  # q=0 means "not this"
        ("application/json;q=bogus", None, True),
        ("text/html", None, True),
        ("application/json", True, False),  # the body's "stream" wins
        ("text/event-stream", False, True),
    ],
)
def test_the_answer_form(accept: str | None, stream: bool | None, json_mode: bool) -> None:
    assert wants_json(accept, stream) is json_mode


def test_prompt_and_input_are_one_user_message() -> None:
    for key in ("prompt", "input"):
        invocation = parse_invocation(msgspec.json.encode({key: "How am I doing?", "extra": {"a": 1}}))
        assert invocation.input.items == (UserMessage((TextPart("How am I doing?"),)),)
        assert invocation.stream is None


def test_messages_are_helikon_items_in_their_tagged_form() -> None:
    items = (
        UserMessage((TextPart("hi"),)),
        AssistantMessage((TextPart("hello"),)),
        UserMessage((TextPart("?"),)),
    )
    body = msgspec.json.encode({"messages": [unstructure(i, Item) for i in items], "stream": True})
    invocation = parse_invocation(body)
    assert invocation.input.items == items and invocation.stream is True


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"", 400, "empty"),
        (b"  \n", 400, "empty"),
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 422, "JSON object"),
        (b'"hi"', 422, "JSON object"),
        (b"{}", 422, "got none"),
        (b'{"question": "hi"}', 422, "got none"),
        (b'{"prompt": "a", "input": "b"}', 422, "'prompt' and 'input'"),
        (b'{"prompt": "a", "messages": []}', 422, "exactly one"),
        (b'{"prompt": 3}', 422, "'prompt' must be a non-empty string"),
        (b'{"input": "   "}', 422, "'input' must be a non-empty string"),
        (b'{"prompt": null}', 422, "non-empty string"),
        (b'{"messages": "hi"}', 422, "non-empty list"),
        (b'{"messages": []}', 422, "non-empty list"),
        (b'{"messages": [{"type": "Nope"}]}', 422, "messages[0] is not a helikon item"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', 422, "messages[0]"),
        (b'{"prompt": "hi", "stream": "yes"}', 422, "'stream' must be true or false"),
    ],
)
def test_bad_bodies_are_refused_clearly(body: bytes, status: int, says: str) -> None:
    with pytest.raises(BadInvocation) as caught:
        parse_invocation(body)
    assert caught.value.status == status
    assert says in caught.value.message


@pytest.mark.parametrize("length", [33, 34, 100, 256])
def test_session_ids_within_the_contract(length: int) -> None:
    value = ("a1-_." * 60)[:length]
    assert check_session_id(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "a" * 32,
        "a" * 257,
        "a" * 40 + " b",  # a space
        "a" * 40 + "\x00",  # a control character
        "a" * 40 + "\n",
        "a" * 40 + "é",  # not ASCII
    ],
)
def test_session_ids_outside_the_contract_are_refused(value: str) -> None:
    with pytest.raises(BadInvocation) as caught:
        check_session_id(value)
    assert caught.value.status == 400 and AGENTCORE_SESSION_HEADER in caught.value.message


def test_answers_on_the_wire() -> None:
    assert msgspec.json.decode(json_answer("done", Usage(5, 2))) == {
        "final_output": "done",
        "usage": {
            "input_tokens": 5,
            "output_tokens": 2,
            "cached_input_tokens": 0,
            "reasoning_tokens": 0,
            "cache_creation_input_tokens": 0,
            "requests": 0,
            "tool_calls": 0,
            "cost": None,
        },
    }
    message = sse_message(TokenDelta("hi"))
    assert message.startswith(b"data: ") and message.endswith(b"\n\n") and message.count(b"\n") == 2
    assert msgspec.json.decode(message[6:]) == {"type": "TokenDelta", "text": "hi"}
    assert msgspec.json.decode(sse_message(RunCompleted(Usage(1, 1)))[6:])["type"] == "RunCompleted"


def test_ping_reports_busy_while_work_runs_and_stamps_only_changes() -> None:
    now = [1000.0]
    ping = PingState(clock=lambda: now[0])
    assert ping.body() == {"status": "Healthy", "time_of_last_update": 1000}

    now[0] = 1005.0
    assert ping.body() == {"status": "Healthy", "time_of_last_update": 1000}  # no change, no stamp
    with ping.busy():
        assert ping.body() == {"status": "HealthyBusy", "time_of_last_update": 1005}
        now[0] = 1010.0
        with ping.busy():  # still busy: the stamp stays
            assert ping.body() == {"status": "HealthyBusy", "time_of_last_update": 1005}
        assert ping.status is PingStatus.HEALTHY_BUSY
    assert ping.body() == {"status": "Healthy", "time_of_last_update": 1010}

    now[0] = 1020.0
    ping.force(PingStatus.HEALTHY_BUSY)
    assert ping.body() == {"status": "HealthyBusy", "time_of_last_update": 1020}
    ping.force(None)
    assert ping.status is PingStatus.HEALTHY and ping.time_of_last_update == 1020


def test_ping_busy_is_released_when_the_work_raises() -> None:
    ping = PingState()
    with pytest.raises(RuntimeError), ping.busy():
        raise RuntimeError("boom")
    assert ping.status is PingStatus.HEALTHY


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:8080", None),
        ("LOCALHOST:8080", None),
        ("localhost", "http://localhost:5173"),
        ("[::1]:8080", "http://[::1]:8080"),
        ("127.0.0.2:9", "https://127.0.0.1"),
    ],
)
def test_loopback_requests_pass(host: str, origin: str | None) -> None:
    assert foreign_request(host, origin) is None


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        (None, None),  # no Host at all
        ("", None),
        ("evil.example", None),
        ("localhost.evil.example", None),
        ("127.0.0.1.evil.example:80", None),
        ("0.0.0.0:8080", None),
        ("10.0.0.5:8080", None),
        ("[::ffff:8.8.8.8]:80", None),
        ("127.0.0.1:8080", "https://evil.example"),
        ("127.0.0.1:8080", "http://localhost.evil.example"),
        ("127.0.0.1:8080", "null"),
        ("127.0.0.1:8080", "file:///home/me/page.html"),
        ("127.0.0.1:8080", ""),
    ],
)
def test_requests_from_elsewhere_are_foreign(host: str | None, origin: str | None) -> None:
    assert foreign_request(host, origin) is not None
