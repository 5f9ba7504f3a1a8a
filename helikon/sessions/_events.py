"""The session log's entries: :data:`SessionEvent` and its JSON form.

A session is an append-only log of these events, not a list of messages
(see :mod:`helikon.sessions._project` for the fold that turns one into the
other). This module owns the carriers and their on-disk encoding; its rules:

- Every event is a frozen attrs class carrying ``at``: when it was logged,
  as an ``int`` of **milliseconds since the Unix epoch (UTC)**. The pure core
  never stamps it: the interpreter side (the run's recorder, a compacting
  wrapper) passes the clock's reading in.
- The JSON form is tagged: ``{"type": "<tag>", ...fields}`` with the book's
  snake_case tags (``user_message``, ``assistant_message``, ``tool_called``,
  ``tool_returned``, ``handoff_occurred``, ``compacted``); content parts are
  tagged the same way (``text``, ``reasoning``, ``image``). The tags and field
  names are the on-disk format and never follow a Python rename: the
  mapping below is explicit and the golden tests pin it.
- Decoding is strict: an unknown tag, a missing field or a value of the
  wrong JSON type raises :class:`EventDecodeError`, never a coerced value.
  Unknown extra keys are ignored, so an older reader survives a newer writer.
- :data:`SequenceId` is an event's position in one log: contiguous from 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Final, NewType, TypeAlias

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.ids import CallId
from helikon.items import ContentPart, ImagePart, ReasoningPart, TextPart

if TYPE_CHECKING:
    from cattrs import Converter

#: The position of an event in one session's log: 0 for the first event,
#: then contiguous (no gaps, no duplicates), whatever the backend.
SequenceId = NewType("SequenceId", int)


def _non_negative(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class UserMessageEvent:
    """The user said ``content``."""

    content: tuple[ContentPart, ...]
    at: int = attrs.field(kw_only=True)

    @classmethod
    def from_text(cls, text: str, *, at: int) -> UserMessageEvent:
        """A user message of one text part.

        >>> UserMessageEvent.from_text("hi", at=0).content
        (TextPart(text='hi'),)
        """
        return cls((TextPart(text),), at=at)


@attrs.frozen
class AssistantMessageEvent:
    """Agent ``agent`` (``None`` when unknown) answered ``content``."""

    content: tuple[ContentPart, ...]
    agent: str | None = None
    at: int = attrs.field(kw_only=True)

    @classmethod
    def from_text(cls, text: str, agent: str | None = None, *, at: int) -> AssistantMessageEvent:
        """An assistant message of one text part."""
        return cls((TextPart(text),), agent, at=at)


@attrs.frozen
class ToolCallRecorded:
    """The model called tool ``name`` with the raw JSON text ``arguments``."""

    call_id: CallId
    name: str
    arguments: str
    at: int = attrs.field(kw_only=True)


@attrs.frozen
class ToolResultRecorded:
    """Tool call ``call_id`` returned ``content`` (the text the model sees).

    ``name`` may be empty: the projection then takes the call's name.
    """

    call_id: CallId
    content: str
    name: str = ""
    is_error: bool = False
    at: int = attrs.field(kw_only=True)


@attrs.frozen
class HandoffOccurred:
    """Control passed from ``from_agent`` to ``to_agent`` (audit only)."""

    from_agent: str
    to_agent: str
    at: int = attrs.field(kw_only=True)


@attrs.frozen
class Compacted:
    """The ``original_count`` events before this one are summarised by ``summary``."""

    summary: str
    original_count: int = attrs.field(validator=_non_negative)
    at: int = attrs.field(kw_only=True)


#: One entry of a session's log.
SessionEvent: TypeAlias = (
    UserMessageEvent
    | AssistantMessageEvent
    | ToolCallRecorded
    | ToolResultRecorded
    | HandoffOccurred
    | Compacted
)

#: The on-disk tag of each event class (the book's serde names).
EVENT_TAGS: Final[Mapping[type, str]] = {
    UserMessageEvent: "user_message",
    AssistantMessageEvent: "assistant_message",
    ToolCallRecorded: "tool_called",
    ToolResultRecorded: "tool_returned",
    HandoffOccurred: "handoff_occurred",
    Compacted: "compacted",
}

#: The on-disk tag of each content part class.
PART_TAGS: Final[Mapping[type, str]] = {
    TextPart: "text",
    ReasoningPart: "reasoning",
    ImagePart: "image",
}


_KNOWN_TAGS: Final = frozenset(EVENT_TAGS.values())


def event_tag(event: SessionEvent) -> str:
    """The on-disk ``type`` tag of ``event``.

    >>> event_tag(HandoffOccurred("triage", "billing", at=0))
    'handoff_occurred'
    """
    return EVENT_TAGS[type(event)]


class EventDecodeError(ValueError):
    """Stored data is not a valid :data:`SessionEvent`."""


def _strict(kind: type) -> Callable[[object, object], object]:
    def structure(value: object, _: object) -> object:
        # bool is an int in Python; JSON keeps them apart and so do we.
        if type(value) is not kind:
            raise TypeError(f"expected a JSON {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


@cache
def _converter() -> Converter:
    """The sessions' converter (built on first use: cattrs is slow to import)."""
    from cattrs import Converter
    from cattrs.strategies import configure_tagged_union

    # Unknown keys are ignored (as serde does), so a reader survives a newer
    # writer that added a field; unknown tags are not.
    conv = Converter()
    for kind in (str, int, bool):
        conv.register_structure_hook(kind, _strict(kind))
    configure_tagged_union(ContentPart, conv, tag_generator=PART_TAGS.__getitem__, tag_name="type")
    configure_tagged_union(SessionEvent, conv, tag_generator=EVENT_TAGS.__getitem__, tag_name="type")
    return conv


def event_to_json(event: SessionEvent) -> dict[str, JsonValue]:
    """``event`` as tagged JSON-compatible data.

    >>> event_to_json(UserMessageEvent.from_text("hi", at=5))
    {'content': [{'text': 'hi', 'type': 'text'}], 'at': 5, 'type': 'user_message'}
    """
    data: dict[str, JsonValue] = _converter().unstructure(event, unstructure_as=SessionEvent)
    return data


def event_from_json(data: object) -> SessionEvent:
    """Rebuild an event from :func:`event_to_json`'s output.

    Raises:
        EventDecodeError: ``data`` is not a valid event.

    >>> event_from_json({"type": "compacted", "summary": "s", "original_count": 3, "at": 9})
    Compacted(summary='s', original_count=3, at=9)
    """
    tag = data.get("type") if isinstance(data, Mapping) else None
    if tag not in _KNOWN_TAGS:
        raise EventDecodeError(f"not a session event: unknown type tag {tag!r}")
    try:
        event: SessionEvent = _converter().structure(data, SessionEvent)  # type: ignore[arg-type]
    except Exception as exc:
        raise EventDecodeError(f"not a session event: {_describe(exc)}") from exc
    return event


def encode_event(event: SessionEvent) -> bytes:
    """``event`` as compact UTF-8 JSON with sorted keys (byte-stable).

    >>> encode_event(HandoffOccurred("a", "b", at=1))
    b'{"at":1,"from_agent":"a","to_agent":"b","type":"handoff_occurred"}'
    """
    return msgspec.json.encode(event_to_json(event), order="sorted")


def decode_event(data: bytes | str) -> SessionEvent:
    """Rebuild an event from its JSON text.

    Raises:
        EventDecodeError: ``data`` is not JSON or not a valid event.
    """
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"not JSON: {exc}") from exc
    return event_from_json(raw)


def _describe(exc: BaseException) -> str:
    from cattrs.errors import ClassValidationError

    if isinstance(exc, ClassValidationError):
        from cattrs import transform_error

        return "; ".join(transform_error(exc))
    return f"{type(exc).__name__}: {exc}"


__all__ = [
    "EVENT_TAGS",
    "PART_TAGS",
    "AssistantMessageEvent",
    "Compacted",
    "EventDecodeError",
    "HandoffOccurred",
    "SequenceId",
    "SessionEvent",
    "ToolCallRecorded",
    "ToolResultRecorded",
    "UserMessageEvent",
    "decode_event",
    "encode_event",
    "event_from_json",
    "event_tag",
    "event_to_json",
]
