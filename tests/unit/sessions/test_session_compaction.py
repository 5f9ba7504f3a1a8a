"""The compaction machine's decisions and the heuristic token counter, with no IO.

``drive`` below is a synchronous interpreter for the machine: a list is the
inner session, a function the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import pytest
from returns.result import Failure

from helikon.errors import ConfigError, StepError
from helikon.ids import CallId
from helikon.items import (
    AssistantMessage,
    ImagePart,
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
from helikon.model import ModelSettings
from helikon.sessions import Compacted, HeuristicTokenCounter, SessionEvent, UserMessageEvent, project
from helikon.sessions._compaction import (
    DEFAULT_PROMPT,
    AppendEvents,
    CompactionDone,
    CompactionEffect,
    CompactionNote,
    CompactionRecorded,
    CompactionResult,
    CompactionSkipped,
    CompactionState,
    Compactor,
    CountTokens,
    EventsAppended,
    LogRead,
    ReadLog,
    RecordCompaction,
    Settle,
    Settled,
    Summarize,
    Summarized,
    SummaryFailed,
    TokensCounted,
    advance_compaction,
    begin_append,
    estimate_events,
)

COUNT = HeuristicTokenCounter().count


@attrs.define
class Run:
    compactor: Compactor
    effects: list[CompactionEffect]
    notes: list[CompactionNote]


def drive(
    compactor: Compactor,
    log: list[SessionEvent],
    events: Sequence[SessionEvent],
    summarize: Callable[[Summarize], CompactionResult] = lambda _: Summarized("short"),
    count: Callable[[Sequence[Item]], int] = COUNT,
) -> Run:
    step = begin_append(compactor, events)
    run = Run(compactor, [], [])
    while True:
        run.effects.append(step.effect)
        run.notes.extend(step.notes)
        result: CompactionResult
        match step.effect:
            case AppendEvents(events=batch):
                log.extend(batch)
                result = EventsAppended()
            case ReadLog():
                result = LogRead(tuple(log))
            case CountTokens(items=items):
                result = TokensCounted(count(items))
            case Summarize():
                result = summarize(step.effect)
            case RecordCompaction(summary=summary, original_count=n):
                log.append(Compacted(summary, n, at=0))
                result = CompactionRecorded()
            case Settle():
                assert type(step.state.phase) is Settled
                run.compactor = step.state.compactor
                return run
        step = advance_compaction(step.state, result).unwrap()


def kinds(run: Run) -> list[str]:
    return [type(e).__name__ for e in run.effects]


def words(n: int) -> UserMessageEvent:
    """A user message of ``n`` heuristic tokens."""
    return UserMessageEvent.from_text("abcd" * n, at=0)


# -- the heuristic counter ---------------------------------------------------------


def test_the_heuristic_is_ceil_of_chars_over_four() -> None:
    assert COUNT([]) == 0
    assert COUNT([user_text("")]) == 0
    assert COUNT([user_text("a")]) == 1
    assert COUNT([user_text("abcd")]) == 1
    assert COUNT([user_text("abcde")]) == 2
    assert COUNT([user_text("ab"), user_text("cd"), user_text("e")]) == 2  # summed, then rounded up


def test_the_heuristic_counts_code_points_not_bytes() -> None:
    assert COUNT([user_text("😀😀😀😀")]) == 1
    assert COUNT([user_text("e\u0301")]) == 1  # two code points


def test_what_the_heuristic_counts() -> None:
    def n(item: Item) -> int:
        return COUNT([item]) * 4

    assert n(UserMessage((TextPart("abcd"), ReasoningPart("efgh", "sig-not-counted")))) == 8
    assert n(SystemMessage((TextPart("abcd"),))) == 4
    assert n(AssistantMessage((TextPart("abcd"),), "an-agent-name-not-counted")) == 4
    assert n(UserMessage((ImagePart(url="https://example.com/" + "x" * 100),))) == 0
    assert n(ToolResult(CallId("id-not-counted"), "name-not-counted", "abcdefgh")) == 8
    # name + arguments re-encoded as compact JSON: "add" + '{"a":1,"b":[2,3]}'
    assert COUNT([ToolCall(CallId("c"), "add", '{ "a" : 1,\n "b": [2, 3] }')]) == -(-(3 + 17) // 4)
    # malformed arguments count as written
    assert COUNT([ToolCall(CallId("c"), "f", "{oops")]) == 2


def test_estimate_events_counts_the_items_and_summaries_of_events() -> None:
    assert estimate_events([words(3), Compacted("abcd" * 2, 1, at=0)]) == 5


# -- the machine -----------------------------------------------------------------------


def test_threshold_zero_or_negative_is_rejected() -> None:
    with pytest.raises(ConfigError):
        Compactor(0)
    with pytest.raises(ConfigError):
        Compactor(-5)


def test_the_users_events_are_appended_first_always() -> None:
    log: list[SessionEvent] = []
    run = drive(Compactor(10), log, [words(1)])
    assert run.effects[0] == AppendEvents((words(1),))


def test_the_first_append_runs_the_authoritative_count() -> None:
    log: list[SessionEvent] = [words(3)] * 2
    run = drive(Compactor(100), log, [words(1)])
    assert kinds(run) == ["AppendEvents", "ReadLog", "CountTokens", "Settle"]
    assert run.compactor.estimate == 7


def test_later_appends_under_the_threshold_only_add_to_the_estimate() -> None:
    log: list[SessionEvent] = []
    compactor = drive(Compactor(10), log, [words(2)]).compactor
    run = drive(compactor, log, [words(3)])
    assert kinds(run) == ["AppendEvents", "Settle"]
    assert run.compactor.estimate == 5


def test_crossing_the_threshold_compacts_the_whole_log() -> None:
    log: list[SessionEvent] = []
    compactor = drive(Compactor(10), log, [words(6)]).compactor
    seen: list[Summarize] = []

    def summarize(effect: Summarize) -> CompactionResult:
        seen.append(effect)
        return Summarized("abcdabcd")

    run = drive(compactor, log, [words(6)], summarize)
    assert kinds(run) == [
        "AppendEvents",
        "ReadLog",
        "CountTokens",
        "Summarize",
        "RecordCompaction",
        "CountTokens",
        "Settle",
    ]
    # the model sees the projected conversation and then the prompt, as a user message
    assert seen[0].request.messages == (*project(log[:2]), user_text(DEFAULT_PROMPT))
    assert log[-1] == Compacted("abcdabcd", 2, at=0)
    assert project(log) == (system_text("abcdabcd"),)
    assert run.compactor.estimate == 2
    assert run.notes == [CompactionDone(2, 12, 2)]


def test_the_prompt_and_settings_are_the_configured_ones() -> None:
    settings = ModelSettings(temperature=0.0)
    log: list[SessionEvent] = [words(20)]
    seen: list[Summarize] = []

    def summarize(effect: Summarize) -> CompactionResult:
        seen.append(effect)
        return Summarized("s")

    drive(Compactor(10, "Summarise!", settings), log, [], summarize)
    assert seen[0].request.messages[-1] == user_text("Summarise!")
    assert seen[0].request.settings == settings


def test_the_count_after_compaction_is_at_or_under_threshold_so_appends_are_cheap_again() -> None:
    log: list[SessionEvent] = []
    compactor = drive(Compactor(10), log, [words(11)]).compactor
    run = drive(compactor, log, [words(1)])
    assert kinds(run) == ["AppendEvents", "Settle"]


def test_a_blank_summary_is_skipped_with_a_note() -> None:
    log: list[SessionEvent] = [words(20)]
    run = drive(Compactor(10), log, [], lambda _: Summarized(" \n\t "))
    assert "RecordCompaction" not in kinds(run)
    assert not any(type(e) is Compacted for e in log)
    assert run.notes == [CompactionSkipped("the model's summary is blank", 20)]
    assert run.compactor.estimate == 20  # still over: the next append tries again


def test_a_failed_summary_is_skipped_with_a_note() -> None:
    log: list[SessionEvent] = [words(20)]
    run = drive(Compactor(10), log, [], lambda _: SummaryFailed("ModelError: down"))
    assert not any(type(e) is Compacted for e in log)
    assert len(run.notes) == 1 and "ModelError: down" in run.notes[0].reason  # type: ignore[union-attr]


def test_the_guard_skips_an_empty_conversation() -> None:
    # a counter that charges a fixed overhead makes an empty conversation "too big"
    run = drive(Compactor(10), [], [], count=lambda items: 50)
    assert "Summarize" not in kinds(run)
    assert run.notes == [CompactionSkipped("the conversation is empty", 50)]


def test_the_guard_skips_a_lone_summary_so_compaction_converges() -> None:
    log: list[SessionEvent] = [words(20), Compacted("x" * 100, 1, at=0)]
    run = drive(Compactor(10), log, [])
    assert "Summarize" not in kinds(run)
    assert len(run.notes) == 1 and "lone summary" in run.notes[0].reason  # type: ignore[union-attr]


def test_a_summary_over_threshold_is_compacted_again_once_something_follows_it() -> None:
    log: list[SessionEvent] = [words(20)]
    compactor = drive(Compactor(10), log, [], lambda _: Summarized("y" * 80)).compactor
    assert compactor.estimate == 20
    run = drive(compactor, log, [words(1)], lambda _: Summarized("ok"))
    assert "Summarize" in kinds(run)
    assert project(log) == (system_text("ok"),)


def test_a_result_that_does_not_answer_the_effect_is_a_step_error() -> None:
    step = begin_append(Compactor(10), [])
    wrongs: list[CompactionResult] = [
        LogRead(()),
        TokensCounted(1),
        Summarized("s"),
        SummaryFailed("x"),
        CompactionRecorded(),
    ]
    for wrong in wrongs:
        outcome = advance_compaction(step.state, wrong)
        assert isinstance(outcome, Failure) and isinstance(outcome.failure(), StepError)
    settled = CompactionState(Compactor(10), Settled())
    assert isinstance(advance_compaction(settled, EventsAppended()), Failure)


def test_the_machine_is_deterministic() -> None:
    log_a: list[SessionEvent] = [words(30)]
    log_b: list[SessionEvent] = [words(30)]
    assert drive(Compactor(10), log_a, [words(2)]) == drive(Compactor(10), log_b, [words(2)])
    assert log_a == log_b
