"""Running one command line through the launcher, and killing all of it.

This module owns the process lifecycle both backends share:

- The command starts as ``python -I -S _launch.py <plan> -- bash -c <line>``
  in a **new session** (so its process group and session id are its pid),
  with stdin on ``/dev/null``, the environment the backend built, and the
  sandbox root's descriptor passed for ``fchdir``.
- stdout and stderr are read concurrently; each keeps its first
  ``output_limit`` bytes and counts the rest (the pipes are always drained,
  so a chatty command never blocks on a full pipe).
- When the command ends, times out, or the awaiting task is cancelled, the
  whole session is killed: ``SIGKILL`` to the process group, then to every
  process ``/proc`` still lists in the session (a child that moved itself to
  another group with ``setpgid``, or whose first thread exited while others
  run). A process that keeps forking can still outrun such a sweep: the OS
  sandbox, where namespaces are available, runs the command as the first
  process of its own PID namespace, and the kernel kills every process in it
  when that one dies. Only ``setsid`` leaves a session; the OS
  sandbox's seccomp filter denies it, the host backend cannot.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc

from helikon.errors import ToolError
from helikon.tools.sandbox._backend import ExecResult
from helikon.tools.sandbox._launch import FAILED, MARKER

LAUNCHER: Final = str(Path(__file__).with_name("_launch.py"))
#: How long to wait for the pipes to close once the command is dead.
DRAIN_GRACE: Final = 1.0
#: Rounds of the ``/proc`` sweep (processes may fork while we kill).
_SWEEPS: Final = 16


class _Capture:
    """The head of one output stream, and how much was left out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.dropped = 0
        self.done = anyio.Event()

    async def drain(self, stream: anyio.abc.ByteReceiveStream | None) -> None:
        try:
            if stream is not None:
                async for chunk in stream:
                    room = self.limit - len(self.head)
                    if room > 0:
                        self.head += chunk[:room]
                    self.dropped += max(0, len(chunk) - max(room, 0))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self.done.set()

    def text(self) -> str:
        return self.head.decode("utf-8", errors="replace")


def _session_members(sid: int) -> list[int]:
    """Live (not zombie) processes whose session id is ``sid``."""
    members = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if (
            len(fields) > 3
            and int(fields[3]) == sid
            and (fields[0] not in (b"Z", b"X") or _threads_live(pid))
        ):
            members.append(pid)
    return members


def _threads_live(pid: int) -> bool:
    """Whether a process whose first thread has exited (a zombie at ``/proc/<pid>``) still runs others."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def kill_session(sid: int) -> None:
    """SIGKILL the process group ``sid`` and whatever else is left in session ``sid``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    for _ in range(_SWEEPS):
        members = _session_members(sid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def scrub_env(allowlist: Sequence[str], extra: Mapping[str, str]) -> dict[str, str]:
    """This process's variables named in ``allowlist``, then ``extra`` on top."""
    env = {name: os.environ[name] for name in allowlist if name in os.environ}
    env.update(extra)
    return env


async def execute(
    argv: Sequence[str],
    *,
    root_fd: int,
    cwd: str,
    env: Mapping[str, str],
    plan: Mapping[str, Any],
    timeout: float,
    output_limit: int,
) -> ExecResult:
    """Run ``argv`` under the launcher with ``plan``; kill the session when done.

    Raises:
        ToolError: the launcher could not apply the plan (the command did not run).
    """
    payload = json.dumps({**plan, "root_fd": root_fd})
    command = [sys.executable, "-I", "-S", "-B", LAUNCHER, payload, "--", *argv]
    try:
        process = await anyio.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=(root_fd,),
        )
    except OSError as exc:
        raise ToolError(f"the command could not be started: {exc.strerror or exc}") from None
    out, err = _Capture(output_limit), _Capture(output_limit)
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(out.drain, process.stdout)
            group.start_soon(err.drain, process.stderr)
            with anyio.move_on_after(timeout) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            kill_session(process.pid)
            with anyio.move_on_after(DRAIN_GRACE):
                await out.done.wait()
                await err.done.wait()
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            kill_session(process.pid)
            await process.wait()
            await process.aclose()
    code = process.returncode
    stderr = err.text()
    if code == FAILED and stderr.startswith(MARKER):
        raise ToolError(f"the sandbox could not start the command: {stderr[len(MARKER) :].strip()}")
    killed_by = -code if code is not None and code < 0 else None
    return ExecResult(
        exit_code=None if timed_out or killed_by is not None else code,
        stdout=out.text(),
        stderr=stderr,
        signal=signal.SIGKILL if timed_out else killed_by,
        timed_out=timed_out,
        truncated_bytes=out.dropped + err.dropped,
    )


__all__ = ["LAUNCHER", "execute", "kill_session", "scrub_env"]
