"""Helpers of the MCP integration tests: the npm servers, a loopback HTTP
everything-server, a tool context, and running a coroutine on a backend."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import attrs
import pytest
from npm_servers import EVERYTHING, FILESYSTEM, NpmUnavailable, ensure

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.ids import CallId, RunId
from helikon.mcp import McpServerHandle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.loopback import free_port

HERE = Path(__file__).resolve().parent
#: Preloaded into node so the HTTP server listens on 127.0.0.1 only.
LOOPBACK = HERE / "loopback.cjs"
T = TypeVar("T")


def installed_servers() -> Path:
    """The npm servers' directory: installed when missing; a skip without npm (a failure under CI)."""
    try:
        return ensure()
    except NpmUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the MCP integration tests: {exc}")
        pytest.skip(str(exc))


@attrs.frozen
class Servers:
    """Where the npm servers are, and handles to them."""

    root: Path

    @property
    def everything(self) -> Path:
        return self.root / EVERYTHING

    @property
    def filesystem(self) -> Path:
        return self.root / FILESYSTEM

    def everything_stdio(self, **options: Any) -> McpServerHandle:
        return McpServerHandle.stdio(
            "node", args=[str(self.everything), "stdio"], stderr=subprocess.DEVNULL, **options
        )

    def everything_stdio_with_pid(self, pid_file: Path, **options: Any) -> McpServerHandle:
        """The everything server started through ``sh``, which writes the node pid to ``pid_file``."""
        script = 'echo $$ > "$0"; exec node "$1" stdio'
        return McpServerHandle.stdio(
            "sh",
            args=["-c", script, str(pid_file), str(self.everything)],
            stderr=subprocess.DEVNULL,
            **options,
        )

    def filesystem_stdio(self, root: Path, **options: Any) -> McpServerHandle:
        return McpServerHandle.stdio(
            "node", args=[str(self.filesystem), str(root)], stderr=subprocess.DEVNULL, **options
        )


@attrs.frozen
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@contextmanager
def everything_http(servers: Servers) -> Iterator[HttpServer]:
    """server-everything in ``streamableHttp`` mode on a free 127.0.0.1 port."""
    for _ in range(3):
        port = free_port()
        process = subprocess.Popen(
            ["node", "--require", str(LOOPBACK), str(servers.everything), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _listening(port, process):
            break
        process.kill()
        process.wait()
    else:
        raise AssertionError("server-everything (streamableHttp) did not start")
    try:
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", process)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _listening(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def tool_ctx(cancel: CancellationToken | None = None) -> ToolContext[None]:
    """What a tool sees when invoked directly (outside a run)."""
    return ToolContext(
        None,
        SessionState(),
        Actions(),
        cancel or CancellationToken(),
        TracerHandle(),
        CallId("c1"),
        RunId("r1"),
        "tester",
    )


def run(main: Callable[[], Awaitable[T]], backend: str = "asyncio") -> T:
    return anyio.run(main, backend=backend)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:  # reaped between the two looks
        return False


__all__ = ["HttpServer", "Servers", "everything_http", "installed_servers", "pid_alive", "run", "tool_ctx"]
