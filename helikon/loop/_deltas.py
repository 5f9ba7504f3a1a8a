"""Raw agent events from model events: the one function every interpreter
uses to stream deltas, live or replayed, so both streams are identical."""

from __future__ import annotations

from helikon.events import AgentEvent, ReasoningDelta, TokenDelta, ToolCallDelta
from helikon.model import ModelEvent, ReasoningChunk, TextChunk, ToolCallChunk


def delta_event(event: ModelEvent) -> AgentEvent | None:
    """The raw delta event for a model event, or None (usage, finish).

    >>> delta_event(TextChunk("hi"))
    TokenDelta(text='hi')
    """
    match event:
        case TextChunk(text=text):
            return TokenDelta(text)
        case ReasoningChunk(text=text):
            return ReasoningDelta(text) if text else None
        case ToolCallChunk(index=index, call_id=call_id, name=name, arguments=arguments):
            return ToolCallDelta(call_id, name, arguments, index)
        case _:
            return None


__all__ = ["delta_event"]
