"""Raw agent events from model events: the one function every interpreter
uses to stream deltas, live or replayed, so both streams are identical.

A chunk carrying text that is not in normal form (a lone surrogate) streams
no delta: the machine fails that model call by name (:mod:`helikon.loop._model_form`),
and the bad text never reaches an event stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from helikon._normal import is_normal
from helikon.events import AgentEvent, ReasoningDelta, TokenDelta, ToolCallDelta
from helikon.model import ModelEvent, ReasoningChunk, TextChunk, ToolCallChunk


def _ok(text: str | None) -> bool:
    return text is None or text.isascii() or is_normal(text)


def _text(event: TextChunk) -> AgentEvent | None:
    return TokenDelta(event.text) if _ok(event.text) else None


def _reasoning(event: ReasoningChunk) -> AgentEvent | None:
    return ReasoningDelta(event.text) if event.text and _ok(event.text) else None


def _tool_call(event: ToolCallChunk) -> AgentEvent | None:
    if not (_ok(event.arguments) and _ok(event.name) and _ok(event.call_id)):
        return None
    return ToolCallDelta(event.call_id, event.name, event.arguments, event.index)


# A type-keyed table rather than a match: this runs once per streamed chunk.
_MAKERS: Final[dict[type, Callable[[ModelEvent], AgentEvent | None]]] = {
    TextChunk: _text,  # type: ignore[dict-item]
    ReasoningChunk: _reasoning,  # type: ignore[dict-item]
    ToolCallChunk: _tool_call,  # type: ignore[dict-item]
}


def delta_event(event: ModelEvent) -> AgentEvent | None:
    """The raw delta event for a model event, or None (usage, finish).

    >>> delta_event(TextChunk("hi"))
    TokenDelta(text='hi', path=())
    >>> from helikon.model import Usage
    >>> delta_event(Usage(1, 2)) is None
    True
    """
    make = _MAKERS.get(type(event))
    return None if make is None else make(event)


__all__ = ["delta_event"]
