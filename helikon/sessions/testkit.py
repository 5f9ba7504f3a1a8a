"""The session conformance suite: what every backend must pass before it ships.

Run it against your own backend from any async test, under trio or asyncio::

    from helikon.sessions import testkit

    async def open_session(session_id: str) -> MySession:
        return await MySession.open(DSN, session_id)

    async def test_my_backend_conforms():
        await testkit.run_all(open_session)

or one check per test, for readable reports::

    @pytest.mark.parametrize("check", testkit.CHECKS, ids=lambda c: c.name)
    async def test_conformance(check):
        await check.run(open_session, testkit.ConformanceSettings())

``open_session(session_id)`` must return a session for that id; called again
with the same id (after the first was closed, or while it is open, by
concurrent writers) it must return a session over the same log. Each check
makes fresh ids from ``settings.id_prefix`` and a random suffix, so it can
run against a shared server; sessions are closed with their ``aclose()``
when they have one. A failed check raises :class:`ConformanceError`.

The checks: an empty log; ordering and contiguous ids; ``since`` is
exclusive; every event variant round-trips; the snapshot is the projection;
concurrent writers (``writers`` tasks x ``appends_per_writer`` appends: no
gap, no duplicate, each writer's order kept); large payloads; unicode;
isolation between session ids; reopening after close.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeAlias

import anyio
import attrs

from helikon.ids import CallId
from helikon.items import ImagePart, ReasoningPart, TextPart, text_of
from helikon.sessions._events import (
    AssistantMessageEvent,
    Compacted,
    HandoffOccurred,
    SequenceId,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
)
from helikon.sessions._project import project
from helikon.sessions._protocol import Session

#: Opens (or reopens) the session with the given id.
SessionFactory: TypeAlias = Callable[[str], Awaitable[Session]]


class ConformanceError(AssertionError):
    """A backend broke the session contract."""


@attrs.frozen
class ConformanceSettings:
    """How hard the suite pushes.

    Args:
        writers: concurrent writer tasks in the concurrency check.
        appends_per_writer: appends (one event each) per writer.
        large_payload_chars: characters of the largest text written.
        id_prefix: the prefix of every session id the suite makes.
    """

    writers: int = 8
    appends_per_writer: int = 200
    large_payload_chars: int = 1_000_000
    id_prefix: str = "helikon-testkit"


@attrs.frozen
class Check:
    """One conformance check: ``await check.run(open_session, settings)``."""

    name: str
    run: Callable[[SessionFactory, ConformanceSettings], Awaitable[None]]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def new_session_id(settings: ConformanceSettings, check: str) -> str:
    """A fresh session id for ``check``."""
    return f"{settings.id_prefix}-{check}-{uuid.uuid4().hex[:16]}"


async def close(session: object) -> None:
    """Close ``session`` if it has an ``aclose()``."""
    aclose = getattr(session, "aclose", None)
    if aclose is not None:
        await aclose()


def _user(text: str, at: int = 0) -> UserMessageEvent:
    return UserMessageEvent.from_text(text, at=at)


def sample_events() -> tuple[SessionEvent, ...]:
    """One event of every variant, with every optional field exercised."""
    return (
        UserMessageEvent((TextPart("hello"), ImagePart(url="https://example.com/a.png")), at=1),
        AssistantMessageEvent((ReasoningPart("think", "sig"), TextPart("calling")), "triage", at=2),
        ToolCallRecorded(CallId("call-1"), "lookup", '{"q": "x", "n": [1, 2.5, null, true]}', at=3),
        ToolResultRecorded(CallId("call-1"), "found", "lookup", at=4),
        ToolCallRecorded(CallId("call-2"), "fail", "{}", at=5),
        ToolResultRecorded(CallId("call-2"), "boom", "", True, at=6),
        HandoffOccurred("triage", "billing", at=7),
        AssistantMessageEvent.from_text("billing here", None, at=8),
        AssistantMessageEvent((ImagePart(data="aGk=", media_type="image/png"),), "billing", at=9),
        Compacted("the user said hello", 9, at=10),
        _user("after the summary", at=11),
    )


async def _expect_log(session: Session, expected: Sequence[SessionEvent], what: str) -> None:
    got = await session.events()
    if got != list(expected):
        first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
        where = f"first difference at {first}" if first is not None else "one log is a prefix of the other"
        raise ConformanceError(f"{what}: read {len(got)} events, expected {len(expected)} ({where})")


# -- the checks ----------------------------------------------------------------------


async def check_empty(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """A new session is empty; appending nothing appends nothing."""
    session = await open_session(new_session_id(settings, "empty"))
    try:
        _expect(await session.events() == [], "a new session has events")
        _expect(await session.events(SequenceId(0)) == [], "a new session has events after 0")
        _expect(tuple(await session.snapshot()) == (), "a new session has a non-empty snapshot")
        _expect(await session.append([]) == [], "append([]) returned ids")
        _expect(await session.events() == [], "append([]) appended something")
    finally:
        await close(session)


async def check_ordering(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Ids start at 0 and are contiguous across batches; the log reads back in order."""
    session = await open_session(new_session_id(settings, "ordering"))
    try:
        batches = [[_user(f"m{b}-{i}", at=b) for i in range(size)] for b, size in enumerate((3, 1, 5, 2))]
        ids: list[SequenceId] = []
        for batch in batches:
            got = await session.append(batch)
            _expect(len(got) == len(batch), f"append of {len(batch)} events returned {len(got)} ids")
            ids.extend(got)
        _expect(ids == list(range(len(ids))), f"ids are not 0..{len(ids) - 1} in order: {ids}")
        await _expect_log(session, [e for batch in batches for e in batch], "ordering")
    finally:
        await close(session)


async def check_since_is_exclusive(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """``events(since=n)`` returns exactly the events after position ``n``."""
    session = await open_session(new_session_id(settings, "since"))
    try:
        log = [_user(f"e{i}", at=i) for i in range(6)]
        await session.append(log[:2])
        await session.append(log[2:])
        for since in range(-1, len(log) + 2):
            got = await session.events(SequenceId(since))
            _expect(got == log[since + 1 :], f"events(since={since}) returned {len(got)} events")
        _expect(await session.events(None) == log, "events(None) is not the whole log")
    finally:
        await close(session)


async def check_round_trip(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Every event variant, with every optional field, reads back equal."""
    session = await open_session(new_session_id(settings, "round-trip"))
    try:
        events = sample_events()
        await session.append(events)
        await _expect_log(session, events, "round trip")
    finally:
        await close(session)


async def check_snapshot(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """``snapshot()`` is ``project(events())``."""
    session = await open_session(new_session_id(settings, "snapshot"))
    try:
        events = sample_events()
        await session.append(events[:4])
        _expect(tuple(await session.snapshot()) == project(events[:4]), "snapshot != project(events)")
        await session.append(events[4:])
        snapshot = tuple(await session.snapshot())
        _expect(snapshot == project(await session.events()), "snapshot != project(events)")
        _expect(snapshot == project(events), "snapshot is not the projection of what was appended")
    finally:
        await close(session)


async def check_concurrent_writers(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Concurrent writers, each with its own session object: no gap, no duplicate, order kept."""
    session_id = new_session_id(settings, "concurrent")
    writers, appends = settings.writers, settings.appends_per_writer
    returned: list[list[SequenceId]] = [[] for _ in range(writers)]

    async def writer(w: int) -> None:
        session = await open_session(session_id)
        try:
            for i in range(appends):
                ids = await session.append([_user(f"w{w}:{i}", at=i)])
                _expect(len(ids) == 1, f"writer {w}: one event got ids {ids}")
                returned[w].extend(ids)
        finally:
            await close(session)

    async with anyio.create_task_group() as group:
        for w in range(writers):
            group.start_soon(writer, w)

    total = writers * appends
    all_ids = sorted(i for ids in returned for i in ids)
    _expect(all_ids == list(range(total)), f"ids of {total} appends have gaps or duplicates")
    for w, ids in enumerate(returned):
        _expect(ids == sorted(ids), f"writer {w}'s ids are out of order")
    reader = await open_session(session_id)
    try:
        log = await reader.events()
    finally:
        await close(reader)
    _expect(len(log) == total, f"the log holds {len(log)} events, expected {total}")
    seen = [-1] * writers
    for position, event in enumerate(log):
        if type(event) is not UserMessageEvent:
            raise ConformanceError(f"event {position} changed type to {type(event).__name__}")
        w_text, i_text = text_of(event.content)[1:].split(":")
        w, i = int(w_text), int(i_text)
        _expect(returned[w][i] == position, f"writer {w}'s append {i} is at {position}, not {returned[w][i]}")
        _expect(i > seen[w], f"writer {w}'s events are out of order at {position}")
        seen[w] = i


async def check_large_payloads(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Large texts and tool arguments survive intact."""
    session = await open_session(new_session_id(settings, "large"))
    try:
        n = settings.large_payload_chars
        big = ("0123456789abcdef" * (n // 16 + 1))[:n]
        args = '{"blob": "' + "x" * (n // 4) + '"}'
        events: list[SessionEvent] = [
            _user(big),
            ToolCallRecorded(CallId("big"), "store", args, at=1),
            ToolResultRecorded(CallId("big"), big[::-1], "store", at=2),
        ]
        await session.append(events[:1])
        await session.append(events[1:])
        await _expect_log(session, events, "large payloads")
    finally:
        await close(session)


#: Text a backend must store as is: accents, CJK, RTL, emoji (astral, ZWJ,
#: flags), combining marks, quotes, backslashes, control characters.
UNICODE_SAMPLES: Final = (
    "café naïve Ångström",
    "日本語のテキスト, 中文, 한국어",
    "مرحبا بالعالم — שלום עולם",
    "emoji: 😀 👩‍👩‍👧‍👦 🇫🇷 🏳️‍🌈",
    "combining: e\u0301 a\u0308 \u200b\u200d\ufeff",
    'json-ish: "quoted" \\backslash\\ \'single\' {"k": [1]} </script>',
    "controls: \t tab \n newline \r return \x01 \x1f \x7f",
    "math: ∑∫√∞ ≠ ≤ \U0001d518\U0001d52b\U0001d526",  # astral-plane letters
)


async def check_unicode(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Any Unicode text (NUL aside: PostgreSQL's JSONB refuses it) survives intact."""
    session = await open_session(new_session_id(settings, "unicode"))
    try:
        events: list[SessionEvent] = []
        for i, text in enumerate(UNICODE_SAMPLES):
            events.append(_user(text, at=i))
            events.append(AssistantMessageEvent.from_text(text[::-1], f"agent-{text[:3]}", at=i))
            call_id = CallId(f"c{i}-{text[:2]}")
            events.append(ToolCallRecorded(call_id, "echo", '{"t": "' + text[:4] + '"}', at=i))
            events.append(ToolResultRecorded(call_id, text, "echo", at=i))
        await session.append(events)
        await _expect_log(session, events, "unicode")
    finally:
        await close(session)


async def check_isolation(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """Sessions with different ids never see each other's events; each counts from 0."""
    first_id, second_id = new_session_id(settings, "isolation-a"), new_session_id(settings, "isolation-b")
    first, second = await open_session(first_id), await open_session(second_id)
    try:
        a = [_user("a0"), _user("a1"), _user("a2")]
        b = [_user("b0")]
        _expect(await first.append(a) == [0, 1, 2], "the first session's ids do not start at 0")
        _expect(await second.append(b) == [0], "the second session's ids do not start at 0")
        _expect(await first.append(b) == [3], "the first session's ids are not its own")
        await _expect_log(first, [*a, *b], "isolation (first)")
        await _expect_log(second, b, "isolation (second)")
        _expect(await second.events(SequenceId(0)) == [], "since reads across sessions")
    finally:
        await close(first)
        await close(second)


async def check_reopen(open_session: SessionFactory, settings: ConformanceSettings) -> None:
    """A closed session reopens with its log, and appends continue its ids."""
    session_id = new_session_id(settings, "reopen")
    session = await open_session(session_id)
    log = list(sample_events())
    try:
        await session.append(log[:5])
    finally:
        await close(session)
    session = await open_session(session_id)
    try:
        await _expect_log(session, log[:5], "after reopening")
        ids = await session.append(log[5:])
        _expect(ids == list(range(5, len(log))), f"ids after reopening are {ids}")
    finally:
        await close(session)
    session = await open_session(session_id)
    try:
        await _expect_log(session, log, "after reopening twice")
        _expect(tuple(await session.snapshot()) == project(log), "snapshot after reopening")
    finally:
        await close(session)


#: Every check, in the order :func:`run_all` runs them.
CHECKS: Final[tuple[Check, ...]] = (
    Check("empty", check_empty),
    Check("ordering", check_ordering),
    Check("since_is_exclusive", check_since_is_exclusive),
    Check("round_trip", check_round_trip),
    Check("snapshot", check_snapshot),
    Check("concurrent_writers", check_concurrent_writers),
    Check("large_payloads", check_large_payloads),
    Check("unicode", check_unicode),
    Check("isolation", check_isolation),
    Check("reopen", check_reopen),
)


async def run_all(open_session: SessionFactory, settings: ConformanceSettings | None = None) -> None:
    """Run every check in :data:`CHECKS`; the first failure raises :class:`ConformanceError`."""
    settings = settings or ConformanceSettings()
    for check in CHECKS:
        try:
            await check.run(open_session, settings)
        except ConformanceError as exc:
            raise ConformanceError(f"{check.name}: {exc}") from exc


__all__ = [
    "CHECKS",
    "UNICODE_SAMPLES",
    "Check",
    "ConformanceError",
    "ConformanceSettings",
    "SessionFactory",
    "check_concurrent_writers",
    "check_empty",
    "check_isolation",
    "check_large_payloads",
    "check_ordering",
    "check_reopen",
    "check_round_trip",
    "check_since_is_exclusive",
    "check_snapshot",
    "check_unicode",
    "close",
    "new_session_id",
    "run_all",
    "sample_events",
]
