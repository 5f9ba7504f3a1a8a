"""``RedisSession``: session logs in Redis streams (redis-py, the ``redis`` extra).

Rules:

- Each session is one stream at ``helikon:session:<id>:events`` (the prefix
  is configurable) plus a counter at ``helikon:session:<id>:seq`` holding how
  many sequence ids were ever reserved. Each entry carries ``seq``, ``kind``
  (the event's tag), ``payload`` (its JSON) and ``at``.
- An append is one Lua script, which Redis runs atomically: it checks the
  stream's last entry agrees with the counter (before writing anything),
  reserves the batch's ids with ``INCRBY`` and ``XADD``\\ s one entry per event.
  Concurrent appenders can never share an id or leave a gap. The entry id is
  ``0-<seq + 1>``, derived from the sequence, so ``events(since)`` is a
  range read and a counter that went missing (eviction) fails loudly instead
  of reusing ids.
- The session never trims its stream: run the keyspace under
  ``maxmemory-policy noeviction`` (an evicting policy could silently drop
  entries or the counter), and bound growth with compaction.
- TLS and every connection setting are the client's: pass your own
  ``redis.Redis`` (e.g. ``redis.Redis.from_url("rediss://...")``). The
  client is redis-py's blocking one, used from worker threads
  (``anyio.to_thread``) so the backend runs under trio and asyncio alike;
  its connection pool is thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, final

import anyio.to_thread
import redis
import redis.exceptions

from helikon.sessions._events import SequenceId, SessionEvent, encode_event, event_tag
from helikon.sessions._protocol import SessionError, decode_stored
from helikon.sessions._threaded import ThreadedSession

T = TypeVar("T")

#: KEYS: stream, counter. ARGV: kind, payload, at for each event. Returns the first id.
APPEND_SCRIPT: Final = """
local n = #ARGV / 3
local reserved = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local top = tonumber(string.match(last[1][1], '^0%-(%d+)$') or '-1')
  if top ~= reserved then
    return redis.error_reply('helikon: stream ' .. KEYS[1] .. ' ends at ' .. last[1][1] ..
      ' but its counter says ' .. reserved .. ' (was a key evicted or edited?)')
  end
elseif reserved > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('helikon: stream ' .. KEYS[1] .. ' is missing but its counter says ' ..
    reserved .. ' (was a key evicted or deleted?)')
end
local first = redis.call('INCRBY', KEYS[2], n) - n
for i = 0, n - 1 do
  local seq = first + i
  redis.call('XADD', KEYS[1], string.format('0-%d', seq + 1),
    'seq', string.format('%d', seq), 'kind', ARGV[3 * i + 1],
    'payload', ARGV[3 * i + 2], 'at', ARGV[3 * i + 3])
end
return first
"""

#: Entries read per ``XRANGE`` call.
PAGE: Final = 1000


def _guard(work: Callable[[], T]) -> T:
    try:
        return work()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise SessionError.unavailable(f"{type(exc).__name__}: {exc}", exc) from exc
    except redis.exceptions.RedisError as exc:
        raise SessionError.backend(exc) from exc


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@final
class RedisSession(ThreadedSession):
    """A durable :class:`~helikon.sessions.Session` in a Redis stream.

    Args:
        client: a blocking ``redis.Redis`` (bring your own for TLS, auth,
            timeouts, retries); ``decode_responses`` may be on or off.
        session_id: the log this instance reads and writes.
        key_prefix: keys are ``<key_prefix><session_id>:events`` and ``:seq``.
        owns_client: close ``client`` in :meth:`aclose`.
    """

    def __init__(
        self,
        client: redis.Redis,
        session_id: str,
        *,
        key_prefix: str = "helikon:session:",
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._stream = f"{key_prefix}{session_id}:events"
        self._counter = f"{key_prefix}{session_id}:seq"
        self._script = client.register_script(APPEND_SCRIPT)
        self._owns_client = owns_client

    @classmethod
    async def connect(
        cls, url: str, session_id: str, *, key_prefix: str = "helikon:session:"
    ) -> RedisSession:
        """Connect to ``url`` (``redis://`` or ``rediss://``), check it answers, open ``session_id``.

        The session owns the client and closes it in :meth:`aclose`.

        Raises:
            SessionError: the server cannot be reached (unavailable).
        """
        client = redis.Redis.from_url(url)
        try:
            await anyio.to_thread.run_sync(lambda: _guard(client.ping))
        except BaseException:
            client.close()
            raise
        return cls(client, session_id, key_prefix=key_prefix, owns_client=True)

    @property
    def session_id(self) -> str:
        """The id of the log this instance reads and writes."""
        return self._session_id

    @property
    def keys(self) -> tuple[str, str]:
        """The stream's key and the counter's key."""
        return self._stream, self._counter

    def __repr__(self) -> str:
        return f"RedisSession({self._session_id!r})"

    def _append(self, events: list[SessionEvent]) -> int:
        args: list[str | int] = []
        for event in events:
            args += [event_tag(event), encode_event(event).decode(), event.at]
        return int(_guard(lambda: self._script(keys=[self._stream, self._counter], args=args)))

    def _read(self, since: SequenceId | None) -> list[SessionEvent]:
        def work() -> list[tuple[int, str]]:
            out: list[tuple[int, str]] = []
            start = "-" if since is None else f"0-{max(since, -1) + 2}"
            while True:
                page: Any = self._client.xrange(self._stream, min=start, max="+", count=PAGE)
                for _, fields in page:
                    row = {_text(k): v for k, v in fields.items()}
                    out.append((int(_text(row["seq"])), _text(row["payload"])))
                if len(page) < PAGE:
                    return out
                start = f"0-{out[-1][0] + 2}"

        return [decode_stored(self._session_id, seq, payload) for seq, payload in _guard(work)]

    def _close(self) -> None:
        """Close the client if this session owns it (a shared client stays open)."""
        if self._owns_client:
            self._client.close()


__all__ = ["APPEND_SCRIPT", "RedisSession"]
