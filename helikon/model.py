"""Carriers that cross the model boundary.

A model is asked with a :class:`ModelRequest` and answers with a stream of
:data:`ModelEvent`: text, reasoning and tool-call chunks, usage and a
:class:`Finish`. The chunk names differ from the agent events the loop emits
(``TokenDelta`` and friends in :mod:`helikon.events`) so a ``match`` never
picks up the wrong one.

Usage reported within one stream is summed: adapters report increments.
"""

from __future__ import annotations

import decimal
import enum
from collections.abc import Sequence
from decimal import Decimal
from typing import Final, TypeAlias

import attrs

from helikon._json import JsonObject
from helikon.items import Item


class ToolEffect(enum.Enum):
    """What a tool does to the world; permission modes decide by it."""

    #: Only reads; allowed even in plan mode.
    READ_ONLY = "read_only"
    #: Writes files or records; auto-approved under accept-edits.
    WRITE = "write"
    #: Anything else (network, processes, money). The default.
    SIDE_EFFECT = "side_effect"


@attrs.frozen
class ToolDef:
    """A tool as the model sees it: name, description and argument schema."""

    name: str
    description: str
    parameters: JsonObject
    output_schema: JsonObject | None = None
    effect: ToolEffect = ToolEffect.SIDE_EFFECT


# -- response format ---------------------------------------------------------


@attrs.frozen
class Text:
    """Free text (the default)."""


@attrs.frozen
class JsonObjectFormat:
    """Any JSON object."""


@attrs.frozen
class JsonSchema:
    """JSON matching ``schema``; ``strict`` asks the provider to enforce it."""

    name: str
    schema: JsonObject
    strict: bool = True


#: How the model must shape its answer.
ResponseFormat: TypeAlias = Text | JsonObjectFormat | JsonSchema


# -- tool choice -------------------------------------------------------------


@attrs.frozen
class ToolChoiceAuto:
    """The model decides whether to call tools."""


@attrs.frozen
class ToolChoiceNone:
    """The model must not call tools."""


@attrs.frozen
class ToolChoiceRequired:
    """The model must call at least one tool.

    A forced choice holds until the model has called a tool since the
    latest user message; then the model chooses again (so an agent that
    forces a tool can still answer). ``keep=True`` forces every turn.
    """

    keep: bool = False


@attrs.frozen
class ToolChoiceNamed:
    """The model must call the tool ``name``.

    Forced until the model has called ``name`` since the latest user
    message; then the model chooses again. ``keep=True`` forces every turn.
    """

    name: str
    keep: bool = False


#: Whether and which tools the model may call.
ToolChoice: TypeAlias = ToolChoiceAuto | ToolChoiceNone | ToolChoiceRequired | ToolChoiceNamed


@attrs.frozen
class ModelSettings:
    """Provider-tuning knobs; ``None`` leaves the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    previous_response_id: str | None = None


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class ModelRequest:
    """One model call: the messages so far, the tools it may call, settings,
    and the agent's ``instructions``.

    The instructions are not a message of the conversation: each provider
    adapter renders them in its API's own system or instructions slot, ahead
    of any system message the conversation holds (a request with
    ``instructions="Be brief."`` is sent exactly as one whose messages start
    with ``system_text("Be brief.")``). So the conversation is passed as it
    is, never copied to put a system message in front of it.

    ``messages`` is a tuple of items, or the run's own
    :class:`~helikon.loop.Conversation` (the loop shares it with the
    request rather than copying it every turn): either reads, compares,
    hashes and encodes as the same tuple of items.
    """

    messages: Sequence[Item]
    tools: tuple[ToolDef, ...] = ()
    settings: ModelSettings = ModelSettings()
    instructions: str | None = None


@attrs.frozen
class ModelCapabilities:
    """What a model instance can do. Stable per instance."""

    streaming: bool = False
    tools: bool = False
    parallel_tool_calls: bool = False
    structured_output: bool = False
    server_managed_state: bool = False
    reasoning: bool = False
    vision: bool = False
    audio: bool = False
    prompt_caching: bool = False

    @classmethod
    def all(cls) -> ModelCapabilities:
        """Every flag set (what a scripted test model claims)."""
        return cls(*([True] * len(attrs.fields(cls))))


class FinishReason(enum.Enum):
    """Why the model stopped."""

    #: A natural end of the answer.
    STOP = "stop"
    #: The output token limit was hit.
    LENGTH = "length"
    #: The model asked for tool calls.
    TOOL_CALLS = "tool_calls"
    #: The provider's content filter stopped it.
    CONTENT_FILTER = "content_filter"
    #: Anything the adapter could not map.
    OTHER = "other"


@attrs.frozen(slots=False)  # a dict class: the machine makes some every turn, cheaper so
class Usage:
    """What a run spent. Adds up with ``+`` across events, turns and runs.

    Token counts are as the provider reported them (cached and cache-write
    tokens are part of ``input_tokens``, reasoning tokens part of
    ``output_tokens``). The loop adds ``requests`` (model calls made) and
    ``tool_calls`` (tool calls run), and prices each turn: ``cost`` is in US
    dollars, a :class:`~decimal.Decimal`, or None when some tokens were spent
    on a model without a known price (never a guess; see
    :mod:`helikon.pricing`). A sum's cost is None as soon as one part spent
    tokens without a price.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    #: Input tokens written to the provider's prompt cache (Anthropic's
    #: ``cache_creation_input_tokens``), where the provider reports them.
    cache_creation_input_tokens: int = 0
    #: Model calls made (bookkeeping: not compared by ``==``, which compares
    #: what was spent, tokens and money).
    requests: int = attrs.field(default=0, eq=False)
    #: Tool calls run (calls the loop rejects itself are not run; not
    #: compared by ``==`` either).
    tool_calls: int = attrs.field(default=0, eq=False)
    #: US dollars, or None: unpriced (see the class docstring).
    cost: Decimal | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.requests + other.requests,
            self.tool_calls + other.tool_calls,
            _cost_sum(self, other),
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def unpriced(self) -> bool:
        """Whether tokens were spent without a known price (then ``cost`` is None)."""
        return self.cost is None and bool(
            self.input_tokens
            or self.output_tokens
            or self.cached_input_tokens
            or self.reasoning_tokens
            or self.cache_creation_input_tokens
        )


def _cost_sum(a: Usage, b: Usage) -> Decimal | None:
    """The cost of ``a + b``: unknown when either part spent tokens unpriced.

    >>> _cost_sum(Usage(cost=Decimal("0.5")), Usage(requests=1)) == Decimal("0.5")
    True
    >>> _cost_sum(Usage(cost=Decimal("0.5")), Usage(input_tokens=3)) is None
    True
    """
    if a.unpriced or b.unpriced:
        return None
    if a.cost is None:
        return b.cost
    if b.cost is None:
        return a.cost
    return _MONEY.add(a.cost, b.cost)


#: Decimal arithmetic with an explicit context, so no ambient ``decimal``
#: setting a user changed can make two processes add money differently.
_MONEY: Final = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN, traps=[decimal.InvalidOperation])


# -- the model event stream --------------------------------------------------


@attrs.frozen
class TextChunk:
    """A piece of the answer's text."""

    text: str


@attrs.frozen
class TextBreak:
    """The text so far is one part of the message; the text after it starts another.

    A provider whose answer arrives as separate text blocks (Anthropic's text
    before and after a server tool's call, or around citations) sends one
    between two blocks, so each block stays its own
    :class:`~helikon.items.TextPart`. It carries no text: the token deltas are
    exactly the wire's text.
    """


@attrs.frozen
class ReasoningChunk:
    """A piece of reasoning text (``signature`` closes a reasoning block)."""

    text: str
    signature: str | None = None


@attrs.frozen
class ToolCallChunk:
    """A fragment of a tool call.

    Fragments of one call share ``index`` (or, when the provider gives no
    index, ``call_id``); ``name`` and ``call_id`` usually come with the first
    fragment and ``arguments`` accumulate.
    """

    index: int | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@attrs.frozen
class Finish:
    """The stream ended for ``reason``; ``response_id`` and ``response_model``
    are the reply's id and the model that answered, as the provider reports
    them (the model may be a dated version of the one asked for).
    ``response_model`` is provenance, not part of equality: a scripted or
    replayed stream equals the live one whichever model version answered."""

    reason: FinishReason
    response_id: str | None = None
    response_model: str | None = attrs.field(default=None, eq=False)


#: One event of a model's stream.
ModelEvent: TypeAlias = TextChunk | TextBreak | ReasoningChunk | ToolCallChunk | Usage | Finish


__all__ = [
    "Finish",
    "FinishReason",
    "JsonObjectFormat",
    "JsonSchema",
    "ModelCapabilities",
    "ModelEvent",
    "ModelRequest",
    "ModelSettings",
    "ReasoningChunk",
    "ResponseFormat",
    "Text",
    "TextBreak",
    "TextChunk",
    "ToolCallChunk",
    "ToolChoice",
    "ToolChoiceAuto",
    "ToolChoiceNamed",
    "ToolChoiceNone",
    "ToolChoiceRequired",
    "ToolDef",
    "ToolEffect",
    "Usage",
]
