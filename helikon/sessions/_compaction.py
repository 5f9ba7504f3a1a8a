"""Compaction decisions: a pure machine, one run of it per append.

:class:`~helikon.sessions.CompactingSession` performs the effects; every
decision is made here. The machine's rules (the book's "How compaction
fires"):

1. The user's events are appended first (:class:`AppendEvents`), always.
2. Their cheap estimate (:func:`estimate_events`, the heuristic over their
   items) is added to the running estimate. When the running estimate is
   unknown (``None``: a fresh wrapper, or one whose last append failed) or
   exceeds the threshold, the log is read (:class:`ReadLog`), projected, and
   counted by the authoritative counter (:class:`CountTokens`). Starting
   unknown is what makes resume correct: a wrapper over an already long
   durable log compacts its backlog on the first append.
3. At or under the threshold the count becomes the running estimate.
4. Over it, the convergence guard skips an empty projection or one whose
   only item is a system summary (nothing useful to collapse; summarising it
   again would loop). Otherwise the model is asked (:class:`Summarize`) with
   the projected messages plus a trailing user message holding the prompt.
5. A whitespace-only summary or a failed model call is noted and skipped:
   no marker. A real summary is recorded (:class:`RecordCompaction`) as a
   ``compacted`` marker covering every event read, and the running estimate
   becomes the count of the lone summary.

Feeding a result that does not answer the pending effect returns
``Failure(StepError)``; the machine never raises. Inner-session failures are
not results: the interpreter lets them propagate and drops the run (and
resets the estimate to unknown, so the next append re-counts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeAlias, runtime_checkable

import attrs
import msgspec
from returns.result import Failure, Result, Success

from helikon.errors import ConfigError, StepError
from helikon.items import (
    AssistantMessage,
    ContentPart,
    Item,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    UserMessage,
    system_text,
    user_text,
)
from helikon.model import ModelRequest, ModelSettings
from helikon.sessions._events import Compacted, SessionEvent
from helikon.sessions._project import event_item, project

#: The summarisation instruction sent after the conversation by default.
DEFAULT_PROMPT: Final = (
    "Summarise the conversation so far so it can replace it. Keep every fact, decision, name, "
    "number, open question and pending task the assistant will need to continue; drop small talk "
    "and repetition. Write the summary only, with no preamble."
)


# -- token counting -------------------------------------------------------------


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a conversation costs. Implement it with a model's tokenizer."""

    def count(self, items: Sequence[Item]) -> int: ...


def _parts_chars(parts: Sequence[ContentPart]) -> int:
    total = 0
    for part in parts:
        if type(part) is TextPart or type(part) is ReasoningPart:
            total += len(part.text)
        # images (and any media) contribute nothing
    return total


def _compact_json(arguments: str) -> str:
    try:
        return msgspec.json.encode(msgspec.json.decode(arguments)).decode()
    except msgspec.DecodeError:
        return arguments  # malformed arguments count as written


@attrs.frozen
class HeuristicTokenCounter:
    """``ceil(chars / 4)``: deterministic, dependency-free.

    ``chars`` counts Unicode code points across the text and reasoning parts
    of every message (system summaries included), tool results' content, and
    tool calls' name plus arguments as compact JSON. Images count zero.

    >>> from helikon.ids import CallId
    >>> # 5 + len("f") + len('{"a":1}') = 13 characters
    >>> HeuristicTokenCounter().count([user_text("abcde"), ToolCall(CallId("c"), "f", '{"a": 1}')])
    4
    """

    def count(self, items: Sequence[Item]) -> int:
        chars = 0
        for item in items:
            match item:
                case UserMessage(content=c) | SystemMessage(content=c) | AssistantMessage(content=c):
                    chars += _parts_chars(c)
                case ToolCall(name=name, arguments=arguments):
                    chars += len(name) + len(_compact_json(arguments))
                case ToolResult(content=content):
                    chars += len(content)
        return -(-chars // 4)


def estimate_events(events: Sequence[SessionEvent]) -> int:
    """The cheap estimate of what ``events`` add: the heuristic over their items.

    >>> from helikon.sessions._events import UserMessageEvent
    >>> estimate_events([UserMessageEvent.from_text("12345678", at=0)])
    2
    """
    items: list[Item] = []
    for event in events:
        item = system_text(event.summary) if type(event) is Compacted else event_item(event)
        if item is not None:
            items.append(item)
    return HeuristicTokenCounter().count(items)


# -- the machine's data ------------------------------------------------------------


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ConfigError(f"compaction {attribute.name} must be > 0, got {value}")


@attrs.frozen
class Compactor:
    """What the machine remembers between appends.

    Args:
        threshold: compact when the conversation costs more tokens than this
            (``> 0``; 0 raises :class:`~helikon.errors.ConfigError`).
        prompt: the summarisation instruction.
        settings: model settings of the summarisation call.
        estimate: the running estimate; ``None`` means unknown, so the next
            append runs the authoritative count.
    """

    threshold: int = attrs.field(validator=_positive)
    prompt: str = DEFAULT_PROMPT
    settings: ModelSettings = ModelSettings()
    estimate: int | None = None


# phases: what the machine waits for


@attrs.frozen
class Appending:
    """Waiting for the user's events to be appended."""

    added: int


@attrs.frozen
class Reading:
    """Waiting for the log."""


@attrs.frozen
class Counting:
    """Waiting for the authoritative count of ``messages``."""

    original_count: int
    messages: tuple[Item, ...]


@attrs.frozen
class Summarizing:
    """Waiting for the model's summary of a conversation of ``tokens`` tokens."""

    original_count: int
    tokens: int


@attrs.frozen
class Recording:
    """Waiting for the ``compacted`` marker to be appended."""

    summary: str
    original_count: int
    tokens: int


@attrs.frozen
class Recounting:
    """Waiting for the count of the lone summary."""

    original_count: int
    tokens: int


@attrs.frozen
class Settled:
    """Done with this append (terminal)."""


CompactionPhase: TypeAlias = Appending | Reading | Counting | Summarizing | Recording | Recounting | Settled


@attrs.frozen
class CompactionState:
    compactor: Compactor
    phase: CompactionPhase


# effects (imperative) ------------------------------------------------------------


@attrs.frozen
class AppendEvents:
    """Append the user's ``events`` to the inner session."""

    events: tuple[SessionEvent, ...]


@attrs.frozen
class ReadLog:
    """Read the inner session's whole log."""


@attrs.frozen
class CountTokens:
    """Count ``items`` with the configured token counter."""

    items: tuple[Item, ...]


@attrs.frozen
class Summarize:
    """Ask the model for a summary: stream ``request`` and join its text."""

    request: ModelRequest


@attrs.frozen
class RecordCompaction:
    """Append ``Compacted(summary, original_count)``, stamped now, to the inner session."""

    summary: str
    original_count: int


@attrs.frozen
class Settle:
    """Nothing more to do (terminal)."""


CompactionEffect: TypeAlias = AppendEvents | ReadLog | CountTokens | Summarize | RecordCompaction | Settle

# results (past tense) --------------------------------------------------------------


@attrs.frozen
class EventsAppended:
    """The user's events are in the log."""


@attrs.frozen
class LogRead:
    """The inner session's log."""

    events: tuple[SessionEvent, ...]


@attrs.frozen
class TokensCounted:
    tokens: int


@attrs.frozen
class Summarized:
    """The model's summary (its text chunks joined)."""

    text: str


@attrs.frozen
class SummaryFailed:
    """The model call failed with ``message``."""

    message: str


@attrs.frozen
class CompactionRecorded:
    """The marker is in the log."""


CompactionResult: TypeAlias = (
    EventsAppended | LogRead | TokensCounted | Summarized | SummaryFailed | CompactionRecorded
)

# notes: what the interpreter logs ----------------------------------------------------


@attrs.frozen
class CompactionSkipped:
    """Compaction was due (``tokens`` over the threshold) but skipped for ``reason``."""

    reason: str
    tokens: int


@attrs.frozen
class CompactionDone:
    """``original_count`` events of ``tokens_before`` tokens now cost ``tokens_after``."""

    original_count: int
    tokens_before: int
    tokens_after: int


CompactionNote: TypeAlias = CompactionSkipped | CompactionDone


@attrs.frozen
class CompactionStep:
    """One step: the next state, what to do, and what to log."""

    state: CompactionState
    effect: CompactionEffect
    notes: tuple[CompactionNote, ...] = ()


# transitions ---------------------------------------------------------------------------

Step: TypeAlias = Result[CompactionStep, StepError]


def begin_append(compactor: Compactor, events: Sequence[SessionEvent]) -> CompactionStep:
    """Start the machine for one append of ``events``: append them first.

    >>> from helikon.sessions._events import UserMessageEvent
    >>> step = begin_append(Compactor(100), [UserMessageEvent.from_text("hi", at=0)])
    >>> type(step.effect).__name__
    'AppendEvents'
    """
    events = tuple(events)
    return CompactionStep(
        CompactionState(compactor, Appending(estimate_events(events))), AppendEvents(events)
    )


def _settle(compactor: Compactor, estimate: int | None, *notes: CompactionNote) -> Step:
    state = CompactionState(attrs.evolve(compactor, estimate=estimate), Settled())
    return Success(CompactionStep(state, Settle(), notes))


def _on_appended(state: CompactionState, phase: Appending, _: EventsAppended) -> Step:
    compactor = state.compactor
    if compactor.estimate is not None:
        estimate = compactor.estimate + phase.added
        if estimate <= compactor.threshold:
            return _settle(compactor, estimate)
    return Success(CompactionStep(CompactionState(compactor, Reading()), ReadLog()))


def _on_log(state: CompactionState, _: Reading, result: LogRead) -> Step:
    messages = project(result.events)
    phase = Counting(len(result.events), messages)
    return Success(CompactionStep(CompactionState(state.compactor, phase), CountTokens(messages)))


def _on_counted(state: CompactionState, phase: Counting, result: TokensCounted) -> Step:
    compactor, tokens, messages = state.compactor, result.tokens, phase.messages
    if tokens <= compactor.threshold:
        return _settle(compactor, tokens)
    if not messages:
        return _settle(compactor, tokens, CompactionSkipped("the conversation is empty", tokens))
    if len(messages) == 1 and type(messages[0]) is SystemMessage:
        reason = "the conversation is a lone summary; summarising it again would not converge"
        return _settle(compactor, tokens, CompactionSkipped(reason, tokens))
    request = ModelRequest((*messages, user_text(compactor.prompt)), settings=compactor.settings)
    nxt = CompactionState(compactor, Summarizing(phase.original_count, tokens))
    return Success(CompactionStep(nxt, Summarize(request)))


def _on_summary(state: CompactionState, phase: Summarizing, result: Summarized) -> Step:
    if not result.text.strip():
        skipped = CompactionSkipped("the model's summary is blank", phase.tokens)
        return _settle(state.compactor, phase.tokens, skipped)
    nxt = CompactionState(state.compactor, Recording(result.text, phase.original_count, phase.tokens))
    return Success(CompactionStep(nxt, RecordCompaction(result.text, phase.original_count)))


def _on_summary_failed(state: CompactionState, phase: Summarizing, result: SummaryFailed) -> Step:
    skipped = CompactionSkipped(f"the summarisation call failed: {result.message}", phase.tokens)
    return _settle(state.compactor, phase.tokens, skipped)


def _on_recorded(state: CompactionState, phase: Recording, _: CompactionRecorded) -> Step:
    nxt = CompactionState(state.compactor, Recounting(phase.original_count, phase.tokens))
    return Success(CompactionStep(nxt, CountTokens((system_text(phase.summary),))))


def _on_recounted(state: CompactionState, phase: Recounting, result: TokensCounted) -> Step:
    done = CompactionDone(phase.original_count, phase.tokens, result.tokens)
    return _settle(state.compactor, result.tokens, done)


_Handler: TypeAlias = Callable[[CompactionState, CompactionPhase, CompactionResult], Step]

#: (phase type, result type) -> the rule that handles it; any other pair is a misuse.
TABLE: Final[Mapping[tuple[type, type], _Handler]] = {
    (Appending, EventsAppended): _on_appended,  # type: ignore[dict-item]
    (Reading, LogRead): _on_log,  # type: ignore[dict-item]
    (Counting, TokensCounted): _on_counted,  # type: ignore[dict-item]
    (Summarizing, Summarized): _on_summary,  # type: ignore[dict-item]
    (Summarizing, SummaryFailed): _on_summary_failed,  # type: ignore[dict-item]
    (Recording, CompactionRecorded): _on_recorded,  # type: ignore[dict-item]
    (Recounting, TokensCounted): _on_recounted,  # type: ignore[dict-item]
}


def advance_compaction(state: CompactionState, result: CompactionResult) -> Step:
    """Feed the pending effect's ``result``: the next step, or ``Failure(StepError)``.

    >>> step = begin_append(Compactor(100), [])
    >>> type(advance_compaction(step.state, EventsAppended()).unwrap().effect).__name__
    'ReadLog'
    >>> advance_compaction(step.state, LogRead(())).failure()
    StepError("LogRead does not answer the compaction phase 'Appending'")
    """
    handler = TABLE.get((type(state.phase), type(result)))
    if handler is None:
        message = (
            f"{type(result).__name__} does not answer the compaction phase {type(state.phase).__name__!r}"
        )
        return Failure(StepError(message))
    return handler(state, state.phase, result)


__all__ = [
    "DEFAULT_PROMPT",
    "AppendEvents",
    "Appending",
    "CompactionDone",
    "CompactionEffect",
    "CompactionNote",
    "CompactionPhase",
    "CompactionRecorded",
    "CompactionResult",
    "CompactionSkipped",
    "CompactionState",
    "CompactionStep",
    "Compactor",
    "CountTokens",
    "Counting",
    "EventsAppended",
    "HeuristicTokenCounter",
    "LogRead",
    "ReadLog",
    "RecordCompaction",
    "Recording",
    "Recounting",
    "Reading",
    "Settle",
    "Settled",
    "Summarize",
    "Summarized",
    "Summarizing",
    "SummaryFailed",
    "TokenCounter",
    "TokensCounted",
    "advance_compaction",
    "begin_append",
    "estimate_events",
]
