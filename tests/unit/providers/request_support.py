"""What the adapter request tests send every API alike: a tool, an output
schema and a user message with an image (test_incremental_encoding.py,
test_instructions_slot.py)."""

from __future__ import annotations

from helikon.items import ImagePart, TextPart, UserMessage
from helikon.model import JsonSchema, ToolDef

#: A tool with one string parameter.
TOOL = ToolDef("lookup", "Look a thing up.", {"type": "object", "properties": {"q": {"type": "string"}}})
#: A structured-output schema: an object with a required integer.
SCHEMA = JsonSchema("answer", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
#: A user message of text and an inline PNG.
IMAGE_MESSAGE = UserMessage((TextPart("see"), ImagePart(data="AAAA", media_type="image/png")))
