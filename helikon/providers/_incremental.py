"""A long conversation encoded once: each wire message of a run is encoded a single time.

Within a run, a model request's conversation is the previous request's plus
what the turn added. An adapter builds its wire messages from consecutive
items, and only the last wire message can still take the items that follow
it (an assistant turn its tool calls; Anthropic's same-role blocks). So when
a request's items start with the items this cache saw last for that
conversation, every wire message but that last one is final: its JSON is
kept (a :class:`msgspec.Raw`), and only the items from the start of the last
message on are converted again. The adapter encodes its body with the kept
parts in place of those messages: byte for byte the body it would encode
from scratch (``tests/unit/providers/test_incremental_encoding.py``).

Rules:

- ``convert(items)`` gives the wire messages of ``items`` as ``(start,
  message)`` pairs, ``start`` the index of the item that opened the message,
  ``message`` None when it is left out of the body; it must depend on
  ``items`` alone (a fresh conversion from a message's first item gives that
  message and all after it).
- The last message comes back as a dict the adapter may still change (a
  cache breakpoint on its last block); the others are already encoded.
- Parts are encoded as the adapter encodes its body: msgspec for Anthropic;
  for OpenAI, which sends ``json=`` through httpx, :func:`http_json`, and
  :func:`http_json_body` splices them into the body httpx would encode.
- A conversation is known by its first item (the object: a cache entry holds
  its items, so the identity stays valid); a request that does not continue
  it is converted whole. At most ``limit`` conversations are remembered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, Final, TypeAlias

import attrs
import httpx
import msgspec

from helikon.items import Item

#: The wire messages of some items: (index of the opening item, message or None).
Converted: TypeAlias = list[tuple[int, dict[str, Any] | None]]

#: How many conversations one model instance remembers (concurrent runs).
LIMIT: Final = 64

_encode = msgspec.json.Encoder().encode
#: A string no request body holds: where the parts go (see :func:`http_json_body`).
_SLOT: Final = "\x00helikon:parts\x00"


def http_json(value: object) -> bytes:
    """``value`` encoded exactly as ``httpx``'s ``json=`` encodes a request
    body (its separators and escaping differ between httpx versions)."""
    return _http_encoder()(value)


def _through_httpx(value: object) -> bytes:
    return httpx.Request("POST", "http://localhost/", json=value).content


#: How httpx versions encode ``json=`` (0.28 on; before), tried in order.
_CANDIDATES: Final[tuple[Callable[[object], bytes], ...]] = (
    lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(),
    lambda v: json.dumps(v).encode(),
)


@cache
def _http_encoder() -> Callable[[object], bytes]:
    """The candidate that encodes as this httpx does (building an
    ``httpx.Request`` per value costs far more than the encoding), or httpx
    itself when none does."""
    probe = {"text": ["\u00e9\u2028\n\x00", 0.5, 1e16, None, True], "n": {"k": -1}}
    expected = _through_httpx(probe)
    return next((c for c in _CANDIDATES if c(probe) == expected), _through_httpx)


@cache
def _item_separator() -> bytes:
    return http_json([0, 0])[2:-2]


def http_json_body(body: Mapping[str, Any], key: str) -> bytes:
    """``body`` as ``httpx``'s ``json=`` encodes it, its ``key`` list holding
    parts encoded with :func:`http_json` (as :class:`msgspec.Raw`), spliced in
    as they are."""
    values = body.get(key)
    if type(values) is not list or not any(type(v) is msgspec.Raw for v in values):
        return http_json(dict(body))
    parts = [v if type(v) is msgspec.Raw else http_json(v) for v in values]  # Raw is bytes-like
    slotted, marker = http_json({**body, key: _SLOT}), http_json(_SLOT)
    joined = b"[" + _item_separator().join(parts) + b"]"
    return slotted.replace(marker, joined, 1)


@attrs.define
class _Known:
    items: tuple[Item, ...]
    #: Every message before the last one, encoded (left-out ones dropped).
    parts: list[msgspec.Raw]
    #: Where the last message starts, as an index into ``items``.
    last: int


class MessageCache:
    """The encoded wire messages of the conversations one model instance was
    asked about (see the module rules)."""

    def __init__(self, limit: int = LIMIT, encode: Callable[[Any], bytes] = _encode) -> None:
        self._known: dict[int, _Known] = {}
        self._limit = limit
        self._encode = encode

    def messages(
        self, items: Sequence[Item], convert: Callable[[Sequence[Item]], Converted]
    ) -> list[Any]:
        """The wire messages of ``items``: the final ones as encoded parts,
        the last one (if any) as a dict."""
        items = items if type(items) is tuple else tuple(items)
        if not items:
            return [m for _, m in convert(items) if m is not None]
        key = id(items[0])
        known = self._known.pop(key, None)
        start, parts = 0, []
        if (
            known is not None
            and known.items[0] is items[0]
            and len(items) >= len(known.items)
            and items[: len(known.items)] == known.items
        ):
            start, parts = known.last, known.parts
        fresh = convert(items[start:])
        if not fresh:
            return list(parts)
        encode = self._encode
        done = [msgspec.Raw(encode(m)) for _, m in fresh[:-1] if m is not None]
        parts = [*parts, *done]
        last_start, last = fresh[-1]
        self._known[key] = _Known(items, parts, start + last_start)
        while len(self._known) > self._limit:
            del self._known[next(iter(self._known))]
        return parts if last is None else [*parts, last]


__all__ = ["LIMIT", "Converted", "MessageCache", "http_json", "http_json_body"]
