"""Fold a model's event stream into one response.

Text chunks concatenate into text parts (a :class:`~helikon.model.TextBreak`
starts a new part); reasoning chunks concatenate into reasoning parts (a
chunk with a signature closes its part); tool-call chunks are grouped by
``index`` when the provider gives one, else by ``call_id``, else they extend
the latest call, so interleaved parallel calls reassemble correctly. Calls
keep the order in which they first appeared; a call with no id gets one
derived from ``(run id, turn, position)``, and a call whose id an earlier call
of the same response has is renamed ``<id>_<position>``, so the ids of one
turn are unique (an approval, a result names exactly one call). Usage adds up; the last
:class:`~helikon.model.Finish` wins.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from helikon.ids import CallId, RunId, derive_call_id
from helikon.items import ReasoningPart, ToolCall
from helikon.model import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    Usage,
)


@attrs.frozen
class Response:
    """One model turn, aggregated: ``text`` is all its text, ``text_parts`` the
    same text split where the provider's text blocks were."""

    text: str = ""
    reasoning: tuple[ReasoningPart, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    finish: FinishReason | None = None
    response_id: str | None = None
    text_parts: tuple[str, ...] = ()
    #: The model that answered, as the provider reported it.
    response_model: str | None = None


#: The usage of an answer that reports none.
_NO_USAGE = Usage()


#: A call being assembled: ``([call id or None, name], argument chunks)``
#: (plain lists, not an object: one is made per tool call of every turn).
_PartialCall: TypeAlias = tuple[list[str | None], list[str]]


def aggregate(events: tuple[ModelEvent, ...], run_id: RunId, turn: int) -> Response:
    """Fold ``events`` into a :class:`Response`.

    >>> from helikon.model import TextChunk, ToolCallChunk
    >>> r = aggregate((TextChunk("Hi "), TextChunk("there"),
    ...                ToolCallChunk(index=0, name="add", arguments='{"a":'),
    ...                ToolCallChunk(index=0, arguments='1}')), RunId("r"), 1)
    >>> r.text, r.calls
    ('Hi there', (ToolCall(call_id='call_r_1_0', name='add', arguments='{"a":1}'),))
    """
    texts: list[str] = []
    parts: list[str] = []
    reasoning: list[ReasoningPart] = []
    open_reasoning: list[str] = []
    calls: dict[tuple[str, int | str], _PartialCall] = {}
    last_key: tuple[str, int | str] | None = None
    usage = _NO_USAGE
    finish: FinishReason | None = None
    response_id: str | None = None
    response_model: str | None = None
    usage_seen = False
    for event in events:
        kind = type(event)  # dispatch on the exact type: the hot path of every turn
        if kind is TextChunk:
            texts.append(event.text)  # type: ignore[union-attr]
        elif kind is ToolCallChunk:
            chunk: ToolCallChunk = event  # type: ignore[assignment]
            index, call_id, name, arguments = chunk.index, chunk.call_id, chunk.name, chunk.arguments
            if index is not None:
                key: tuple[str, int | str] = ("i", index)
            elif call_id is not None:
                key = ("c", call_id)
            elif last_key is not None:
                key = last_key
            else:
                key = ("i", 0)
            partial = calls.get(key)
            if partial is None:
                partial = calls[key] = ([call_id, name or ""], [])
            else:
                known = partial[0]
                if known[0] is None and call_id is not None:
                    known[0] = call_id
                if name and not known[1]:
                    known[1] = name
            if arguments:
                partial[1].append(arguments)
            last_key = key
        elif kind is Usage:
            # ``Usage() + u`` has u's values: the first usage is kept as it is
            usage = usage + event if usage_seen else event  # type: ignore[operator,assignment]
            usage_seen = True
        elif kind is Finish:
            finished: Finish = event  # type: ignore[assignment]
            finish = finished.reason
            if finished.response_id is not None:
                response_id = finished.response_id
            if finished.response_model is not None:
                response_model = finished.response_model
        elif kind is TextBreak:
            parts.append("".join(texts))
            texts = []
        elif kind is ReasoningChunk:
            thought: ReasoningChunk = event  # type: ignore[assignment]
            open_reasoning.append(thought.text)
            if thought.signature is not None:
                reasoning.append(ReasoningPart("".join(open_reasoning), thought.signature))
                open_reasoning = []
    if open_reasoning:
        reasoning.append(ReasoningPart("".join(open_reasoning)))
    tool_calls: list[ToolCall] = []
    seen: set[str] = set()
    for position, ((given_id, name), chunks) in enumerate(calls.values()):
        call_id = CallId(given_id) if given_id else derive_call_id(run_id, turn, position)
        while call_id in seen:  # a duplicate id in one turn: the later call is renamed
            call_id = CallId(f"{call_id}_{position}")
        seen.add(call_id)
        tool_calls.append(ToolCall(call_id, name or "", "".join(chunks)))
    parts = [part for part in (*parts, "".join(texts)) if part]
    return Response(
        "".join(parts),
        tuple(reasoning),
        tuple(tool_calls),
        usage,
        finish,
        response_id,
        tuple(parts),
        response_model,
    )


__all__ = ["Response", "aggregate"]
