"""HostBackend with real processes: pinned cwd, scrubbed env, caps, and killing the whole tree."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from process_support import alive, running_with, unique_seconds, wait_for_file, written

from helikon.errors import ToolError
from helikon.tools import ExecResult, HostBackend, Isolation, ResourceLimits, Sandbox

pytestmark = pytest.mark.integration


def run(backend: HostBackend, command: str, timeout: float | None = None) -> ExecResult:
    return anyio.run(lambda: backend.run(command, timeout=timeout))


def test_it_promises_nothing(tmp_path: Path) -> None:
    g = HostBackend(Sandbox.open(tmp_path)).guarantees()
    assert (g.filesystem, g.network, g.syscalls) == (Isolation.NONE,) * 3
    assert g.label == "host (no containment)"


def test_the_command_starts_in_the_root_with_a_scrubbed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    backend = HostBackend(Sandbox.open(tmp_path), env={"PROJECT_MODE": "test"})
    result = run(backend, "pwd; env")
    lines = result.stdout.splitlines()
    assert result.ok and lines[0] == str(tmp_path.resolve())
    assert "sk-do-not-leak" not in result.stdout
    assert "LANG=C.UTF-8" in lines and "PROJECT_MODE=test" in lines
    assert any(line.startswith("PATH=") for line in lines)


def test_exit_codes_and_stderr_come_back(tmp_path: Path) -> None:
    result = run(HostBackend(Sandbox.open(tmp_path)), "echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr, result.signal) == (7, "out\n", "err\n", None)


def test_output_is_capped_and_the_pipe_still_drained(tmp_path: Path) -> None:
    backend = HostBackend(Sandbox.open(tmp_path), output_limit=1000)
    result = run(backend, "head -c 300000 /dev/zero | tr '\\0' x; echo done >&2")
    assert result.ok and result.stdout == "x" * 1000 and result.stderr == "done\n"
    assert result.truncated_bytes == 299_000


def test_timeout_kills_the_command_and_its_grandchildren(tmp_path: Path) -> None:
    backend = HostBackend(Sandbox.open(tmp_path), timeout=1.0)
    started = time.monotonic()
    result = run(
        backend,
        "sleep 300 & echo $! > bg.pid; "
        'python3 -c \'import os, time; os.setpgid(0, 0); open("pg.pid", "w").write(str(os.getpid())); '
        "time.sleep(300)' & sleep 300",
    )
    assert result.timed_out and result.exit_code is None and result.signal == signal.SIGKILL
    assert time.monotonic() - started < 10
    background = int(wait_for_file(tmp_path / "bg.pid"))
    regrouped = int(wait_for_file(tmp_path / "pg.pid"))
    assert not alive(background), "the background sleep survived the timeout"
    assert not alive(regrouped), "a grandchild in its own process group survived the timeout"


def test_a_finished_command_leaves_nothing_running(tmp_path: Path) -> None:
    result = run(HostBackend(Sandbox.open(tmp_path)), "sleep 300 & echo $! > bg.pid; echo started")
    assert result.ok and result.stdout == "started\n"
    assert not alive(int(wait_for_file(tmp_path / "bg.pid")))


@pytest.mark.parametrize("library", ["trio", "asyncio"])
def test_cancellation_kills_the_command_and_its_grandchildren(tmp_path: Path, library: str) -> None:
    backend = HostBackend(Sandbox.open(tmp_path), timeout=60)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(backend.run, "sleep 300 & echo $! > bg.pid; wait")
            with anyio.fail_after(10):
                while not written(tmp_path / "bg.pid"):  # the pid, not just the redirect's empty file
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()

    started = time.monotonic()
    anyio.run(main, backend=library)
    assert time.monotonic() - started < 10
    assert not alive(int(wait_for_file(tmp_path / "bg.pid"))), "the background sleep survived cancellation"


def test_setrlimit_caps_are_applied(tmp_path: Path) -> None:
    limits = ResourceLimits(
        cpu_seconds=7, file_size_bytes=64 * 1024, address_space_bytes=2 << 30, processes=512
    )
    result = run(
        HostBackend(Sandbox.open(tmp_path), limits=limits), "ulimit -t; ulimit -f; ulimit -v; ulimit -u"
    )
    assert result.stdout.split() == ["7", "64", str(2 << 20), "512"]  # seconds, KiB blocks, KiB, processes


def test_the_file_size_cap_stops_a_runaway_write(tmp_path: Path) -> None:
    limits = ResourceLimits(file_size_bytes=10_000)
    result = run(HostBackend(Sandbox.open(tmp_path), limits=limits), "head -c 1000000 /dev/zero > big")
    assert result.signal == signal.SIGXFSZ or result.exit_code == 128 + signal.SIGXFSZ  # bash reports it
    assert (tmp_path / "big").stat().st_size == 10_000


def test_the_cpu_cap_stops_a_busy_loop(tmp_path: Path) -> None:
    limits = ResourceLimits(cpu_seconds=1)
    started = time.monotonic()
    result = run(
        HostBackend(Sandbox.open(tmp_path), limits=limits, timeout=30), "python3 -c 'while True: pass'"
    )
    assert result.signal in (signal.SIGXCPU, signal.SIGKILL)
    assert time.monotonic() - started < 10


def test_the_address_space_cap_fails_big_allocations(tmp_path: Path) -> None:
    limits = ResourceLimits(address_space_bytes=512 << 20)
    command = "python3 -c 'bytearray(1 << 30)'"
    result = run(HostBackend(Sandbox.open(tmp_path), limits=limits), command)
    assert result.exit_code == 1 and "MemoryError" in result.stderr


def test_a_command_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    backend = HostBackend(Sandbox.open(tmp_path), shell=("/nonexistent/shell", "-c"))
    with pytest.raises(ToolError, match="could not start the command: cannot run '/nonexistent/shell'"):
        run(backend, "true")


def test_the_kill_reaches_a_process_whose_first_thread_exited(tmp_path: Path) -> None:
    """/proc/<pid> shows such a process as a zombie while its other thread runs (issue 30)."""
    token = unique_seconds()
    code = (
        "import os, threading, time, ctypes; os.setpgid(0, 0); "
        "threading.Thread(target=time.sleep, args=(30,)).start(); ctypes.CDLL(None).pthread_exit(None)"
    )
    try:
        result = run(
            HostBackend(Sandbox.open(tmp_path), timeout=1.0), f'python3 -c "{code}" {token} & sleep 300'
        )
        assert result.timed_out
        time.sleep(0.3)
        assert running_with(token) == [], "a leader-less process survived the timeout"
    finally:
        for pid in running_with(token):
            os.kill(pid, signal.SIGKILL)
