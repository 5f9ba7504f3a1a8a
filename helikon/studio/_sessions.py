"""The studio's sessions view: the conversations of a session backend, browsable.

A *browser* lists a backend's sessions (id, how many events, the last
event's time) and reads one session's log; the view shows the log's events
and the conversation they project to (:func:`helikon.sessions.project`, what
the next run of that session starts from). Browsers only read: none creates
a table, migrates or writes.

- :class:`MemoryBrowser`: the studio's own chat sessions (the agent server's
  :class:`~helikon.server.InMemorySessions`), the default.
- :class:`SqliteBrowser`, :class:`PostgresBrowser`, :class:`RedisBrowser`:
  the tables and streams :class:`~helikon.sessions.SqliteSession`,
  :class:`~helikon.sessions.PostgresSession` and
  :class:`~helikon.sessions.RedisSession` write.

:func:`browser_for` makes one from ``helikon studio --sessions``'s value.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final, Protocol, final

import anyio

from helikon import codec
from helikon.items import Item
from helikon.sessions import SessionEvent, event_to_json, project
from helikon.sessions._protocol import SessionError, decode_stored

#: The most sessions listed (the most recently written first).
MAX_SESSIONS: Final = 500
#: The most events read from one session (the first ones).
MAX_EVENTS: Final = 5000


class SessionBrowser(Protocol):
    """Lists a backend's sessions and reads one's log (blocking; called on a worker thread)."""

    kind: str

    def sessions(self) -> list[dict[str, Any]]:
        """``[{"id", "events", "last_at"}]``, the most recently written first."""
        ...

    def events(self, session_id: str) -> list[SessionEvent] | None:
        """The session's log, or None when there is no such session."""
        ...


@final
class MemoryBrowser:
    """The sessions of an :class:`~helikon.server.InMemorySessions` (the studio's chats).

    With ``None`` (the chat keeps its sessions in a backend of its own,
    given without ``--sessions``), it lists nothing and says so.
    """

    kind = "memory"

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def _logs(self) -> dict[str, list[SessionEvent]]:
        if self.provider is None:
            raise SessionError.unavailable(
                "the chat keeps its sessions in a backend of its own: name it with --sessions to browse it"
            )
        return {sid: session.log() for sid, session in dict(self.provider.sessions).items()}

    def sessions(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [
            {"id": sid, "events": len(log), "last_at": log[-1].at if log else None}
            for sid, log in self._logs().items()
        ]
        rows.sort(key=lambda r: -(r["last_at"] or 0))
        return rows[:MAX_SESSIONS]

    def events(self, session_id: str) -> list[SessionEvent] | None:
        return self._logs().get(session_id)


@final
class SqliteBrowser:
    """The sessions of a :class:`~helikon.sessions.SqliteSession` database file (opened read-only)."""

    kind = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise SessionError.unavailable(f"{self.path}: no such database file")
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)

    def sessions(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            try:
                rows = conn.execute(
                    "SELECT session_id, COUNT(*), MAX(at) FROM session_events GROUP BY session_id "
                    "ORDER BY MAX(at) DESC, session_id LIMIT ?",
                    (MAX_SESSIONS,),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                raise SessionError.unavailable(f"{self.path}: not a session database: {exc}") from None
        return [{"id": sid, "events": count, "last_at": at} for sid, count, at in rows]

    def events(self, session_id: str) -> list[SessionEvent] | None:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT sequence, payload FROM session_events WHERE session_id = ? ORDER BY sequence LIMIT ?",
                (session_id, MAX_EVENTS),
            ).fetchall()
        if not rows:
            return None
        return [decode_stored(session_id, seq, payload) for seq, payload in rows]


@final
class PostgresBrowser:
    """The sessions of :class:`~helikon.sessions.PostgresSession`'s ``session_events`` table."""

    kind = "postgres"

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    def _rows(self, query: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - without the extra
            raise SessionError.unavailable("PostgreSQL sessions need the 'postgres' extra", exc) from None
        try:
            with psycopg.connect(self.conninfo, connect_timeout=5) as conn:
                conn.read_only = True
                return list(conn.execute(query, args).fetchall())
        except psycopg.Error as exc:
            raise SessionError.unavailable(f"PostgreSQL: {exc}".strip(), exc) from None

    def sessions(self) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT session_id, COUNT(*), MAX(at) FROM session_events GROUP BY session_id "
            "ORDER BY MAX(at) DESC, session_id LIMIT %s",
            (MAX_SESSIONS,),
        )
        return [{"id": sid, "events": count, "last_at": at} for sid, count, at in rows]

    def events(self, session_id: str) -> list[SessionEvent] | None:
        rows = self._rows(
            "SELECT sequence, payload::text FROM session_events WHERE session_id = %s "
            "ORDER BY sequence LIMIT %s",
            (session_id, MAX_EVENTS),
        )
        if not rows:
            return None
        return [decode_stored(session_id, seq, payload) for seq, payload in rows]


@final
class RedisBrowser:
    """The sessions of :class:`~helikon.sessions.RedisSession`: the streams ``<key_prefix><id>:events``."""

    kind = "redis"

    def __init__(self, url: str, key_prefix: str = "helikon:session:") -> None:
        self.url = url
        self.key_prefix = key_prefix

    def _client(self) -> Any:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - without the extra
            raise SessionError.unavailable("Redis sessions need the 'redis' extra", exc) from None
        return redis.Redis.from_url(self.url, socket_timeout=5, decode_responses=True)

    def _guarded(self, work: Any) -> Any:
        import redis

        try:
            return work()
        except redis.RedisError as exc:
            raise SessionError.unavailable(f"Redis: {exc}", exc) from None

    def sessions(self) -> list[dict[str, Any]]:
        client = self._client()

        def work() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = []
            pattern = self.key_prefix.replace("*", r"\*").replace("?", r"\?") + "*:events"
            for key in client.scan_iter(match=pattern, count=500):
                sid = key[len(self.key_prefix) : -len(":events")]
                last = client.xrevrange(key, count=1)
                at = None
                if last:
                    try:
                        at = int(last[0][1].get("at"))
                    except (TypeError, ValueError):
                        at = None
                rows.append({"id": sid, "events": int(client.xlen(key)), "last_at": at})
                if len(rows) >= MAX_SESSIONS * 4:
                    break
            rows.sort(key=lambda r: (-(r["last_at"] or 0), r["id"]))
            return rows[:MAX_SESSIONS]

        try:
            result: list[dict[str, Any]] = self._guarded(work)
        finally:
            client.close()
        return result

    def events(self, session_id: str) -> list[SessionEvent] | None:
        client = self._client()
        try:
            page = self._guarded(
                lambda: client.xrange(
                    f"{self.key_prefix}{session_id}:events", min="-", max="+", count=MAX_EVENTS
                )
            )
        finally:
            client.close()
        if not page:
            return None
        return [decode_stored(session_id, int(fields["seq"]), fields["payload"]) for _, fields in page]


def browser_for(spec: str) -> SessionBrowser:
    """A browser from ``--sessions``: ``sqlite:PATH`` (or a path ending ``.db``/``.sqlite``/
    ``.sqlite3``), ``postgresql://...``, ``redis://...`` (``rediss://``).

    Raises:
        ValueError: the value names no backend.
    """
    if spec.startswith(("postgres://", "postgresql://")):
        return PostgresBrowser(spec)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisBrowser(spec)
    if spec.startswith("sqlite:"):
        path = spec.removeprefix("sqlite:")
        return SqliteBrowser(path.removeprefix("//") if path.startswith("///") else path)
    if spec.endswith((".db", ".sqlite", ".sqlite3")):
        return SqliteBrowser(spec)
    raise ValueError(
        f"{spec!r} names no session backend: sqlite:PATH (or a .db file), postgresql://..., redis://..."
    )


def _item(item: Item) -> dict[str, Any]:
    data: dict[str, Any] = codec.unstructure(item, Item)
    return data


def session_page(session_id: str, events: list[SessionEvent]) -> dict[str, Any]:
    """The view's data for one session: its log and the conversation it projects to."""
    return {
        "id": session_id,
        "events": [event_to_json(e) for e in events],
        "items": [_item(i) for i in project(events)],
    }


def routes(studio: Any) -> list[Any]:
    """The view's routes, for :meth:`Studio.app`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def error(status: int, code: str, message: str) -> JSONResponse:
        return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)

    async def list_sessions(request: Request) -> JSONResponse:
        browser: SessionBrowser = studio.session_browser
        try:
            rows = await anyio.to_thread.run_sync(browser.sessions)
        except SessionError as exc:
            return error(503, "sessions_unavailable", str(exc))
        return JSONResponse({"backend": browser.kind, "sessions": rows})

    async def show_session(request: Request) -> JSONResponse:
        browser: SessionBrowser = studio.session_browser
        session_id = str(request.path_params["session_id"])
        try:
            events = await anyio.to_thread.run_sync(browser.events, session_id)
        except SessionError as exc:
            return error(503, "sessions_unavailable", str(exc))
        if events is None:
            return error(404, "not_found", "no such session")
        page = session_page(session_id, events)
        page["backend"] = browser.kind
        return JSONResponse(page)

    return [
        Route("/api/sessions", list_sessions, methods=["GET"]),
        Route("/api/sessions/{session_id:path}", show_session, methods=["GET"]),
    ]


__all__ = [
    "MAX_EVENTS",
    "MAX_SESSIONS",
    "MemoryBrowser",
    "PostgresBrowser",
    "RedisBrowser",
    "SessionBrowser",
    "SqliteBrowser",
    "browser_for",
    "routes",
    "session_page",
]
