"""What both servers read off the wire before anything else sees it.

- :func:`decode_json`: a request body as JSON, nested at most
  :data:`MAX_JSON_DEPTH` deep. A body of 100,000 ``[`` is refused with a
  sentence, never a ``RecursionError`` from deep inside a decoder or from
  the code that walks the value afterwards.
- :func:`item_form`: a message item in the book's snake-case shape
  (``{"type": "user_message", "content": [{"type": "text", ...}]}``) turned
  into helikon's own tagged form (``UserMessage`` / ``TextPart``); an item
  already in helikon's form is returned as it is.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

#: How deep a request body's arrays and objects may nest. A message list is
#: about five levels deep; a client that needs more is not sending messages.
MAX_JSON_DEPTH: Final = 64

#: The book's item tags and helikon's.
_ITEM_TAGS: Final = {
    "user_message": "UserMessage",
    "system_message": "SystemMessage",
    "assistant_message": "AssistantMessage",
    "tool_call": "ToolCall",
    "tool_result": "ToolResult",
}
#: The book's content part tags and helikon's.
_PART_TAGS: Final = {"text": "TextPart", "reasoning": "ReasoningPart", "image": "ImagePart"}


class JsonRefused(ValueError):
    """A body that is not JSON, or that nests too deeply; the message says which."""


def decode_json(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``body`` as JSON, refusing values nested deeper than ``max_depth``.

    >>> decode_json(b'{"input": ["a", {"b": 1}]}')
    {'input': ['a', {'b': 1}]}
    >>> try:
    ...     decode_json(b"[" * 100_000)
    ... except JsonRefused as refused:
    ...     print(refused)
    the request body nests arrays and objects deeper than 64 levels

    Raises:
        JsonRefused: the body is not JSON, or it nests too deeply.
    """
    too_deep = f"the request body nests arrays and objects deeper than {max_depth} levels"
    if _bracket_depth_over(body, max_depth):
        raise JsonRefused(too_deep)
    try:
        value = msgspec.json.decode(body)
    except RecursionError:
        raise JsonRefused(too_deep) from None
    except msgspec.DecodeError as exc:
        raise JsonRefused(f"the request body is not valid JSON: {exc}") from None
    if _depth_over(value, max_depth):
        raise JsonRefused(too_deep)
    return value


def _bracket_depth_over(body: bytes, limit: int) -> bool:
    """A cheap first look: whether the body opens more than ``limit``
    brackets before it closes any (the shape of a nesting bomb), so the
    decoder never starts on one."""
    head = body.lstrip()[: limit + 1]
    return len(head) > limit and not head.strip(b"[{ \t\r\n")


def _depth_over(value: Any, limit: int) -> bool:
    """Whether a decoded value nests deeper than ``limit`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def item_form(value: Any) -> Any:
    """A message item in helikon's tagged form, from either shape.

    >>> item_form({"type": "user_message", "content": [{"type": "text", "text": "hi"}]})
    {'type': 'UserMessage', 'content': [{'type': 'TextPart', 'text': 'hi'}]}
    >>> item_form({"type": "UserMessage", "content": [{"type": "TextPart", "text": "hi"}]})
    {'type': 'UserMessage', 'content': [{'type': 'TextPart', 'text': 'hi'}]}
    >>> item_form({"type": "AssistantMessage", "content": [{"type": "reasoning", "text": "hm"}]})
    {'type': 'AssistantMessage', 'content': [{'type': 'ReasoningPart', 'text': 'hm'}]}
    """
    if not isinstance(value, dict):
        return value
    item = dict(value)
    if item.get("type") in _ITEM_TAGS:
        item["type"] = _ITEM_TAGS[item["type"]]
    content = item.get("content")
    if isinstance(content, list):
        item["content"] = [
            {**part, "type": _PART_TAGS[part["type"]]}
            if isinstance(part, dict) and part.get("type") in _PART_TAGS
            else part
            for part in content
        ]
    return item


__all__ = ["MAX_JSON_DEPTH", "JsonRefused", "decode_json", "item_form"]
