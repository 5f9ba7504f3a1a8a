"""Shared plumbing for helikon's overhead benchmarks.

It mirrors the peer benches in ``shared/bench/peers`` so the numbers compare:

* the same parameters, overridable through the same environment variables
  (``BENCH_T_W1``, ``BENCH_R_W1``, ``BENCH_WARMUP_W1``, ``BENCH_T_W2``,
  ``BENCH_C_W2``, ``BENCH_N_W3``, ``BENCH_W4_REPEATS``);
* the same telemetry switches and the same network guard, installed at import
  time, before any SDK is imported: inet ``connect``/``connect_ex`` and
  ``getaddrinfo`` are recorded in :data:`NET_ATTEMPTS` and refused;
* the same output: one JSON line per metric,
  ``{"sdk", "workload", "metric", "value", "unit", ...extra}``.

:func:`main` runs each in-process workload in a fresh subprocess (so the peak
RSS of W2 is its own) once per event-loop backend, then W4, which times
fresh interpreters itself.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# Parameters (the peers' defaults; the environment overrides them for smoke runs).
T_W1 = int(os.environ.get("BENCH_T_W1", "10"))
R_W1 = int(os.environ.get("BENCH_R_W1", "200"))
WARMUP_W1 = int(os.environ.get("BENCH_WARMUP_W1", "5"))
T_W2 = int(os.environ.get("BENCH_T_W2", "4"))
C_W2 = int(os.environ.get("BENCH_C_W2", "1000"))
N_W3 = int(os.environ.get("BENCH_N_W3", "20000"))
W3_DELTA = "tok "  # one streamed text delta: 4 characters
W4_REPEATS = int(os.environ.get("BENCH_W4_REPEATS", "5"))

BACKENDS: tuple[str, ...] = ("trio", "asyncio")

# Telemetry off everywhere, as in the peer benches (helikon sends none; this
# keeps the environments identical).
_TELEMETRY_ENV = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "OTEL_SDK_DISABLED": "true",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "DO_NOT_TRACK": "1",
}
os.environ.update(_TELEMETRY_ENV)

#: Every refused network attempt: (call, address).
NET_ATTEMPTS: list[tuple[str, object]] = []


def install_net_guard() -> None:
    """Record and refuse inet connections and name lookups."""
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex

    def _inet(sock: socket.socket) -> bool:
        return sock.family in (socket.AF_INET, socket.AF_INET6)

    def connect(self: socket.socket, address: Any) -> None:
        if _inet(self):
            NET_ATTEMPTS.append(("connect", address))
            raise OSError("network disabled by benchmark guard")
        orig_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if _inet(self):
            NET_ATTEMPTS.append(("connect_ex", address))
            raise OSError("network disabled by benchmark guard")
        return orig_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        NET_ATTEMPTS.append(("getaddrinfo", host))
        raise socket.gaierror("network disabled by benchmark guard")

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo


install_net_guard()


class BenchFailure(AssertionError):
    """A workload's self-check did not hold."""


def check(condition: bool, what: str) -> None:
    """Fail loudly (even under ``python -O``) when ``condition`` is false."""
    if not condition:
        raise BenchFailure(what)


def emit(sdk: str, workload: str, metric: str, value: float, unit: str, **extra: Any) -> None:
    """Print one result line."""
    record: dict[str, Any] = {"sdk": sdk, "workload": workload, "metric": metric, "value": value}
    record["unit"] = unit
    record.update(extra)
    print(json.dumps(record), flush=True)


def rss_now_mib() -> float:
    """The process's resident set size now (VmRSS), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mib() -> float:
    """The process's peak resident set size (``ru_maxrss``, KiB on Linux), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_import(stmt: str, repeats: int = W4_REPEATS) -> tuple[float, list[float]]:
    """Median wall time in ms of ``python -c stmt`` in fresh interpreters, after one untimed run."""
    cmd = [sys.executable, "-c", stmt]
    subprocess.run(cmd, check=True, env=os.environ.copy())  # warm-up: .pyc files, page cache
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=os.environ.copy())
        samples.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(samples), samples


#: A workload that needs an event loop: called with the backend's name.
LoopWorkload = Callable[[str], None]
#: A workload that makes its own interpreters (W4).
PlainWorkload = Callable[[], None]


def main(
    sdk: str,
    loop_workloads: dict[str, LoopWorkload],
    plain_workloads: dict[str, PlainWorkload],
    script_path: str,
    argv: Sequence[str] | None = None,
) -> None:
    """Run the workloads the command line asks for.

    With ``--only NAME`` the workload runs in this process (under each
    selected backend in turn); otherwise each loop workload runs in a fresh
    subprocess per backend, then the plain ones run here.
    """
    names = [*loop_workloads, *plain_workloads]
    parser = argparse.ArgumentParser(description=f"{sdk} overhead benchmarks (JSON lines on stdout)")
    parser.add_argument("--only", choices=names, help="run one workload in this process")
    parser.add_argument(
        "--backend", choices=[*BACKENDS, "both"], default="both", help="event loop (default: both)"
    )
    args = parser.parse_args(argv)
    backends = BACKENDS if args.backend == "both" else (args.backend,)

    if args.only is not None:
        if args.only in plain_workloads:
            plain_workloads[args.only]()
        else:
            for backend in backends:
                loop_workloads[args.only](backend)
        return

    for backend in backends:
        for name in loop_workloads:
            cmd = [sys.executable, script_path, "--only", name, "--backend", backend]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
            sys.stdout.write(proc.stdout)
            sys.stdout.flush()
            if proc.returncode != 0:
                print(f"{sdk} {name} ({backend}) FAILED rc={proc.returncode}", file=sys.stderr)
                sys.exit(proc.returncode)
    for fn in plain_workloads.values():
        fn()
