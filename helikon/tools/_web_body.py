"""Reading a response body under a size limit, decompression included.

``max_bytes`` limits the *decoded* body: a small gzip body that inflates to
gigabytes (a decompression bomb) is cut off as soon as the inflated bytes
pass the limit, because inflating is done here, a bounded piece at a time
(``zlib``'s ``max_length``), instead of by httpx, which inflates each
network chunk whole. WebFetch therefore asks only for ``gzip`` and
``deflate`` and refuses any other ``Content-Encoding``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Final

import httpx

from helikon.errors import ToolError

#: What WebFetch sends as ``Accept-Encoding``: the encodings decoded here.
ACCEPT_ENCODING: Final = "gzip, deflate"
#: Inflate at most this much per step, so one step cannot blow past the limit by much.
_STEP: Final = 64 * 1024


class _Inflater:
    """Incremental gzip/deflate decoding with bounded output per step."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        # gzip: the gzip header; deflate: zlib-wrapped first, raw deflate if that fails (as browsers do)
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, a bounded piece at a time (the caller stops early)."""
        pending = data
        while True:
            try:
                piece = self._zlib.decompress(pending, _STEP)
            except zlib.error:
                if self._encoding == "deflate" and not self._started:
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._started = True
                    continue
                raise ToolError(f"the response is not valid {self._encoding} data") from None
            self._started = True
            if piece:
                yield piece
            pending = self._zlib.unconsumed_tail
            # a full piece may leave output inside zlib even with no input left: ask again
            if self._zlib.eof or (not pending and len(piece) < _STEP):
                return


async def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The decoded body of a streamed ``response``, at most ``max_bytes`` long.

    Raises:
        ToolError: the body (decoded) is longer than ``max_bytes``, or uses
            a content encoding other than gzip and deflate.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
        raise ToolError(f"unsupported content encoding {encoding!r}")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and encoding in ("identity", "") and int(declared) > max_bytes:  # fail early
        raise ToolError(f"the response is {int(declared)} bytes, over the {max_bytes}-byte limit")
    compressed = encoding not in ("identity", "")
    inflater = _Inflater("gzip" if encoding == "x-gzip" else encoding) if compressed else None
    parts: list[bytes] = []
    total = 0
    async for raw in response.aiter_raw():
        for piece in inflater.feed(raw) if inflater is not None else (raw,):
            total += len(piece)
            if total > max_bytes:
                raise ToolError(f"the response is over the {max_bytes}-byte limit")
            parts.append(piece)
    return b"".join(parts)


__all__ = ["ACCEPT_ENCODING", "read_capped"]
