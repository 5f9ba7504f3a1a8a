"""Bedrock's wire work: helikon's own SigV4 signer and event-stream decoder against botocore's.

Three measurements, each the median of many repetitions:

* **sign**: the per-request cost of signing one ConverseStream request
  (a 2 KiB JSON body, temporary credentials): helikon's pure
  ``sign_headers`` against building a botocore ``AWSRequest`` and calling
  ``SigV4Auth.add_auth`` (what the adapter would do with botocore). Before
  timing, both sign the same request at the same instant and must give the
  same ``Authorization`` header.
* **decode**: decoding ConverseStream bodies fed in 1 KiB pieces, as they
  arrive from the socket: the real recordings in
  ``../shared/fixtures/provider-wire/bedrock/*.bin`` (when present) and a
  long synthetic answer of 2,000 ``contentBlockDelta`` frames, with
  helikon's ``EventStreamDecoder`` against botocore's ``EventStreamBuffer``.
  Both must yield the same payloads.
* **import**: the median wall time of a fresh ``python -c`` importing each
  side's modules (helikon's two modules; botocore's ``auth``,
  ``awsrequest``, ``credentials`` and ``eventstream``), minus a bare
  interpreter's start.

It prints one JSON line per metric in the format of the other bench scripts
(``{"sdk", "workload", "metric", "value", "unit", ...}``).

Usage: ``python bench/bedrock_wire_bench.py [--rounds N]`` (default 31 rounds;
``BENCH_BEDROCK_ROUNDS`` overrides it too). Needs botocore (the ``bedrock``
extra). No network.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import botocore.auth
import botocore.credentials
import botocore.eventstream
from botocore.awsrequest import AWSRequest

from helikon.providers._bedrock_eventstream import EventStreamDecoder, encode_message
from helikon.providers._bedrock_sigv4 import AwsCredentials, sign_headers

ROUNDS = int(os.environ.get("BENCH_BEDROCK_ROUNDS", "31"))
WIRE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "provider-wire" / "bedrock"
URL = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
HOST = "bedrock-runtime.us-east-1.amazonaws.com"
PATH = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
BODY = json.dumps(
    {"messages": [{"role": "user", "content": [{"text": "Summarise the budget. " * 90}]}]}
).encode()
KEY = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-" + "x" * 300)
WHEN = datetime(2025, 8, 30, 12, 36, tzinfo=UTC)
PIECE = 1024


def emit(workload: str, metric: str, value: float, unit: str, **extra: Any) -> None:
    record = {"sdk": "helikon", "workload": workload, "metric": metric, "value": value, "unit": unit}
    print(json.dumps({**record, **extra}), flush=True)


def per_call_us(fn: Callable[[], object], rounds: int, calls: int) -> float:
    """The median over ``rounds`` of the mean time of ``calls`` calls, in microseconds."""
    fn()  # warm-up
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


# -- signing ------------------------------------------------------------------------------


def helikon_sign(now: datetime | None = None) -> str:
    headers = sign_headers(
        method="POST",
        raw_path=PATH,
        headers={"host": HOST, "content-type": "application/json"},
        body=BODY,
        credentials=AwsCredentials(*KEY),
        region="us-east-1",
        service="bedrock",
        now=now or datetime.now(UTC),
    )
    return headers["authorization"]


BOTO_CREDENTIALS = botocore.credentials.ReadOnlyCredentials(*KEY, None)


def botocore_sign() -> str:
    request = AWSRequest(method="POST", url=URL, data=BODY, headers={"content-type": "application/json"})
    botocore.auth.SigV4Auth(BOTO_CREDENTIALS, "bedrock", "us-east-1").add_auth(request)
    return str(request.headers["Authorization"])


def check_same_signature() -> None:
    with mock.patch.object(botocore.auth, "get_current_datetime", lambda: WHEN.replace(tzinfo=None)):
        theirs = botocore_sign()
    ours = helikon_sign(WHEN)
    if ours != theirs:
        raise AssertionError(f"signatures differ:\n  helikon  {ours}\n  botocore {theirs}")


# -- event-stream decoding -------------------------------------------------------------------


def synthetic_stream(deltas: int = 2000) -> bytes:
    def frame(kind: str, payload: object) -> bytes:
        headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
        return encode_message(headers, json.dumps(payload).encode())

    out = [frame("messageStart", {"role": "assistant"})]
    out += [
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f"token {i} "}})
        for i in range(deltas)
    ]
    out.append(frame("messageStop", {"stopReason": "end_turn"}))
    return b"".join(out)


def pieces(body: bytes) -> list[bytes]:
    return [body[i : i + PIECE] for i in range(0, len(body), PIECE)]


def helikon_decode(chunks: list[bytes]) -> list[bytes]:
    decoder = EventStreamDecoder()
    out = [message.payload for chunk in chunks for message in decoder.feed(chunk)]
    decoder.close()
    return out


def botocore_decode(chunks: list[bytes]) -> list[bytes]:
    buffer = botocore.eventstream.EventStreamBuffer()
    out: list[bytes] = []
    for chunk in chunks:
        buffer.add_data(chunk)
        out.extend(message.payload for message in buffer)
    return out


def streams() -> dict[str, bytes]:
    found = {path.stem: path.read_bytes() for path in sorted(WIRE.glob("*.bin"))} if WIRE.is_dir() else {}
    if not found:
        print(f"note: no recordings at {WIRE}; only the synthetic stream", file=sys.stderr)
    found["synthetic_2000_deltas"] = synthetic_stream()
    return found


# -- import time ---------------------------------------------------------------------------------


def import_ms(statement: str, repeats: int) -> float:
    cmd = [sys.executable, "-c", statement]
    subprocess.run(cmd, check=True)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        samples.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = parser.parse_args().rounds

    check_same_signature()
    ours = per_call_us(helikon_sign, rounds, 500)
    theirs = per_call_us(botocore_sign, rounds, 500)
    emit("bedrock-sign", "us_per_request", ours, "us", impl="helikon")
    emit("bedrock-sign", "us_per_request", theirs, "us", impl="botocore", ratio=theirs / ours)

    for name, body in streams().items():
        chunks = pieces(body)
        expected = helikon_decode(chunks)
        if botocore_decode(chunks) != expected or not expected:
            raise AssertionError(f"{name}: the decoders disagree")
        calls = max(1, 200_000 // len(body))
        ours = per_call_us(lambda c=chunks: helikon_decode(c), rounds, calls)
        theirs = per_call_us(lambda c=chunks: botocore_decode(c), rounds, calls)
        extra = {"stream": name, "bytes": len(body), "frames": len(expected)}
        emit("bedrock-decode", "us_per_stream", ours, "us", impl="helikon", **extra)
        emit("bedrock-decode", "us_per_stream", theirs, "us", impl="botocore", ratio=theirs / ours, **extra)

    repeats = max(5, rounds // 3)
    bare = import_ms("pass", repeats)
    ours = import_ms(
        "import helikon.providers._bedrock_sigv4, helikon.providers._bedrock_eventstream", repeats
    )
    theirs = import_ms(
        "import botocore.auth, botocore.awsrequest, botocore.credentials, botocore.eventstream", repeats
    )
    emit("bedrock-import", "ms_over_bare_python", ours - bare, "ms", impl="helikon")
    emit("bedrock-import", "ms_over_bare_python", theirs - bare, "ms", impl="botocore")


if __name__ == "__main__":
    main()
