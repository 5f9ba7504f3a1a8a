"""``CompactingSession``: a session wrapper that summarises a long log.

It performs the effects of the pure compaction machine
(:mod:`helikon.sessions._compaction`): the inner session's appends and
reads, the token counter, and the summarisation call to the model. What it
does with failures is fixed by the book:

- inner-session failures (appending the user's events, reading the log,
  appending the ``compacted`` marker) propagate out of :meth:`append`;
- model failures (an exception from ``invoke`` or its stream, not a
  cancellation) and blank summaries are logged at WARNING on the
  ``helikon.sessions`` logger and swallowed: no marker is written.

It assumes one logical writer per session, as a run is: the bookkeeping
(the running estimate) is not atomic against a concurrent append through the
same wrapper. Concurrent writers should share the inner backend instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, assert_never, final

import attrs
from returns.result import Failure, Success

from helikon.cancel import CancellationToken
from helikon.items import Item
from helikon.model import ModelRequest, ModelSettings, TextChunk
from helikon.sessions._compaction import (
    DEFAULT_PROMPT,
    AppendEvents,
    CompactionDone,
    CompactionRecorded,
    CompactionResult,
    CompactionSkipped,
    CompactionStep,
    Compactor,
    CountTokens,
    EventsAppended,
    HeuristicTokenCounter,
    LogRead,
    ReadLog,
    RecordCompaction,
    Settle,
    Summarize,
    Summarized,
    SummaryFailed,
    TokenCounter,
    TokensCounted,
    advance_compaction,
    begin_append,
)
from helikon.sessions._events import Compacted, SequenceId, SessionEvent
from helikon.sessions._protocol import Session

if TYPE_CHECKING:
    from helikon.protocols import Model

logger = logging.getLogger("helikon.sessions")


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


@final
class CompactingSession:
    """Wraps any session; summarises the conversation when it grows past ``threshold`` tokens.

    Args:
        inner: the session that stores the log (events and the
            ``compacted`` markers).
        model: summarises (any :class:`~helikon.protocols.Model`). Use one
            whose context window comfortably exceeds ``threshold`` (it gets
            the whole projected history) and that reliably writes summaries
            well under ``threshold`` (else every append re-compacts).
        threshold: compact when the projected conversation costs more tokens
            than this. Must be > 0.
        token_counter: the authoritative counter
            (:class:`~helikon.sessions.HeuristicTokenCounter` by default).
        prompt: the summarisation instruction, sent as a trailing user message.
        settings: model settings of the summarisation call.
        clock: milliseconds since the epoch, to stamp the ``compacted`` marker.

    Raises:
        ConfigError: ``threshold`` is not positive.
    """

    def __init__(
        self,
        inner: Session,
        model: Model,
        threshold: int,
        *,
        token_counter: TokenCounter | None = None,
        prompt: str = DEFAULT_PROMPT,
        settings: ModelSettings | None = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self._compactor = Compactor(threshold, prompt, settings or ModelSettings())
        self._inner = inner
        self._model = model
        self._counter: TokenCounter = token_counter if token_counter is not None else HeuristicTokenCounter()
        self._clock = clock

    @property
    def inner(self) -> Session:
        return self._inner

    @property
    def threshold(self) -> int:
        return self._compactor.threshold

    @property
    def estimate(self) -> int | None:
        """The running token estimate (``None`` until the first append counts)."""
        return self._compactor.estimate

    def __repr__(self) -> str:
        return f"CompactingSession({self._inner!r}, threshold={self._compactor.threshold})"

    async def append(self, events: Sequence[SessionEvent]) -> list[SequenceId]:
        """Append ``events`` to the inner session, then compact if due.

        Returns the sequence ids of ``events`` (not of a marker).

        Raises:
            SessionError: the inner session failed (the events were not
                appended, or they were and compaction could not read the log
                or write its marker).
        """
        step = begin_append(self._compactor, events)
        ids: list[SequenceId] = []
        try:
            while True:
                _log(step)
                result: CompactionResult
                match step.effect:
                    case AppendEvents(events=batch):
                        ids = await self._inner.append(batch)
                        result = EventsAppended()
                    case ReadLog():
                        result = LogRead(tuple(await self._inner.events()))
                    case CountTokens(items=items):
                        result = TokensCounted(self._counter.count(items))
                    case Summarize(request=request):
                        result = await self._summarize(request)
                    case RecordCompaction(summary=summary, original_count=count):
                        await self._inner.append([Compacted(summary, count, at=self._clock())])
                        result = CompactionRecorded()
                    case Settle():
                        self._compactor = step.state.compactor
                        return ids
                    case _:
                        assert_never(step.effect)
                match advance_compaction(step.state, result):
                    case Success(nxt):
                        step = nxt
                    case Failure(error):
                        raise error
        except BaseException:
            # Whatever happened, the next append re-counts from the log.
            self._compactor = attrs.evolve(self._compactor, estimate=None)
            raise

    async def _summarize(self, request: ModelRequest) -> Summarized | SummaryFailed:
        chunks: list[str] = []
        try:
            stream = self._model.invoke(request, CancellationToken())
            try:
                async for event in stream:
                    if type(event) is TextChunk:
                        chunks.append(event.text)
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
        except Exception as exc:  # a failed summary must not fail the append
            return SummaryFailed(f"{type(exc).__name__}: {exc}")
        return Summarized("".join(chunks))

    async def events(self, since: SequenceId | None = None) -> list[SessionEvent]:
        return await self._inner.events(since)

    async def snapshot(self) -> tuple[Item, ...]:
        return await self._inner.snapshot()

    async def aclose(self) -> None:
        """Close the inner session, when it can be closed."""
        aclose = getattr(self._inner, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> CompactingSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _log(step: CompactionStep) -> None:
    for note in step.notes:
        match note:
            case CompactionSkipped(reason=reason, tokens=tokens):
                logger.warning("session compaction skipped (%d tokens): %s", tokens, reason)
            case CompactionDone(original_count=count, tokens_before=before, tokens_after=after):
                logger.info("session compacted: %d events, %d -> %d tokens", count, before, after)
            case _:
                assert_never(note)


__all__ = ["CompactingSession"]
