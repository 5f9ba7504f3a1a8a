"""Where runs execute: the protocol an :class:`~helikon.server.AgentServer`
hands runs to, and what it reads back.

Two backends ship: :class:`~helikon.server.InProcessRuns` (runs are tasks of
the server process, their logs kept in memory) and
:class:`~helikon.server.temporal.TemporalRuns` (runs are Temporal workflows,
so every replica of the server reads and approves every run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import attrs

from helikon.errors import HelikonError
from helikon.items import AgentInput
from helikon.server._runs import Frame


class RunNotFound(HelikonError):
    """No run has this id (never started, or swept by retention)."""


class ServerBusy(HelikonError):
    """The server admits no run now (its queue is full, or it is draining):
    answered with 503 and ``Retry-After: retry_after``."""

    def __init__(self, message: str, retry_after: int = 2) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ApprovalRefused(HelikonError):
    """Decisions that do not answer the run's pending approvals."""


@attrs.frozen
class Decision:
    """A human's answer to one pending tool call: ``call_id`` of the agent
    at ``path`` in an agent tree (``()``: the run's own agent, or the one
    pending call with that id)."""

    call_id: str
    approved: bool
    reason: str = ""
    path: tuple[str, ...] = ()


@attrs.frozen
class StartRun:
    """What a backend needs to start a run.

    ``ctx`` is the run context the server's context provider built (the
    in-process backend runs under it; a Temporal backend ignores it: the
    worker's posture governs there).
    """

    agent: Any
    input: AgentInput
    ctx: Any
    session_id: str | None
    run_id: str
    detached: bool  # async mode: the run outlives the request
    owner: str | None = None  # the identity that started it (None: no authentication)


def owner_of(identity: Any) -> str | None:
    """The owner key of an authenticated identity: ``None`` when there is no
    authentication, the identity itself when it is a string (``BearerAuth``'s
    token names), else its ``str()``."""
    if identity is None:
        return None
    return identity if isinstance(identity, str) else str(identity)


def scoped_session_id(owner: str | None, session_id: str) -> str:
    """The key a session id is stored under: the client's id, prefixed by its
    owner when there is one (length-prefixed, so no owner and id can collide
    with another pair). Two identities sending the same ``X-Session-Id`` get
    two sessions."""
    return session_id if owner is None else f"{len(owner)}:{owner}:{session_id}"


class RunHandle(Protocol):
    """One run, as a backend shows it."""

    @property
    def run_id(self) -> str: ...

    @property
    def agent(self) -> str: ...

    async def describe(self) -> dict[str, Any]:
        """Status and, once finished, the result, as JSON data."""
        ...

    def frames(self, since: int = 0) -> AsyncIterator[Frame]:
        """The run's frames from ``since``: stored ones, then live ones, up to
        and including a terminal frame."""
        ...

    async def approve(self, decisions: tuple[Decision, ...]) -> None:
        """Answer the pending approvals (raises :class:`ApprovalRefused`)."""
        ...

    async def cancel(self) -> None: ...


class RunBackend(Protocol):
    """Starts runs and finds them again by id."""

    async def start(self, request: StartRun) -> RunHandle: ...

    async def find(self, agent: str, run_id: str) -> RunHandle:
        """The run (raises :class:`RunNotFound`)."""
        ...

    async def sweep(self) -> int:
        """Drop finished runs past retention; how many were dropped."""
        ...

    async def serve(self) -> None:
        """Work the backend does for as long as the app lives (runs, sweeps);
        started in the app's lifespan, cancelled when it ends."""
        ...


__all__ = [
    "ApprovalRefused",
    "Decision",
    "RunBackend",
    "RunHandle",
    "RunNotFound",
    "ServerBusy",
    "StartRun",
    "owner_of",
    "scoped_session_id",
]
