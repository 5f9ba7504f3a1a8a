"""The AWS event-stream binary framing (``application/vnd.amazon.eventstream``).

ConverseStream answers with a sequence of binary messages, each laid out as::

    +-------------------+-------------------+------------------+
    | total length (u32)| headers len (u32) | prelude CRC (u32)|   prelude: 12 bytes
    +-------------------+-------------------+------------------+
    | headers (headers len bytes)                              |
    | payload (total - headers len - 16 bytes)                 |
    +----------------------------------------------------------+
    | message CRC (u32): CRC32 of every byte before it         |
    +----------------------------------------------------------+

All integers are big-endian; both checksums are the standard CRC32 (the one
``zlib.crc32`` computes). A header is a one-byte name length, the name, a
one-byte value type and the value (see :data:`_FIXED_SIZES`; types 6 and 7 are
length-prefixed with a u16).

:class:`EventStreamDecoder` is incremental: feed it the bytes as they arrive,
in pieces of any size, and it hands back whole messages once their checksums
have been verified. A frame whose prelude or message CRC does not match, or
whose lengths are impossible, raises :class:`EventStreamError`; so does a
stream that ends inside a frame (:meth:`EventStreamDecoder.close`). It never
waits for more bytes than a frame's prelude announces, so a corrupt length
cannot make it swallow the rest of the stream silently.

:func:`encode_message` builds frames; tests use it to write well-formed and
deliberately corrupt streams.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping
from typing import Final, TypeAlias

import attrs

#: A decoded header value (type 8, a timestamp, comes back as epoch milliseconds).
HeaderValue: TypeAlias = bool | int | bytes | str | uuid.UUID

_PRELUDE: Final = 12
_CRC: Final = 4
#: The smallest frame: prelude plus message CRC, no headers, no payload.
_MIN_FRAME: Final = _PRELUDE + _CRC
#: Limits from the event-stream specification (what the AWS SDKs enforce too).
MAX_FRAME: Final = 16 * 1024 * 1024
MAX_HEADERS: Final = 128 * 1024

# value type -> (struct format, size) for fixed-size types
_FIXED_SIZES: Final[Mapping[int, tuple[str, int]]] = {
    2: (">b", 1),  # byte
    3: (">h", 2),  # short
    4: (">i", 4),  # integer
    5: (">q", 8),  # long
    8: (">q", 8),  # timestamp, ms since the epoch
}


class EventStreamError(ValueError):
    """The bytes are not a valid event stream (bad checksum, length or header)."""


@attrs.frozen
class EventMessage:
    """One verified frame: its headers (in wire order) and raw payload."""

    headers: Mapping[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str | None:
        """A string header's value, or None when absent or not a string."""
        value = self.headers.get(name)
        return value if isinstance(value, str) else None


def _u32(data: bytes | bytearray | memoryview, at: int) -> int:
    value: int = struct.unpack_from(">I", data, at)[0]
    return value


def decode_headers(data: bytes) -> dict[str, HeaderValue]:
    """Parse a frame's header block.

    >>> decode_headers(b"\\x0b:event-type\\x07\\x00\\x0cmessageStart")
    {':event-type': 'messageStart'}

    Raises:
        EventStreamError: a header runs past the block or has an unknown type.
    """
    headers: dict[str, HeaderValue] = {}
    pos, end = 0, len(data)
    try:
        while pos < end:
            name_len = data[pos]
            pos += 1
            if name_len == 0 or pos + name_len > end:
                raise EventStreamError("a header name runs past the header block")
            name = data[pos : pos + name_len].decode("utf-8")
            pos += name_len
            kind = data[pos]
            pos += 1
            value: HeaderValue
            if kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED_SIZES:
                fmt, size = _FIXED_SIZES[kind]
                if pos + size > end:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                value = struct.unpack_from(fmt, data, pos)[0]
                pos += size
            elif kind in (6, 7):
                if pos + 2 > end:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                size = struct.unpack_from(">H", data, pos)[0]
                pos += 2
                if pos + size > end:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                raw = data[pos : pos + size]
                value = raw.decode("utf-8") if kind == 7 else bytes(raw)
                pos += size
            elif kind == 9:
                if pos + 16 > end:
                    raise EventStreamError(f"header {name!r} runs past the header block")
                value = uuid.UUID(bytes=bytes(data[pos : pos + 16]))
                pos += 16
            else:
                raise EventStreamError(f"header {name!r} has unknown value type {kind}")
            headers[name] = value
    except IndexError:
        raise EventStreamError("a header runs past the header block") from None
    except UnicodeDecodeError as exc:
        raise EventStreamError(f"a header is not valid UTF-8 ({exc})") from None
    return headers


@attrs.define
class EventStreamDecoder:
    """Incremental event-stream decoding: feed bytes, get verified messages.

    >>> frame = encode_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    >>> decoder = EventStreamDecoder()
    >>> decoder.feed(frame[:7])
    []
    >>> [m.payload for m in decoder.feed(frame[7:])]
    [b'{"stopReason":"end_turn"}']
    >>> decoder.close()  # nothing left over: a clean end
    """

    _buffer: bytearray = attrs.field(factory=bytearray)
    _offset: int = 0  # bytes of the stream consumed so far (for error messages)

    def feed(self, chunk: bytes) -> list[EventMessage]:
        """Add ``chunk`` and return every message now complete.

        Raises:
            EventStreamError: a checksum does not match or a length is invalid.
        """
        self._buffer += chunk
        messages: list[EventMessage] = []
        while len(self._buffer) >= _PRELUDE:
            total = _u32(self._buffer, 0)
            headers_len = _u32(self._buffer, 4)
            prelude_crc = _u32(self._buffer, 8)
            actual = zlib.crc32(self._buffer[:8])
            if actual != prelude_crc:
                raise EventStreamError(
                    f"prelude CRC mismatch at byte {self._offset}: "
                    f"frame says {prelude_crc:#010x}, bytes give {actual:#010x}"
                )
            if total < _MIN_FRAME or total > MAX_FRAME:
                raise EventStreamError(f"invalid frame length {total} at byte {self._offset}")
            if headers_len > MAX_HEADERS or headers_len > total - _MIN_FRAME:
                raise EventStreamError(f"invalid headers length {headers_len} at byte {self._offset}")
            if len(self._buffer) < total:
                break
            frame = bytes(self._buffer[:total])
            message_crc = _u32(frame, total - _CRC)
            actual = zlib.crc32(frame[: total - _CRC])
            if actual != message_crc:
                raise EventStreamError(
                    f"message CRC mismatch at byte {self._offset}: "
                    f"frame says {message_crc:#010x}, bytes give {actual:#010x}"
                )
            headers = decode_headers(frame[_PRELUDE : _PRELUDE + headers_len])
            messages.append(EventMessage(headers, frame[_PRELUDE + headers_len : total - _CRC]))
            del self._buffer[:total]
            self._offset += total
        return messages

    @property
    def pending(self) -> int:
        """How many bytes wait for the rest of their frame."""
        return len(self._buffer)

    def close(self) -> None:
        """Declare the end of the stream.

        Raises:
            EventStreamError: the stream stopped in the middle of a frame.
        """
        if self._buffer:
            raise EventStreamError(
                f"the stream ended inside a frame: {len(self._buffer)} bytes of an unfinished frame "
                f"at byte {self._offset}"
            )


def _encode_header(name: str, value: HeaderValue) -> bytes:
    raw_name = name.encode("utf-8")
    out = bytes([len(raw_name)]) + raw_name
    if isinstance(value, bool):
        return out + bytes([0 if value else 1])
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return out + b"\x07" + struct.pack(">H", len(raw)) + raw
    if isinstance(value, bytes):
        return out + b"\x06" + struct.pack(">H", len(value)) + value
    if isinstance(value, uuid.UUID):
        return out + b"\x09" + value.bytes
    return out + b"\x04" + struct.pack(">i", value)


def encode_message(headers: Mapping[str, HeaderValue], payload: bytes) -> bytes:
    """One event-stream frame with correct checksums.

    Strings become type 7, bytes type 6, bools types 0/1, ints type 4 and
    UUIDs type 9.

    >>> frame = encode_message({":message-type": "event"}, b"{}")
    >>> len(frame), EventStreamDecoder().feed(frame)[0].header(":message-type")
    (40, 'event')
    """
    header_block = b"".join(_encode_header(name, value) for name, value in headers.items())
    total = _MIN_FRAME + len(header_block) + len(payload)
    prelude = struct.pack(">II", total, len(header_block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + header_block + payload
    return body + struct.pack(">I", zlib.crc32(body))


__all__ = [
    "MAX_FRAME",
    "MAX_HEADERS",
    "EventMessage",
    "EventStreamDecoder",
    "EventStreamError",
    "HeaderValue",
    "decode_headers",
    "encode_message",
]
