"""Projection: the fold from a session's event log to a conversation.

:func:`project` is pure and total: any log, however it was written, folds to
a tuple of :data:`~helikon.items.Item` a provider accepts. Its rules, in
order:

1. Each message event maps to one item: ``user_message`` to a
   :class:`~helikon.items.UserMessage`, ``assistant_message`` to an
   :class:`~helikon.items.AssistantMessage`, ``tool_called`` to a
   :class:`~helikon.items.ToolCall`, ``tool_returned`` to a
   :class:`~helikon.items.ToolResult`.
2. ``handoff_occurred`` is audit only: it yields no item.
3. ``compacted`` drops the items of the ``original_count`` events before it
   (the previous running summary included, when it lies in that range) and
   emits its summary as a :class:`~helikon.items.SystemMessage`. A marker
   written by :class:`~helikon.sessions.CompactingSession` covers the whole
   log before it, so the conversation is one summary and what came after.
4. The result is made provider-valid (:func:`conversation_problems` finds
   nothing): every tool call is answered exactly once, after the call and
   before the next message. A call still open when a message (or the end of
   the log) comes gets a synthetic error result
   (:data:`INTERRUPTED_RESULT`), a result that answers no open call (its
   call was compacted away, or it answers twice) is dropped, and a result
   with no tool name takes its call's. A log whose run was killed mid-tool
   therefore still projects to a conversation a provider accepts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final, assert_never

from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    Item,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
)
from helikon.sessions._events import (
    AssistantMessageEvent,
    Compacted,
    HandoffOccurred,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
)

#: What the model sees for a tool call whose result was never recorded.
INTERRUPTED_RESULT: Final = "Tool call interrupted: no result was recorded."


def event_item(event: SessionEvent) -> Item | None:
    """The item one event maps to (``None`` for the audit-only and marker events).

    >>> event_item(ToolCallRecorded(CallId("c1"), "add", '{"a":1}', at=0))
    ToolCall(call_id='c1', name='add', arguments='{"a":1}')
    >>> event_item(HandoffOccurred("a", "b", at=0)) is None
    True
    """
    match event:
        case UserMessageEvent(content=content):
            return UserMessage(content)
        case AssistantMessageEvent(content=content, agent=agent):
            return AssistantMessage(content, agent)
        case ToolCallRecorded(call_id=call_id, name=name, arguments=arguments):
            return ToolCall(call_id, name, arguments)
        case ToolResultRecorded(call_id=call_id, content=content, name=name, is_error=is_error):
            return ToolResult(call_id, name, content, is_error)
        case HandoffOccurred() | Compacted():
            return None
        case _:
            assert_never(event)


def project(events: Sequence[SessionEvent]) -> tuple[Item, ...]:
    """Fold a session log into the conversation a provider reads (rules above).

    >>> from helikon.sessions._events import UserMessageEvent as U
    >>> log = [U.from_text("hi", at=0), U.from_text("again", at=1), Compacted("greetings", 2, at=2),
    ...        U.from_text("next", at=3)]
    >>> [type(i).__name__ for i in project(log)]
    ['SystemMessage', 'UserMessage']
    >>> project([ToolCallRecorded(CallId("c"), "slow", "{}", at=0)])[-1].is_error
    True
    """
    # (index of the event that produced it, item): a marker drops by index.
    kept: list[tuple[int, Item]] = []
    for index, event in enumerate(events):
        if type(event) is Compacted:
            cut = max(0, index - event.original_count)
            del kept[bisect_left(kept, cut, key=lambda entry: entry[0]) :]
            kept.append((index, system_text(event.summary)))
            continue
        item = event_item(event)
        if item is not None:
            kept.append((index, item))
    return make_valid(tuple(item for _, item in kept))


def make_valid(items: Sequence[Item]) -> tuple[Item, ...]:
    """Answer every tool call exactly once, before the next message (rule 4).

    >>> calls = (ToolCall(CallId("a"), "f", "{}"), ToolCall(CallId("b"), "f", "{}"))
    >>> fixed = make_valid((*calls, ToolResult(CallId("b"), "", "ok"), ToolResult(CallId("b"), "f", "again")))
    >>> [(type(i).__name__, i.call_id) for i in fixed]
    [('ToolCall', 'a'), ('ToolCall', 'b'), ('ToolResult', 'b'), ('ToolResult', 'a')]
    >>> fixed[2].name, fixed[3].is_error
    ('f', True)
    """
    out: list[Item] = []
    pending: dict[CallId, ToolCall] = {}  # open calls of the current group, in call order
    answering = False  # the current group got a result: a new call starts a new group

    def close_group() -> None:
        nonlocal answering
        out.extend(ToolResult(c.call_id, c.name, INTERRUPTED_RESULT, is_error=True) for c in pending.values())
        pending.clear()
        answering = False

    for item in items:
        match item:
            case ToolCall(call_id=call_id):
                if answering:
                    close_group()
                if call_id in pending:
                    continue  # the same call twice: keep the first
                pending[call_id] = item
                out.append(item)
            case ToolResult(call_id=call_id):
                call = pending.pop(call_id, None)
                if call is None:
                    continue  # answers no open call
                out.append(item if item.name else ToolResult(call_id, call.name, item.content, item.is_error))
                answering = True
            case UserMessage() | SystemMessage() | AssistantMessage():
                close_group()
                out.append(item)
            case _:
                assert_never(item)
    close_group()
    return tuple(out)


def conversation_problems(items: Sequence[Item]) -> tuple[str, ...]:
    """Why a provider would reject ``items`` (empty when it is valid).

    Valid means: every tool call is answered by exactly one result, which
    comes after it and before the next message; no result answers a call
    that is not open; a group's calls all come before its first result.

    >>> conversation_problems((ToolCall(CallId("a"), "f", "{}"),))
    ("tool call 'a' (item 0) is never answered",)
    """
    problems: list[str] = []
    pending: dict[CallId, int] = {}
    answering = False

    def close(at: str) -> None:
        nonlocal answering
        problems.extend(
            f"tool call {cid!r} (item {pos}) is never answered{at}" for cid, pos in pending.items()
        )
        pending.clear()
        answering = False

    for pos, item in enumerate(items):
        match item:
            case ToolCall(call_id=call_id):
                if answering:
                    close(f" before the new call at item {pos}")
                if call_id in pending:
                    problems.append(f"tool call {call_id!r} is repeated at item {pos}")
                pending[call_id] = pos
            case ToolResult(call_id=call_id):
                if pending.pop(call_id, None) is None:
                    problems.append(f"tool result {call_id!r} at item {pos} answers no open call")
                answering = True
            case UserMessage() | SystemMessage() | AssistantMessage():
                close(f" before the message at item {pos}")
            case _:
                assert_never(item)
    close("")
    return tuple(problems)


__all__ = ["INTERRUPTED_RESULT", "conversation_problems", "event_item", "make_valid", "project"]
