"""Strict replay answers each step at once (drive's ``answer_of``), with no
async generator, and still catches every difference: a model step's deltas,
a request whose earlier messages differ, events that differ at the end."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from helikon import AgentEvent, LlmAgent, Trace, tool
from helikon._conversation import CHUNK, Conversation
from helikon.effects import CallModel
from helikon.events import ToolCallDelta
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayDivergence, ReplayInterpreter
from helikon.interpreters._replay import _grown
from helikon.items import TextPart, UserMessage
from helikon.testing import MockModel, call_tools, say


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def make_agent(model: MockModel | None = None) -> LlmAgent[Any]:
    scripts = [
        call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
        call_tools(("add", {"a": 3, "b": 7})),
        say("3, 7 and 10"),
    ]
    return LlmAgent(name="calc", model=model or MockModel(scripts), instructions="Add.", tools=[add])


def run(agent: LlmAgent[Any], interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [event async for event in agent.run(None, "sums?", interpreter=interpreter)]

    return trio.run(go)


@pytest.fixture
def recorded() -> tuple[Trace, list[AgentEvent]]:
    recorder = RecordingInterpreter(LiveInterpreter())
    events = run(make_agent(), recorder)
    return Trace.from_bytes(recorder.trace.to_bytes()), events


@pytest.fixture
def no_perform(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay that would iterate ``perform`` (an async generator) fails."""

    def perform(self: Any, effect: Any, env: Any) -> Any:
        raise AssertionError(f"perform was asked for {type(effect).__name__}")

    monkeypatch.setattr(ReplayInterpreter, "perform", perform)


def test_a_strict_replay_answers_every_step_without_perform(
    recorded: tuple[Trace, list[AgentEvent]], no_perform: None
) -> None:
    trace, events = recorded

    replayed = run(make_agent(MockModel([])), ReplayInterpreter(trace))

    assert replayed == events
    assert any(type(e) is ToolCallDelta for e in replayed)  # the model steps' deltas, in their place


def test_a_model_step_whose_deltas_differ_from_the_recording_diverges(
    recorded: tuple[Trace, list[AgentEvent]], no_perform: None
) -> None:
    # The recording says the first model call streamed another delta than
    # the one its chunks make: the replay's (made from the chunks) differ.
    trace, _ = recorded
    steps = list(trace.steps)
    first = steps[0]
    changed = tuple(
        attrs.evolve(e, args_delta=e.args_delta + " ") if type(e) is ToolCallDelta else e
        for e in first.events
    )
    steps[0] = attrs.evolve(first, events=changed, live=tuple(e for e in changed if type(e) is ToolCallDelta))

    with pytest.raises(ReplayDivergence) as info:
        tampered = Trace(trace.header, tuple(steps), trace.final_events)
        run(make_agent(MockModel([])), ReplayInterpreter(tampered))

    assert "the run's events differ from the recording" in str(info.value)
    assert any(".args_delta" in d for d in info.value.differences)


def test_a_later_request_whose_earlier_message_differs_diverges(
    recorded: tuple[Trace, list[AgentEvent]], no_perform: None
) -> None:
    # The third model call's recorded request starts with another user
    # message: the prefix check (not only the turn's growth) must see it.
    trace, _ = recorded
    index = max(s.index for s in trace.steps if type(s.effect) is CallModel)
    effect = trace.steps[index].effect
    assert type(effect) is CallModel
    messages = list(effect.request.messages)
    messages[0] = _user("sums!")
    other = attrs.evolve(effect, request=attrs.evolve(effect.request, messages=Conversation(messages)))
    steps = list(trace.steps)
    steps[index] = attrs.evolve(steps[index], effect=other)

    with pytest.raises(ReplayDivergence) as info:
        tampered = Trace(trace.header, tuple(steps), trace.final_events)
        run(make_agent(MockModel([])), ReplayInterpreter(tampered))

    assert info.value.step == index
    assert "effect CallModel differs from the recording" in str(info.value)
    assert any(d.startswith("request.messages[0]") for d in info.value.differences)


def _user(text: str) -> UserMessage:
    return UserMessage((TextPart(text),))


def _items(n: int) -> list[UserMessage]:
    return [_user(str(i)) for i in range(n)]


def test_grown_is_what_a_conversation_adds_to_the_previous_one() -> None:
    items = _items(3 * CHUNK)
    before = Conversation(items[: CHUNK - 3])
    within = before.append(items[CHUNK - 3 : CHUNK - 1])  # the open chunk grows
    across = within.append(items[CHUNK - 1 : 2 * CHUNK + 5])  # it fills, and the next one too

    assert _grown(within, before) == tuple(items[CHUNK - 3 : CHUNK - 1])
    assert _grown(across, within) == tuple(items[CHUNK - 1 : 2 * CHUNK + 5])
    assert _grown(across, before) == tuple(items[CHUNK - 3 : 2 * CHUNK + 5])
    assert _grown(before, before) == ()


def test_grown_is_none_unless_the_conversation_starts_with_the_previous_one() -> None:
    items = _items(2 * CHUNK)
    before = Conversation(items[:10])
    other_head = Conversation([_user("x"), *items[1:12]])
    shorter = Conversation(items[:5])
    long_before = Conversation(items[: CHUNK + 3])
    other_chunk = Conversation([_user("x"), *items[1 : CHUNK + 6]])

    assert _grown(other_head, before) is None
    assert _grown(shorter, before) is None
    assert _grown(other_chunk, long_before) is None
    assert _grown(tuple(items[:12]), before) is None  # not a conversation: compared the slow way
    assert _grown(before, tuple(items[:5])) is None


def test_a_step_whose_live_events_are_a_list_replays_them_one_by_one(
    recorded: tuple[Trace, list[AgentEvent]],
) -> None:
    # A trace built in code may hold a step's live events (a child agent's
    # forwarded ones) in a list: each is still an event of the run, in its place.
    trace, _ = recorded
    steps = list(trace.steps)
    at = next(n for n, s in enumerate(steps) if type(s.effect) is not CallModel)
    forwarded = ToolCallDelta(call_id="c9", name="add", args_delta="{}", index=0)
    steps[at] = attrs.evolve(steps[at], events=(*steps[at].events, forwarded), live=[forwarded])
    tampered = Trace(trace.header, tuple(steps), trace.final_events)

    replayed = run(make_agent(MockModel([])), ReplayInterpreter(tampered))

    assert replayed == list(tampered.events)
    assert all(type(e) is not list for e in replayed)
