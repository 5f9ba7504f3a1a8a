"""The AWS event-stream decoder: real ConverseStream bodies, chunk boundaries,
checksums, truncation and header types."""

from __future__ import annotations

import struct
import uuid
import zlib
from pathlib import Path

import pytest

from helikon.providers._bedrock_eventstream import (
    MAX_FRAME,
    EventMessage,
    EventStreamDecoder,
    EventStreamError,
    HeaderValue,
    decode_headers,
    encode_message,
)

WIRE = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "provider-wire" / "bedrock"
needs_wire = pytest.mark.skipif(not WIRE.is_dir(), reason=f"real provider recordings not found at {WIRE}")

#: frames per recorded stream, counted by reading each file
FRAME_COUNTS = {
    "converse_stream_reasoning_claude-sonnet-4.bin": 25,
    "converse_stream_reasoning_gpt-oss-120b.bin": 10,
    "converse_stream_redacted_reasoning_claude-3-7-sonnet.bin": 18,
    "converse_stream_text_nova-micro.bin": 33,
    "converse_stream_text_tool_use_nova-micro.bin": 26,
}


def decode_all(data: bytes, size: int) -> list[EventMessage]:
    decoder = EventStreamDecoder()
    messages: list[EventMessage] = []
    for start in range(0, len(data), size):
        messages += decoder.feed(data[start : start + size])
    decoder.close()
    return messages


@needs_wire
@pytest.mark.parametrize("name", sorted(FRAME_COUNTS))
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_real_streams_decode_whatever_the_chunk_size(name: str, size: int) -> None:
    data = (WIRE / name).read_bytes()

    messages = decode_all(data, size)

    assert len(messages) == FRAME_COUNTS[name]
    assert messages[0].header(":event-type") == "messageStart"
    assert messages[-1].header(":event-type") == "metadata"
    assert {m.header(":message-type") for m in messages} == {"event"}
    assert {m.header(":content-type") for m in messages} == {"application/json"}
    assert all(m.payload.startswith(b"{") and m.payload.endswith(b"}") for m in messages)


@needs_wire
def test_every_recorded_stream_file_is_listed() -> None:
    assert sorted(p.name for p in WIRE.glob("*.bin")) == sorted(FRAME_COUNTS)


def test_a_frame_round_trips_with_every_header_type() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers: dict[str, HeaderValue] = {
        ":event-type": "messageStop",
        "flag": True,
        "off": False,
        "n": -7,
        "raw": b"\x00\x01",
        "id": ident,
    }

    (message,) = decode_all(encode_message(headers, b'{"a":1}'), 3)

    assert dict(message.headers) == headers
    assert message.payload == b'{"a":1}'


def test_fixed_width_header_types_decode() -> None:
    block = (
        b"\x01b\x02\xff"  # byte -1
        + b"\x01s\x03"
        + struct.pack(">h", -2)
        + b"\x01l\x05"
        + struct.pack(">q", 2**40)
        + b"\x01t\x08"
        + struct.pack(">q", 1_700_000_000_000)
    )

    assert decode_headers(block) == {"b": -1, "s": -2, "l": 2**40, "t": 1_700_000_000_000}


def test_a_wrong_message_crc_is_rejected() -> None:
    frame = bytearray(encode_message({":event-type": "metadata"}, b'{"usage":{}}'))
    frame[-6] ^= 0x20  # flip a payload bit; the trailing CRC no longer matches

    with pytest.raises(EventStreamError, match="message CRC mismatch at byte 0"):
        EventStreamDecoder().feed(bytes(frame))


def test_a_wrong_prelude_crc_is_rejected_before_waiting_for_the_frame() -> None:
    frame = bytearray(encode_message({":event-type": "metadata"}, b"{}"))
    frame[1] ^= 0x01  # corrupt the total length: only the prelude CRC can tell

    with pytest.raises(EventStreamError, match="prelude CRC mismatch"):
        EventStreamDecoder().feed(bytes(frame[:12]))


def test_the_error_names_the_offset_of_the_bad_frame() -> None:
    good = encode_message({":event-type": "a"}, b"{}")
    bad = bytearray(encode_message({":event-type": "b"}, b"{}"))
    bad[-1] ^= 0xFF

    with pytest.raises(EventStreamError, match=f"at byte {len(good)}"):
        EventStreamDecoder().feed(good + bytes(bad))


def test_impossible_lengths_are_rejected() -> None:
    def prelude(total: int, headers: int) -> bytes:
        head = struct.pack(">II", total, headers)
        return head + struct.pack(">I", zlib.crc32(head))

    with pytest.raises(EventStreamError, match="invalid frame length 8"):
        EventStreamDecoder().feed(prelude(8, 0))
    with pytest.raises(EventStreamError, match="invalid frame length"):
        EventStreamDecoder().feed(prelude(MAX_FRAME + 1, 0))
    with pytest.raises(EventStreamError, match="invalid headers length"):
        EventStreamDecoder().feed(prelude(20, 10))


def test_a_stream_cut_inside_a_frame_is_an_error_at_close() -> None:
    frame = encode_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    decoder = EventStreamDecoder()

    assert decoder.feed(frame + frame[:20]) != []
    assert decoder.pending == 20
    with pytest.raises(EventStreamError, match="ended inside a frame: 20 bytes"):
        decoder.close()


def test_a_cut_prelude_is_also_caught() -> None:
    decoder = EventStreamDecoder()
    decoder.feed(b"\x00\x00")

    with pytest.raises(EventStreamError, match="ended inside a frame"):
        decoder.close()


def test_headers_that_run_past_their_block_are_rejected() -> None:
    with pytest.raises(EventStreamError, match="runs past"):
        decode_headers(b"\x05:abc")
    with pytest.raises(EventStreamError, match="runs past"):
        decode_headers(b"\x01a\x07\x00\x09abc")
    with pytest.raises(EventStreamError, match="unknown value type 42"):
        decode_headers(b"\x01a\x2a")


def test_the_decoder_agrees_with_botocore() -> None:
    eventstream = pytest.importorskip("botocore.eventstream")
    frames = [
        encode_message({":message-type": "event", ":event-type": "contentBlockDelta"}, b'{"x":1}'),
        encode_message({":message-type": "exception", ":exception-type": "throttlingException"}, b"{}"),
    ]
    data = b"".join(frames)
    if WIRE.is_dir():  # every recording, one after the other
        data += b"".join(path.read_bytes() for path in sorted(WIRE.glob("*.bin")))
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(data)

    theirs = [(dict(m.headers), m.payload) for m in buffer]

    assert [(dict(m.headers), m.payload) for m in decode_all(data, 5)] == theirs
