"""OsSandboxBackend with real programs: nothing outside the root, no network, no escape from the kill.

Each test builds the backend through ``confined()``: on a kernel that cannot
host it (no Landlock, no seccomp), the test instead asserts that building it
fails closed with ``OsSandboxError`` naming what is missing, and says so in a
warning.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from process_support import confined, running_with, tcp_listener, unique_seconds, wait_for_file, written

from helikon.errors import ToolError
from helikon.tools import (
    BashTool,
    EgressPolicy,
    EgressProxy,
    ExecResult,
    Isolation,
    OsSandboxBackend,
    OsSandboxError,
    Sandbox,
)
from helikon.tools.sandbox import DEFAULT_READ_PATHS, _landlock, _seccomp

pytestmark = pytest.mark.integration

SECRET = "TOP SECRET: outside the sandbox"


def run(backend: OsSandboxBackend, command: str, timeout: float | None = None) -> ExecResult:
    return anyio.run(lambda: backend.run(command, timeout=timeout))


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    return root, outside


def test_it_promises_kernel_enforcement_on_every_axis(dirs: tuple[Path, Path]) -> None:
    backend = confined(Sandbox.open(dirs[0]))
    if backend is None:
        return
    g = backend.guarantees()
    assert (g.filesystem, g.network, g.syscalls) == (Isolation.OS_KERNEL,) * 3
    assert g.label == "os-sandbox (landlock+seccomp)"
    description = BashTool(backend).description
    assert "confined by the OS kernel" in description and "no network access" in description


def test_cat_cannot_read_outside_the_root(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    backend = confined(Sandbox.open(root))
    if backend is None:
        return
    for command in (
        f"cat {outside}/secret.txt",
        f"cat /proc/self/root{outside}/secret.txt",
        "cat ../outside/secret.txt",
        f"cp {outside}/secret.txt copied.txt",
        f"ls {outside}",
        "cat /etc/shadow",
    ):
        result = run(backend, command)
        assert not result.ok, command
        assert "TOP SECRET" not in result.stdout + result.stderr, command
        assert "Permission denied" in result.stderr, command
    assert not (root / "copied.txt").exists()


def test_touch_cannot_write_outside_the_root(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    backend = confined(Sandbox.open(root))
    if backend is None:
        return
    for command in (
        f"touch {outside}/new.txt",
        f"echo pwned >> {outside}/secret.txt",
        f"echo pwned > {outside}/secret.txt",
        f"truncate -s 0 {outside}/secret.txt",
        f"mkdir {outside}/dir",
        f"rm {outside}/secret.txt",
        f"mv {outside}/secret.txt moved.txt",
        f"ln {outside}/secret.txt hard.txt",
        f"ln -s {outside}/secret.txt link.txt && cat link.txt",
        "touch /tmp/helikon-escape-test",
    ):
        result = run(backend, command)
        assert not result.ok, command
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not Path("/tmp/helikon-escape-test").exists()
    assert not (root / "hard.txt").exists() and not (root / "moved.txt").exists()


def test_python_cannot_reach_a_loopback_server(dirs: tuple[Path, Path]) -> None:
    backend = confined(Sandbox.open(dirs[0]))
    if backend is None:
        return
    with tcp_listener() as (port, seen):
        for command in (
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\"",
            f"python3 -c \"import socket; socket.socket(socket.AF_INET6).connect(('::1', {port}))\"",
            'python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"',
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('\\0anything')\"",
            f"echo hi > /dev/tcp/127.0.0.1/{port}",
        ):
            result = run(backend, command)
            assert not result.ok and "ermission denied" in result.stderr, command
        time.sleep(0.2)
        assert seen == [], "a sandboxed command reached the loopback server"


def test_work_inside_the_root_and_the_private_temp_dir_is_normal(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    backend = confined(Sandbox.open(root))
    if backend is None:
        return
    result = run(
        backend,
        "mkdir -p pkg && echo 'print(6 * 7)' > pkg/main.py && python3 pkg/main.py && "
        'echo scratch > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "$HOME" > home.txt && '
        "head -c 4 /dev/urandom | wc -c && ls /usr/bin/env >/dev/null",
    )
    assert result.ok, result.stderr
    assert result.stdout.split()[:3] == ["42", "scratch", "4"]
    home = (root / "home.txt").read_text().strip()
    assert home.startswith("/") and not Path(home).exists(), "the private temp dir is removed after the run"


def test_privileges_are_gone(dirs: tuple[Path, Path]) -> None:
    backend = confined(Sandbox.open(dirs[0]))
    if backend is None:
        return
    result = run(backend, "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
    fields = dict(line.split(":\t") for line in result.stdout.splitlines())
    assert fields == {"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0" * 16, "CapBnd": "0" * 16}
    for command in ("setsid -w true", "unshare -U true", "python3 -c 'import os; os.setsid()'"):
        assert not run(backend, command).ok, command


def test_a_root_command_cannot_change_file_modes(dirs: tuple[Path, Path]) -> None:
    """Landlock does not cover modes, and root owns the system files: the chmod family is denied to root."""
    root, outside = dirs
    if os.geteuid() != 0:
        pytest.skip(
            "not root: a command may change the modes of its own user's files (documented limitation)"
        )
    readable = outside / "readable.txt"
    readable.write_text("x")
    readable.chmod(0o644)
    backend = confined(Sandbox.open(root), read_paths=(*DEFAULT_READ_PATHS, str(readable)))
    if backend is None:
        return
    for command in (
        f"chmod 600 {readable}",
        f"python3 -c \"import os; os.fchmod(os.open('{readable}', os.O_RDONLY), 0o4755)\"",
        "touch mine.sh && chmod +x mine.sh",
    ):
        result = run(backend, command)
        assert not result.ok and "not permitted" in result.stderr, command
    assert readable.stat().st_mode & 0o7777 == 0o644


def test_timeout_kills_grandchildren_that_tried_to_leave(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    backend = confined(Sandbox.open(root), timeout=1.0)
    if backend is None:
        return
    token = unique_seconds()
    result = run(
        backend,
        f"sleep {token} & echo $! > bg.pid; (setsid sleep {token} || sleep {token}) & echo $! > sid.pid; "
        'python3 -c \'import os, time; os.setpgid(0, 0); open("pg.pid", "w").write(str(os.getpid())); '
        f"time.sleep(300)' {token} & sleep {token}",
    )
    assert result.timed_out and result.signal == signal.SIGKILL
    for name in ("bg.pid", "sid.pid", "pg.pid"):
        wait_for_file(root / name)
    assert running_with(token) == [], "a process survived the timeout"


def test_cancellation_kills_grandchildren(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    backend = confined(Sandbox.open(root), timeout=60)
    if backend is None:
        return

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(backend.run, f"sleep {token} & echo $! > bg.pid; wait")
            with anyio.fail_after(10):
                while not written(root / "bg.pid"):  # the pid, not just the redirect's empty file
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()

    token = unique_seconds()
    anyio.run(main, backend="trio")
    assert running_with(token) == []


def test_the_network_through_a_stopped_proxy_fails_closed(dirs: tuple[Path, Path]) -> None:
    backend = confined(Sandbox.open(dirs[0]))
    if backend is None:
        return
    stopped = EgressProxy(EgressPolicy.allow_all())
    with pytest.raises(OsSandboxError, match="not running"):
        backend.allow_network(True, proxy=stopped)
    proxy = EgressProxy(EgressPolicy.allow_all()).start()
    networked = backend.allow_network(True, proxy=proxy)
    assert networked.guarantees().network is Isolation.PROXIED
    proxy.close()
    with pytest.raises(ToolError, match="egress proxy is not running"):
        run(networked, "true")
    assert backend.allow_network(False).guarantees().network is Isolation.OS_KERNEL


def test_a_proxy_that_cannot_start_fails_closed(dirs: tuple[Path, Path]) -> None:
    backend = confined(Sandbox.open(dirs[0]))
    if backend is None:
        return
    with tcp_listener() as (port, _):
        busy = EgressProxy(EgressPolicy.allow_all(), port=port)
        with pytest.raises(OSError):
            busy.start()
        with pytest.raises(OsSandboxError, match="not running"):
            backend.allow_network(True, proxy=busy)
    with backend.allow_network(True, policy=EgressPolicy.deny_all()) as owned:
        assert owned.proxy is not None and owned.proxy.running
    assert not owned.proxy.running, "closing the backend stops the proxy it started"


def test_landlock_errors_name_what_the_kernel_lacks() -> None:
    assert "lacks Landlock" in _landlock.describe_missing(OSError(38, "Function not implemented"))
    assert "lsm=" in _landlock.describe_missing(OSError(95, "Operation not supported"))


def test_read_paths_can_be_widened(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    narrow = confined(Sandbox.open(root))
    if narrow is None:
        return
    assert not run(narrow, "cat /etc/hostname").ok, "/etc/hostname is not among the default read paths"
    wide = OsSandboxBackend(narrow.sandbox, read_paths=(*narrow.read_paths, "/etc/hostname"))
    assert run(wide, "cat /etc/hostname >/dev/null && echo ok").stdout == "ok\n"


HIDE_LANDLOCK = """
import errno, struct, sys
from helikon.tools.sandbox import _seccomp
from helikon.tools.sandbox._seccomp import _JEQ_K, RET_ALLOW, RET_ERRNO, _Program
p = _Program()
p.load(0)
for nr in (444, 445, 446):  # landlock_create_ruleset, _add_rule, _restrict_self
    p.jump(_JEQ_K, nr, "enosys")
p.ret(RET_ALLOW)
p.label("enosys")
p.ret(RET_ERRNO | errno.ENOSYS)
_seccomp.install(p.assemble())
from helikon.tools import OsSandboxBackend, OsSandboxError, Sandbox
try:
    OsSandboxBackend(Sandbox.open(sys.argv[1]))
except OsSandboxError as exc:
    print("fail-closed:", exc)
else:
    print("built an unconfined backend")
"""


def test_a_kernel_without_landlock_fails_closed(tmp_path: Path) -> None:
    """Hide Landlock from a child (as container seccomp profiles do): building the backend must fail."""
    if sys.platform != "linux" or _seccomp.machine() is None:
        pytest.skip("needs Linux on x86_64 or aarch64 to install the hiding filter")
    ran = subprocess.run(
        [sys.executable, "-c", HIDE_LANDLOCK, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("fail-closed: the kernel lacks Landlock"), ran.stdout
