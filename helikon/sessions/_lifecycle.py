"""Run-lifecycle persistence: what the live runner does around a run.

Before the run, :func:`load_history` reads the session's snapshot; the
runner prepends it to the run's input and seeds a
:class:`~helikon.sessions.SessionRecorder` with the new input items. During
the run the recorder observes every event. After the run (completed, failed
or cancelled), :func:`persist_run` drains the recorder and appends.

The asymmetry is deliberate (the book's): a run cannot faithfully resume
from an unreadable session, so a failed read is a hard error; but a run
that happened must not be reported as failed because its log could not be
written, so a failed append is logged and swallowed.
"""

from __future__ import annotations

import time

from helikon.items import Item
from helikon.sessions._protocol import Session, SessionError
from helikon.sessions._recorder import SessionRecorder

#: Seconds :func:`persist_run` may spend appending, shielded from cancellation.
PERSIST_TIMEOUT = 30.0


def now_ms() -> int:
    """The wall clock as session events stamp it: milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


async def load_history(session: Session) -> tuple[Item, ...]:
    """The conversation so far: ``session.snapshot()``, as a tuple.

    Raises:
        SessionError: the session could not be read (any other exception
            from a user's backend is wrapped as kind ``other``).
    """
    try:
        return tuple(await session.snapshot())
    except SessionError:
        raise
    except Exception as exc:
        raise SessionError.other(f"could not load the session: {type(exc).__name__}: {exc}", exc) from exc


async def persist_run(
    session: Session,
    recorder: SessionRecorder,
    now: int | None = None,
    *,
    timeout: float = PERSIST_TIMEOUT,
    keep_open: bool = False,
) -> None:
    """Append what ``recorder`` recorded, best effort; never raises an ``Exception``.

    Drains the recorder (closing every tool call left open with a synthetic
    result stamped ``now``, :func:`now_ms` by default) and appends it in one
    batch. The append is shielded from cancellation for at most ``timeout``
    seconds, so a cancelled run still leaves its log; any failure is logged
    on the ``helikon.sessions`` logger at ERROR and swallowed. With
    ``keep_open`` (a run that suspended for approval), open calls stay open.
    """
    import logging

    import anyio

    logger = logging.getLogger("helikon.sessions")
    # A suspended run's calls wait for approval: its resumption closes them.
    events = recorder.take() if keep_open else recorder.drain(now_ms() if now is None else now)
    if not events:
        return
    try:
        with anyio.move_on_after(timeout, shield=True) as scope:
            await session.append(events)
    except Exception:
        logger.exception("could not persist %d session events; the run's result stands", len(events))
        return
    if scope.cancelled_caught:
        logger.error("persisting %d session events timed out after %g s", len(events), timeout)


__all__ = ["PERSIST_TIMEOUT", "load_history", "now_ms", "persist_run"]
