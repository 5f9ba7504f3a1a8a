"""Landlock, the unprivileged Linux filesystem (and TCP port) access control.

This module owns the ctypes layer over the three Landlock system calls. It
imports only the standard library: the sandbox launcher (``_launch.py``)
loads it by file path in a bare ``python -I -S`` before it execs the
command, and the parent process imports it to probe the kernel.

Rules (``Documentation/userspace-api/landlock.rst``):

- A ruleset *handles* a set of access rights; whatever it handles is denied
  unless a rule grants it beneath some directory (or on one file). We handle
  every right the running kernel knows (its ABI version), so nothing new is
  silently left open and nothing unknown is asked for (``EINVAL``).
- ``restrict_self`` needs ``no_new_privs`` (or ``CAP_SYS_ADMIN``); the
  launcher sets it. The domain is inherited by every descendant and can only
  be narrowed further.
- ABI 4 (Linux 6.7) adds TCP ``bind``/``connect`` by port; ABI 6 (6.12) adds
  scoping of abstract UNIX sockets and signals to the domain.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Iterable, Sequence
from typing import Final

#: System call numbers (the same on x86_64 and aarch64: asm-generic numbering).
SYS_CREATE_RULESET: Final = 444
SYS_ADD_RULE: Final = 445
SYS_RESTRICT_SELF: Final = 446

CREATE_RULESET_VERSION: Final = 1 << 0
RULE_PATH_BENEATH: Final = 1
RULE_NET_PORT: Final = 2

# -- filesystem access rights, by the ABI that introduced them ---------------
EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13  # ABI 2
TRUNCATE: Final = 1 << 14  # ABI 3
IOCTL_DEV: Final = 1 << 15  # ABI 5

# -- network and scope rights ------------------------------------------------
NET_BIND_TCP: Final = 1 << 0  # ABI 4
NET_CONNECT_TCP: Final = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
SCOPE_SIGNAL: Final = 1 << 1  # ABI 6

#: Rights that may be granted on a single (non-directory) file.
FILE_RIGHTS: Final = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
#: Read-only access to a tree: list, read and execute.
READ_RIGHTS: Final = EXECUTE | READ_FILE | READ_DIR


def fs_rights(abi: int) -> int:
    """Every filesystem right a kernel with Landlock ``abi`` knows.

    >>> fs_rights(1) == (1 << 13) - 1, fs_rights(3) == (1 << 15) - 1, fs_rights(7) == (1 << 16) - 1
    (True, True, True)
    """
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class LandlockError(OSError):
    """Landlock is missing, disabled, or a call failed."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall(*args: object) -> int:
    result = int(_libc().syscall(*args))
    if result < 0:
        code = ctypes.get_errno()
        raise LandlockError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version.

    Raises:
        LandlockError: with ``ENOSYS`` when the kernel was built without
            Landlock (or a container's seccomp profile hides it), with
            ``EOPNOTSUPP`` when it is built in but not enabled at boot.
    """
    if platform.system() != "Linux":
        raise LandlockError(errno.ENOSYS, "Landlock is Linux-only")
    return _syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def describe_missing(exc: OSError) -> str:
    """What the kernel lacks, for an error from :func:`abi_version`."""
    if exc.errno == errno.EOPNOTSUPP:
        return "Landlock is built into this kernel but disabled (add 'landlock' to the lsm= boot parameter)"
    if exc.errno == errno.ENOSYS:
        return "the kernel lacks Landlock (Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK=y is needed)"
    return f"Landlock is unavailable: {exc.strerror}"


def _ruleset_size(abi: int) -> int:
    # The struct grew with the ABI; a kernel refuses non-zero bytes it does not know.
    return 24 if abi >= 6 else 16 if abi >= 4 else 8


def restrict(
    abi: int,
    paths: Sequence[tuple[str, int]],
    *,
    connect_ports: Iterable[int] | None = None,
    scope: bool = True,
) -> None:
    """Confine this process (and every child it will have) for good.

    Args:
        abi: the kernel's ABI version (:func:`abi_version`).
        paths: ``(path, rights)`` pairs; rights beyond what ``abi`` knows are
            dropped, a missing path is skipped, a file keeps only file rights.
        connect_ports: ``None`` leaves TCP alone (use seccomp); otherwise TCP
            ``bind`` is denied and ``connect`` allowed only to these ports.
            Needs ABI >= 4.
        scope: with ABI >= 6, keep abstract UNIX sockets and signals inside
            the domain.

    Raises:
        LandlockError: a call failed; the process may be partly confined and
            must not go on to run the command.
    """
    handled_fs = fs_rights(abi)
    handled_net = 0
    if connect_ports is not None:
        if abi < 4:
            raise LandlockError(errno.ENOTSUP, f"Landlock ABI {abi} has no TCP port rules (ABI 4, Linux 6.7)")
        handled_net = NET_BIND_TCP | NET_CONNECT_TCP
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scope and abi >= 6 else 0
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    ruleset = _syscall(
        ctypes.c_long(SYS_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(_ruleset_size(abi)),
        ctypes.c_uint32(0),
    )
    try:
        for path, rights in paths:
            _add_path(ruleset, path, rights & handled_fs)
        for port in connect_ports or ():
            rule = _NetPortAttr(NET_CONNECT_TCP, port)
            _syscall(
                ctypes.c_long(SYS_ADD_RULE),
                ctypes.c_int(ruleset),
                ctypes.c_int(RULE_NET_PORT),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            )
        _syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _add_path(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        if not rights:
            return
        rule = _PathBeneathAttr(rights, fd)
        _syscall(
            ctypes.c_long(SYS_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


__all__ = ["LandlockError", "abi_version", "describe_missing", "fs_rights", "restrict"]
