"""Conversation items and their content parts.

A conversation is a tuple of :data:`Item`. Items are frozen and carry only
strings, numbers and tuples, so a conversation can be hashed, compared,
recorded and replayed. Tool-call arguments keep the exact JSON text the model
produced; tool results keep the exact text the model will see.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from helikon.ids import CallId


@attrs.frozen
class TextPart:
    """Plain text."""

    text: str


@attrs.frozen
class ReasoningPart:
    """Model reasoning ("thinking") text, kept so providers can send it back.

    ``signature`` is the provider's opaque integrity token, when it sends one.
    """

    text: str
    signature: str | None = None


@attrs.frozen
class ImagePart:
    """An image, either by URL or inline base64 ``data`` with its media type."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None


#: One piece of a message's content.
ContentPart: TypeAlias = TextPart | ReasoningPart | ImagePart


@attrs.frozen
class UserMessage:
    """A message from the user."""

    content: tuple[ContentPart, ...]


@attrs.frozen
class SystemMessage:
    """A system (developer) message: instructions or injected guidance."""

    content: tuple[ContentPart, ...]


@attrs.frozen
class AssistantMessage:
    """A message the model produced; ``agent`` names the agent that spoke."""

    content: tuple[ContentPart, ...]
    agent: str | None = None


@attrs.frozen
class ToolCall:
    """The model asked to run tool ``name`` with JSON ``arguments`` (raw text)."""

    call_id: CallId
    name: str
    arguments: str


@attrs.frozen
class ToolResult:
    """What a tool call returned, as the text the model sees.

    ``is_error`` marks results that report a failure (invalid arguments, an
    unknown tool, a tool that raised) rather than the tool's output.
    """

    call_id: CallId
    name: str
    content: str
    is_error: bool = False


#: One entry of a conversation.
Item: TypeAlias = UserMessage | SystemMessage | AssistantMessage | ToolCall | ToolResult


def text_of(content: tuple[ContentPart, ...]) -> str:
    """Concatenate the text parts of ``content`` (reasoning and images skipped).

    >>> text_of((ReasoningPart("hm"), TextPart("a"), TextPart("b")))
    'ab'
    """
    return "".join(p.text for p in content if type(p) is TextPart)


def user_text(text: str) -> UserMessage:
    """A user message holding one text part.

    >>> user_text("hi")
    UserMessage(content=(TextPart(text='hi'),))
    """
    return UserMessage((TextPart(text),))


def system_text(text: str) -> SystemMessage:
    """A system message holding one text part."""
    return SystemMessage((TextPart(text),))


@attrs.frozen
class AgentInput:
    """The input that starts a run: the new items to add to the conversation."""

    items: tuple[Item, ...]

    @classmethod
    def from_user_text(cls, text: str) -> AgentInput:
        """Start a run from one user message.

        >>> AgentInput.from_user_text("hello").items
        (UserMessage(content=(TextPart(text='hello'),)),)
        """
        return cls((user_text(text),))

    @classmethod
    def from_items(cls, items: tuple[Item, ...] | list[Item]) -> AgentInput:
        """Start a run from a prepared list of items (history included)."""
        return cls(tuple(items))

    #: Alias of :meth:`from_items`, for readers of the book.
    from_messages = from_items


__all__ = [
    "AgentInput",
    "AssistantMessage",
    "ContentPart",
    "ImagePart",
    "Item",
    "ReasoningPart",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "system_text",
    "text_of",
    "user_text",
]
