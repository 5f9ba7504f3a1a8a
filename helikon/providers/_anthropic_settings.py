"""The Anthropic adapter's own settings: prompt caching, extended thinking,
how structured output is asked for, and the constants the wire needs.

Everything here is plain data (frozen attrs classes and flag enums); the
request builder (:mod:`._anthropic_request`) reads it, nothing here does IO.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from helikon.errors import ConfigError

#: The ``anthropic-version`` header sent with every request (the Messages
#: API's only stable version; newer behaviour comes through beta headers).
ANTHROPIC_VERSION: Final = "2023-06-01"

#: The Messages API's home; ``base_url=`` replaces it (``/v1/messages`` is
#: appended, or just ``/messages`` when the base already ends in ``/v1``).
DEFAULT_BASE_URL: Final = "https://api.anthropic.com"

#: ``max_tokens`` when neither ``ModelSettings.max_output_tokens`` nor the
#: constructor's ``max_tokens=`` says otherwise. The API requires the field;
#: 4096 is what the official SDK examples and most frameworks default to.
DEFAULT_MAX_TOKENS: Final = 4096

#: Room kept for the answer above the thinking budget when the default
#: ``max_tokens`` is used with :class:`ExtendedThinking` (the API requires
#: ``budget_tokens < max_tokens``).
THINKING_ANSWER_ROOM: Final = 4096

#: The smallest thinking budget the API accepts.
MIN_THINKING_BUDGET: Final = 1024

#: A redacted thinking block travels as a ``ReasoningPart`` with empty text
#: and this prefix before the block's opaque ``data`` in its signature.
#: Real signatures are base64 and never contain a colon, so the prefix is
#: unambiguous.
REDACTED_PREFIX: Final = "redacted:"

#: The hidden tool that carries structured output under
#: :attr:`StructuredOutputMode.TOOL`.
OUTPUT_TOOL_NAME: Final = "helikon_structured_output"


class CacheStrategy(enum.Enum):
    """Where the adapter puts ``cache_control`` breakpoints (prompt caching).

    Anthropic caches the prompt prefix up to each breakpoint (tools, then
    system, then messages); at most four breakpoints are allowed and these
    strategies use at most three. Cache reads show up as
    ``Usage.cached_input_tokens``.
    """

    #: No breakpoints: nothing is cached.
    NONE = "none"
    #: One breakpoint on the last tool definition and one on the last system
    #: block: the stable preamble of an agent is cached across calls.
    SYSTEM_AND_TOOLS = "system_and_tools"
    #: As :attr:`SYSTEM_AND_TOOLS`, plus one on the last cacheable content
    #: block of the last message, so each turn of a growing conversation
    #: reads the previous turn's prefix from the cache.
    SYSTEM_TOOLS_AND_HISTORY = "system_tools_and_history"


class StructuredOutputMode(enum.Enum):
    """How a :class:`~helikon.model.JsonSchema` response format is requested."""

    #: The API's structured outputs (``output_config.format`` with
    #: ``type: json_schema``, the schema sent as-is): constrained decoding,
    #: the JSON arrives as the answer's text. Claude Sonnet 4.5, Opus 4.1,
    #: Haiku 4.5 and later.
    NATIVE = "native"
    #: Forced-tool synthesis for older models and gateways without
    #: structured outputs: a hidden tool whose ``input_schema`` is the schema,
    #: forced with ``tool_choice``; its input is streamed back as the answer's
    #: text.
    TOOL = "tool"


@attrs.frozen
class ExtendedThinking:
    """Turn on extended thinking with a budget of ``budget_tokens``.

    The budget counts toward ``max_tokens`` and must be at least 1024 and
    below ``max_tokens`` (the API's rules). Thinking is incompatible with a
    forced ``tool_choice`` and with ``temperature``/``top_k`` changes; the
    API rejects those combinations.

    >>> ExtendedThinking(2048).wire()
    {'type': 'enabled', 'budget_tokens': 2048}
    """

    budget_tokens: int

    def __attrs_post_init__(self) -> None:
        if type(self.budget_tokens) is not int or self.budget_tokens < MIN_THINKING_BUDGET:
            raise ConfigError(
                f"ExtendedThinking.budget_tokens must be an integer >= {MIN_THINKING_BUDGET}, "
                f"got {self.budget_tokens!r}"
            )

    def wire(self) -> dict[str, object]:
        """The request's ``thinking`` field."""
        return {"type": "enabled", "budget_tokens": self.budget_tokens}


@attrs.frozen
class Options:
    """Everything besides the request that shapes the request body."""

    model_id: str
    stream: bool = True
    max_tokens: int | None = None
    cache: CacheStrategy = CacheStrategy.NONE
    thinking: ExtendedThinking | None = None
    structured_output: StructuredOutputMode = StructuredOutputMode.NATIVE
    parallel_tool_calls: bool = True

    def default_max_tokens(self) -> int:
        """``max_tokens`` when the request's settings leave it open.

        >>> Options("m").default_max_tokens()
        4096
        >>> Options("m", thinking=ExtendedThinking(8000)).default_max_tokens()
        12096
        >>> Options("m", max_tokens=500).default_max_tokens()
        500
        """
        if self.max_tokens is not None:
            return self.max_tokens
        if self.thinking is not None:
            return max(DEFAULT_MAX_TOKENS, self.thinking.budget_tokens + THINKING_ANSWER_ROOM)
        return DEFAULT_MAX_TOKENS


__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "MIN_THINKING_BUDGET",
    "OUTPUT_TOOL_NAME",
    "REDACTED_PREFIX",
    "THINKING_ANSWER_ROOM",
    "CacheStrategy",
    "ExtendedThinking",
    "Options",
    "StructuredOutputMode",
]
