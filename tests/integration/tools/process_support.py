"""Helpers of the backend tests: process liveness, loopback servers, and the
OS sandbox or, where the kernel cannot host it, the fail-closed check."""

from __future__ import annotations

import http.server
import os
import secrets
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helikon.tools import OsSandboxBackend, OsSandboxError, Sandbox
from helikon.tools.sandbox import kernel_support


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def running_with(token: str) -> list[int]:
    """Live processes (other than this one) with a live thread whose command line contains ``token``.

    A command in a PID namespace reports its own pids (``$!``), which mean
    nothing outside; a unique word in its command line finds it from here.
    Threads are looked at one by one: a process whose first thread has
    exited shows as a zombie at ``/proc/<pid>`` while its other threads run.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            tasks = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for task in tasks:
            base = f"/proc/{name}/task/{task}"
            try:
                with open(f"{base}/cmdline", "rb") as handle:
                    cmdline = handle.read()
                with open(f"{base}/stat") as handle:
                    state = handle.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if token.encode() in cmdline and state not in ("Z", "X"):
                found.append(int(name))
                break
    return found


def unique_seconds() -> str:
    """A sleep duration no other test uses (``300.<random digits>``): a token for :func:`running_with`."""
    return f"300.{secrets.randbelow(10**9):09d}"


def written(path: Path) -> bool:
    """Whether ``path`` exists and holds something (a shell creates a
    redirect's file before the command writes to it)."""
    return path.exists() and bool(path.read_text().strip())


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def confined(sandbox: Sandbox, **options: object) -> OsSandboxBackend | None:
    """An OS sandbox backend, or ``None`` after asserting that building one fails closed here."""
    reason = kernel_support()
    if reason is None:
        return OsSandboxBackend(sandbox, **options)  # type: ignore[arg-type]
    with pytest.raises(OsSandboxError) as caught:
        OsSandboxBackend(sandbox, **options)  # type: ignore[arg-type]
    assert str(caught.value) == reason and any(
        w in reason for w in ("Landlock", "seccomp", "Linux", "sandbox")
    )
    warnings.warn(
        f"this kernel cannot host OsSandboxBackend ({reason}); "
        "asserted that building it fails closed instead",
        stacklevel=2,
    )
    return None


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = f"hello from {self.server.name} at {self.path}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def http_server(name: str) -> Iterator[http.server.ThreadingHTTPServer]:
    """A loopback HTTP server answering ``hello from <name> at <path>``; ``.hits`` lists the paths asked."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.name = name  # type: ignore[attr-defined]
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def tcp_listener() -> Iterator[tuple[int, list[str]]]:
    """A loopback TCP port and the list of peers that connected to it."""
    seen: list[str] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                continue
            seen.append(f"{peer[0]}:{peer[1]}")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], seen
    finally:
        stop.set()
        thread.join()
        listener.close()
