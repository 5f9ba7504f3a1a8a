"""Replay: recorded runs come back identical, and changes are caught."""

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


@tool(name="add")
async def add_strings(a: str, b: str) -> str:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def scripts() -> list[Any]:
    return [
        call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
        call_tools(("add", {"a": 3, "b": 7})),
        say("3, 7 and 10"),
    ]


def make_agent(model: MockModel | None = None, instructions: str = "Add.", tool_: Any = add) -> LlmAgent[Any]:
    return LlmAgent(
        name="calc", model=model or MockModel(scripts()), instructions=instructions, tools=[tool_]
    )


def run(agent: LlmAgent[Any], interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [event async for event in agent.run(None, "sums?", interpreter=interpreter)]

    return trio.run(go)


@pytest.fixture
def recorded() -> tuple[Trace, list[AgentEvent]]:
    recorder = RecordingInterpreter(LiveInterpreter())
    events = run(make_agent(), recorder)
    return Trace.from_bytes(recorder.trace.to_bytes()), events


def test_replay_gives_the_recorded_events_with_no_model(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, events = recorded
    silent = MockModel([])  # would fail if called

    assert run(make_agent(silent), ReplayInterpreter(trace)) == events
    assert silent.calls == 0


def test_changed_instructions_diverge_naming_the_field(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, _ = recorded

    with pytest.raises(ReplayDivergence) as info:
        run(make_agent(instructions="Subtract."), ReplayInterpreter(trace))

    message = str(info.value)
    assert info.value.step == 0
    assert "definition.instructions: expected 'Add.', got 'Subtract.'" in message


def test_changed_tool_schema_diverges_naming_the_field(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, _ = recorded

    with pytest.raises(ReplayDivergence) as info:
        run(make_agent(tool_=add_strings), ReplayInterpreter(trace))

    assert "definition.tools[0].parameters.properties.a.type: expected 'integer', got 'string'" in str(
        info.value
    )


def test_loose_replay_tolerates_changed_instructions(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, events = recorded

    replayed = run(make_agent(instructions="Subtract."), ReplayInterpreter(trace, strict=False))

    assert replayed == events


def test_loose_replay_still_catches_changed_tool_calls(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, _ = recorded
    tampered = make_agent(MockModel(scripts()))
    steps = list(trace.steps)
    first = steps[0]
    # Pretend the recording's model asked for different arguments.
    from helikon.effects import ModelResponded
    from helikon.model import Finish, FinishReason, ToolCallChunk

    steps[0] = type(first)(
        first.index,
        first.effect,
        ModelResponded((ToolCallChunk(0, "c1", "add", '{"a": 5, "b": 5}'), Finish(FinishReason.TOOL_CALLS))),
        first.events,
    )
    with pytest.raises(ReplayDivergence) as info:
        run(tampered, ReplayInterpreter(Trace(trace.header, tuple(steps), trace.final_events), strict=False))
    assert info.value.step == 1


def test_a_run_that_needs_more_steps_than_recorded_diverges(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, _ = recorded
    short = Trace(trace.header, trace.steps[:1], ())

    with pytest.raises(ReplayDivergence, match="the recording has ended"):
        run(make_agent(), ReplayInterpreter(short))


def test_a_run_that_ends_early_diverges(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    trace, _ = recorded
    from helikon.effects import ModelResponded
    from helikon.model import TextChunk

    first = trace.steps[0]
    steps = (
        type(first)(0, first.effect, ModelResponded((TextChunk("done"),)), first.events),
        *trace.steps[1:],
    )

    with pytest.raises(ReplayDivergence, match="more step"):
        run(make_agent(), ReplayInterpreter(Trace(trace.header, steps, trace.final_events)))


def test_the_message_shows_the_last_steps_before_the_divergence(
    recorded: tuple[Trace, list[AgentEvent]],
) -> None:
    trace, _ = recorded
    steps = list(trace.steps)
    from helikon.effects import CallModel

    # The second model call: after the round's calls, each answered as it came.
    at = next(i for i, s in enumerate(steps) if isinstance(s.effect, CallModel) and s.effect.turn == 2)
    last = steps[at]
    assert isinstance(last.effect, CallModel)
    steps[at] = type(last)(at, CallModel(last.effect.request, 99), last.result, last.events)

    with pytest.raises(ReplayDivergence) as info:
        run(make_agent(), ReplayInterpreter(Trace(trace.header, tuple(steps), trace.final_events)))

    message = str(info.value)
    assert f"replay diverged at step {at}" in message and "turn: expected 99, got 2" in message
    assert "#0: CallModel(turn=1) -> ModelResponded" in message
    assert "#1: ExecuteTools(add(" in message


# -- governance is part of what a replay checks (issue 12) -------------------------------------


def run_with(agent: LlmAgent[Any], ctx: Any, interpreter: Any) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [event async for event in agent.run(ctx, "sums?", interpreter=interpreter)]

    return trio.run(go)


def test_a_changed_permission_configuration_diverges_naming_it(
    recorded: tuple[Trace, list[AgentEvent]],
) -> None:
    from helikon import DenyRule, RunContext

    trace, _ = recorded
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.tool("add")])

    with pytest.raises(ReplayDivergence) as info:
        run_with(make_agent(), ctx, ReplayInterpreter(trace))

    assert "definition.governance.permissions.deny_rules" in str(info.value)


def test_a_changed_permission_mode_diverges_naming_it(recorded: tuple[Trace, list[AgentEvent]]) -> None:
    from helikon import PermissionMode, RunContext

    trace, _ = recorded
    ctx = RunContext.ephemeral(None).with_permission_mode(PermissionMode.PLAN)

    with pytest.raises(ReplayDivergence) as info:
        run_with(make_agent(), ctx, ReplayInterpreter(trace))

    assert "definition.governance.permissions.mode: expected 'default', got 'plan'" in str(info.value)


def test_a_loose_replay_only_warns_about_a_changed_definition(
    recorded: tuple[Trace, list[AgentEvent]],
) -> None:
    trace, events = recorded

    with pytest.warns(UserWarning, match="different agent definition"):
        replayed = run(make_agent(instructions="Subtract."), ReplayInterpreter(trace, strict=False))

    assert replayed == events


def test_a_trace_never_holds_a_secret_the_run_redacts() -> None:
    from helikon import RunContext

    secret = "sk-live-abcdef0123456789"

    @tool
    async def leak() -> str:
        """Leak."""
        return f"the key is {secret}"

    agent = LlmAgent(name="leaky", model=MockModel([call_tools(("leak", {})), say("ok")]), tools=[leak])
    ctx = RunContext.ephemeral(None).with_extra_secrets([secret])
    recorder = RecordingInterpreter(LiveInterpreter("r1"))
    events = run_with(agent, ctx, recorder)

    data = recorder.trace.to_bytes()
    assert secret.encode() not in data
    again = LlmAgent(name="leaky", model=MockModel([]), tools=[leak])
    assert run_with(again, ctx, ReplayInterpreter(Trace.from_bytes(data))) == events


def test_a_version_1_trace_is_refused_naming_its_version() -> None:
    from helikon.trace import TraceFormatError

    line = b'{"kind":"header","format":"helikon-trace","version":1,"agent":"a","run_id":"r"}\n'
    with pytest.raises(TraceFormatError, match="trace version 1 is not supported"):
        Trace.from_bytes(line)


def _with_effect(trace: Trace, index: int, effect: Any) -> Trace:
    import attrs

    steps = list(trace.steps)
    steps[index] = attrs.evolve(steps[index], effect=effect)
    return Trace(trace.header, tuple(steps), trace.final_events)


def test_a_tool_round_that_differs_from_the_recording_diverges_at_its_step(
    recorded: tuple[Trace, list[AgentEvent]],
) -> None:
    # A tool round streams nothing: the replay answers it without an async
    # generator (drive's ``result_of``), and still checks it first.
    import attrs

    from helikon.effects import ExecuteTools

    trace, _ = recorded
    round_ = trace.steps[4].effect  # the second round's one call (add 3 and 7)
    assert type(round_) is ExecuteTools
    other = ExecuteTools((attrs.evolve(round_.steps[0], args={"a": 3, "b": 8}),))

    with pytest.raises(ReplayDivergence) as info:
        run(make_agent(), ReplayInterpreter(_with_effect(trace, 4, other)))
    assert info.value.step == 4
    assert "effect ExecuteTools differs from the recording" in str(info.value)
    assert info.value.differences == ("steps[0].args.b: expected 8, got 7",)


@pytest.mark.parametrize(
    ("index", "change", "difference"),
    [
        (3, "tools", "request.tools[0].description: expected 'Add two things.', got 'Add two numbers.'"),
        (5, "settings", "request.settings.temperature: expected 0.5, got None"),
    ],
)
def test_a_later_request_with_other_tools_or_settings_diverges(
    recorded: tuple[Trace, list[AgentEvent]], index: int, change: str, difference: str
) -> None:
    # A request's tools and settings are compared again whenever they are not
    # the objects the previous (already compared) pair held.
    import attrs

    from helikon.effects import CallModel

    trace, _ = recorded
    call = trace.steps[index].effect
    assert type(call) is CallModel
    if change == "tools":
        request = attrs.evolve(
            call.request, tools=(attrs.evolve(call.request.tools[0], description="Add two things."),)
        )
    else:
        request = attrs.evolve(call.request, settings=attrs.evolve(call.request.settings, temperature=0.5))

    with pytest.raises(ReplayDivergence) as info:
        run(make_agent(), ReplayInterpreter(_with_effect(trace, index, attrs.evolve(call, request=request))))
    assert info.value.step == index
    assert difference in info.value.differences


def test_a_shared_prefix_is_compared_as_slicing_would() -> None:
    # A replay compares a request's prefix chunk by chunk when both
    # sequences are conversations; the answer is the one slicing gives.
    import random

    from helikon._conversation import Conversation
    from helikon.items import user_text
    from helikon.trace import _same_head, _since

    rng = random.Random(29)
    items = [user_text(str(n)) for n in range(300)]
    for _ in range(400):
        size = rng.randrange(0, 200)
        before = Conversation(items[:size])
        grown = before.append(items[size : size + rng.randrange(0, 80)])
        others = [
            grown,
            Conversation(items[: len(grown)]),  # equal items, no chunk shared
            Conversation((*items[: rng.randrange(0, len(grown) + 1)], user_text("other"), *items[:70])),
            tuple(grown),
        ]
        for messages in others:
            n = min(len(before), len(messages))
            assert _same_head(messages, before, n) == (messages[:n] == before[:n])
            start = rng.randrange(0, len(messages) + 1)
            assert tuple(_since(messages, start)) == tuple(messages)[start:]


# Strict replay answers each step at once (drive's ``answer_of``), with no
# async generator, and still catches every difference: a model step's deltas,
# a request whose earlier messages differ, events that differ at the end.


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
