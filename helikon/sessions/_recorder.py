"""Recording a run as session events: a pure fold plus a small mutable facade.

The runner seeds a recording with the run's new input items, feeds it every
:data:`~helikon.events.AgentEvent` the run emits, and appends what it
drained. Rules of the fold (:func:`record_event`):

- ``MessageOutput`` becomes ``assistant_message`` (with the message's agent,
  else the agent speaking now), ``ToolCallItem`` becomes ``tool_called``
  and opens the call, ``ToolOutputItem`` becomes ``tool_returned`` and
  closes it, ``HandoffItem`` becomes ``handoff_occurred``. ``RunStarted``,
  ``AgentUpdated`` and a handoff change the agent speaking now. Every other
  event (deltas, lifecycle, approvals, guardrails) is not conversation and
  is not recorded.
- Seed items map one to one (user, assistant, tool call, tool result); a
  system message is the agent's instructions or injected guidance, not
  history, and is not recorded.
- :func:`drain_events` hands over what was recorded and, for every call still
  open (the run was interrupted mid-tool), a synthetic error
  ``tool_returned`` (:data:`~helikon.sessions.INTERRUPTED_RESULT`), so the
  log projects to a provider-valid conversation on its own.
  :func:`take_events` hands over what was recorded without closing calls,
  for appending as the run goes.

Timestamps come in as ``at`` arguments (milliseconds since the epoch): the
fold never reads a clock. :class:`SessionRecorder` calls the clock it was
given when the caller passes no ``at``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import assert_never, final

import attrs

from helikon.events import (
    AgentEvent,
    AgentUpdated,
    HandoffItem,
    MessageOutput,
    RunStarted,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.items import AssistantMessage, Item, SystemMessage, ToolCall, ToolResult, UserMessage
from helikon.sessions._events import (
    AssistantMessageEvent,
    HandoffOccurred,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
)
from helikon.sessions._project import INTERRUPTED_RESULT


@attrs.frozen
class RecorderState:
    """A recording in progress.

    Args:
        pending: events recorded and not yet taken, in order.
        open_calls: tool calls seen without a result, in call order.
        agent: the agent speaking now, when known.
    """

    pending: tuple[SessionEvent, ...] = ()
    open_calls: tuple[ToolCall, ...] = ()
    agent: str | None = None


def _open(state: RecorderState, call: ToolCall) -> tuple[ToolCall, ...]:
    if any(c.call_id == call.call_id for c in state.open_calls):
        return state.open_calls
    return (*state.open_calls, call)


def _close(state: RecorderState, result: ToolResult) -> tuple[ToolCall, ...]:
    return tuple(c for c in state.open_calls if c.call_id != result.call_id)


def _item_event(state: RecorderState, item: Item, at: int) -> RecorderState:
    match item:
        case UserMessage(content=content):
            return attrs.evolve(state, pending=(*state.pending, UserMessageEvent(content, at=at)))
        case AssistantMessage(content=content, agent=agent):
            event = AssistantMessageEvent(content, agent or state.agent, at=at)
            return attrs.evolve(state, pending=(*state.pending, event))
        case ToolCall(call_id=call_id, name=name, arguments=arguments):
            call_event = ToolCallRecorded(call_id, name, arguments, at=at)
            return attrs.evolve(state, pending=(*state.pending, call_event), open_calls=_open(state, item))
        case ToolResult(call_id=call_id, name=name, content=content, is_error=is_error):
            result_event = ToolResultRecorded(call_id, content, name, is_error, at=at)
            return attrs.evolve(state, pending=(*state.pending, result_event), open_calls=_close(state, item))
        case SystemMessage():
            return state
        case _:
            assert_never(item)


def seed_recording(items: Iterable[Item], at: int, agent: str | None = None) -> RecorderState:
    """A recording that starts with the run's new input ``items``.

    >>> from helikon.items import user_text, system_text
    >>> state = seed_recording([system_text("be brief"), user_text("hi")], at=7)
    >>> [type(e).__name__ for e in state.pending]
    ['UserMessageEvent']
    """
    state = RecorderState(agent=agent)
    for item in items:
        state = _item_event(state, item, at)
    return state


def record_event(state: RecorderState, event: AgentEvent, at: int) -> RecorderState:
    """Fold one run event into the recording (rules in the module doc).

    >>> from helikon.ids import CallId
    >>> state = record_event(RecorderState(), ToolCallItem(ToolCall(CallId("c"), "f", "{}")), at=1)
    >>> [c.call_id for c in state.open_calls]
    ['c']
    """
    match event:
        case MessageOutput(item=item) | ToolCallItem(item=item) | ToolOutputItem(item=item):
            return _item_event(state, item, at)
        case HandoffItem(from_agent=from_agent, to_agent=to_agent):
            handoff = HandoffOccurred(from_agent, to_agent, at=at)
            return attrs.evolve(state, pending=(*state.pending, handoff), agent=to_agent)
        case RunStarted(agent=agent) | AgentUpdated(agent=agent):
            return state if state.agent == agent else attrs.evolve(state, agent=agent)
        case _:
            return state


def take_events(state: RecorderState) -> tuple[tuple[SessionEvent, ...], RecorderState]:
    """What was recorded since the last take, and the state without it (calls stay open)."""
    return state.pending, attrs.evolve(state, pending=())


def drain_events(state: RecorderState, at: int) -> tuple[tuple[SessionEvent, ...], RecorderState]:
    """What was recorded, plus a synthetic result for every open call; the emptied state.

    >>> from helikon.ids import CallId
    >>> state = record_event(RecorderState(), ToolCallItem(ToolCall(CallId("c"), "slow", "{}")), at=1)
    >>> events, state = drain_events(state, at=2)
    >>> [type(e).__name__ for e in events], events[-1].is_error, state.open_calls
    (['ToolCallRecorded', 'ToolResultRecorded'], True, ())
    """
    synthetic = tuple(
        ToolResultRecorded(c.call_id, INTERRUPTED_RESULT, c.name, True, at=at) for c in state.open_calls
    )
    return (*state.pending, *synthetic), attrs.evolve(state, pending=(), open_calls=())


@final
class SessionRecorder:
    """Records a run's events as session events (a mutable facade over the fold).

    Args:
        items: the run's new input items (not the history loaded from the
            session: that is in the log already).
        clock: milliseconds since the Unix epoch; called to stamp each event
            unless an explicit ``at`` is passed.
        agent: the agent the run starts with, when known.

    >>> from helikon.items import user_text
    >>> recorder = SessionRecorder([user_text("hi")], clock=lambda: 42)
    >>> recorder.observe(MessageOutput(AssistantMessage((), "bot")))
    >>> [(type(e).__name__, e.at) for e in recorder.drain()]
    [('UserMessageEvent', 42), ('AssistantMessageEvent', 42)]
    """

    def __init__(
        self, items: Iterable[Item] = (), *, clock: Callable[[], int], agent: str | None = None
    ) -> None:
        self._clock = clock
        self._state = seed_recording(items, clock(), agent)

    @property
    def state(self) -> RecorderState:
        """The recording so far."""
        return self._state

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls recorded without a result yet."""
        return self._state.open_calls

    def observe(self, event: AgentEvent, at: int | None = None) -> None:
        """Fold one run event in."""
        self._state = record_event(self._state, event, self._clock() if at is None else at)

    def take(self) -> tuple[SessionEvent, ...]:
        """Hand over what was recorded since the last take (to append as the run goes)."""
        events, self._state = take_events(self._state)
        return events

    def drain(self, at: int | None = None) -> tuple[SessionEvent, ...]:
        """Hand over the rest, closing every open call with a synthetic result."""
        events, self._state = drain_events(self._state, self._clock() if at is None else at)
        return events


__all__ = [
    "RecorderState",
    "SessionRecorder",
    "drain_events",
    "record_event",
    "seed_recording",
    "take_events",
]
