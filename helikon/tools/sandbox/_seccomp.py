"""A seccomp-bpf filter: no network sockets, no kernel-administration calls.

This module owns the classic-BPF program the sandbox launcher installs just
before it execs the command, and the ctypes call that installs it. Like
``_landlock.py`` it imports only the standard library (the launcher loads it
by file path).

What the filter does, in order:

1. A foreign architecture (and, on x86_64, the x32 syscall range) kills the
   process: syscall numbers mean something else there.
2. Calls that administer the kernel or reach around Landlock fail with
   ``EPERM`` (:data:`DENIED`): mounts, modules, namespaces (also ``clone``
   with a ``CLONE_NEW*`` flag), ``ptrace``, ``bpf``, io_uring (its
   operations would bypass this very filter), handle-based opens, keyrings,
   ``setsid`` (so the whole command stays in one session and can be killed
   as one); for a root command also the ``chmod`` family (Landlock does not
   cover file modes, and root owns every system file). ``clone3`` answers
   ``ENOSYS`` so the C library falls back to ``clone``, whose flags a filter
   can see.
3. ``socket()`` fails with ``EACCES`` for every family (``socketpair`` still
   works). With network allowed through the egress proxy, only TCP over IPv4
   and IPv6 is allowed: ``SOCK_STREAM`` with protocol ``0`` or
   ``IPPROTO_TCP`` (no UDP, no raw sockets, no MPTCP, which Landlock's TCP
   port rules do not cover, no SCTP; no TCP Fast Open, whose implicit
   connect a filter cannot see); Landlock then limits ``connect`` to the
   proxy's port, and the network namespace (``_isolate.py``) holds nothing
   but a relay to the proxy. ``listen()`` fails (:data:`NO_SERVER`): a
   command never serves a port, not even the one ``listen`` binds by itself.
4. No SysV IPC or POSIX message queues (:data:`NO_IPC`), no extended
   attribute changes and no ``chown`` (:data:`NO_METADATA`): Landlock does
   not govern file metadata, so an ACL written through ``setxattr`` could
   otherwise widen a file's mode, and a no-op ``chown`` clears set-user-ID
   bits.
5. ``ioctl(TIOCSTI)`` and ``TIOCLINUX`` (typing into a terminal) fail.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Final

#: The audit architecture numbers, and which one runs here.
AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: Syscalls (by name) that fail with ``EPERM``.
DENIED: Final = (
    "acct",
    "add_key",
    "adjtimex",
    "bpf",
    "chroot",
    "clock_adjtime",
    "clock_settime",
    "delete_module",
    "fanotify_init",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pidfd_getfd",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "setdomainname",
    "sethostname",
    "setns",
    "setsid",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "vhangup",
)

#: SysV IPC and POSIX message queues: a command shares nothing with processes outside.
NO_IPC: Final = (
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
)
#: File metadata Landlock does not govern: extended attributes (ACLs among them) and ownership.
NO_METADATA: Final = (
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
)
#: Serving a port.
NO_SERVER: Final = ("listen",)

#: Syscall numbers per architecture (x86_64 from ``asm/unistd_64.h``,
#: aarch64 from ``asm-generic/unistd.h``) as "name number" pairs; a name
#: missing on one architecture is skipped there.
_X86_64: Final = """
    chmod 90 fchmod 91 fchmodat 268 fchmodat2 452
    acct 163 add_key 248 adjtimex 159 bpf 321 chroot 161 clock_adjtime 305 clock_settime 227
    clone 56 clone3 435 delete_module 176 fanotify_init 300 finit_module 313 fsconfig 431
    fsmount 432 fsopen 430 fspick 433 init_module 175 io_uring_enter 426 io_uring_register 427
    io_uring_setup 425 ioctl 16 ioperm 173 iopl 172 kcmp 312 kexec_file_load 320 kexec_load 246
    keyctl 250 lookup_dcookie 212 mount 165 mount_setattr 442 move_mount 429 name_to_handle_at 303
    open_by_handle_at 304 open_tree 428 perf_event_open 298 pidfd_getfd 438 pivot_root 155
    process_vm_readv 310 process_vm_writev 311 ptrace 101 quotactl 179 quotactl_fd 443 reboot 169
    request_key 249 sendmmsg 307 sendmsg 46 sendto 44 setdomainname 171 sethostname 170 setns 308
    setsid 112 settimeofday 164 socket 41 swapoff 168 swapon 167 syslog 103 truncate 76 umount2 166
    unshare 272 uselib 134 userfaultfd 323 vhangup 153
    listen 50 shmget 29 shmat 30 shmctl 31 shmdt 67 semget 64 semop 65 semctl 66 msgget 68 msgsnd 69
    msgrcv 70 msgctl 71 semtimedop 220 mq_open 240 mq_unlink 241 mq_timedsend 242 mq_timedreceive 243
    mq_notify 244 mq_getsetattr 245 setxattr 188 lsetxattr 189 fsetxattr 190 removexattr 197
    lremovexattr 198 fremovexattr 199 setxattrat 463 removexattrat 466 chown 92 fchown 93 lchown 94
    fchownat 260
"""
_AARCH64: Final = """
    fchmod 52 fchmodat 53 fchmodat2 452
    acct 89 add_key 217 adjtimex 171 bpf 280 chroot 51 clock_adjtime 266 clock_settime 112 clone 220
    clone3 435 delete_module 106 fanotify_init 262 finit_module 273 fsconfig 431 fsmount 432
    fsopen 430 fspick 433 init_module 105 io_uring_enter 426 io_uring_register 427
    io_uring_setup 425 ioctl 29 kcmp 272 kexec_file_load 294 kexec_load 104 keyctl 219
    lookup_dcookie 18 mount 40 mount_setattr 442 move_mount 429 name_to_handle_at 264
    open_by_handle_at 265 open_tree 428 perf_event_open 241 pidfd_getfd 438 pivot_root 41
    process_vm_readv 270 process_vm_writev 271 ptrace 117 quotactl 60 quotactl_fd 443 reboot 142
    request_key 218 sendmmsg 269 sendmsg 211 sendto 206 setdomainname 162 sethostname 161 setns 268
    setsid 157 settimeofday 170 socket 198 swapoff 225 swapon 224 syslog 116 truncate 45 umount2 39
    unshare 97 userfaultfd 282 vhangup 58
    listen 201 shmget 194 shmat 196 shmctl 195 shmdt 197 semget 190 semop 193 semctl 191 msgget 186
    msgsnd 189 msgrcv 188 msgctl 187 semtimedop 192 mq_open 180 mq_unlink 181 mq_timedsend 182
    mq_timedreceive 183 mq_notify 184 mq_getsetattr 185 setxattr 5 lsetxattr 6 fsetxattr 7
    removexattr 14 lremovexattr 15 fremovexattr 16 setxattrat 463 removexattrat 466 fchown 55
    fchownat 54
"""


def _table(text: str) -> dict[str, int]:
    words = text.split()
    return {name: int(number) for name, number in zip(words[::2], words[1::2], strict=True)}


SYSCALLS: Final[dict[str, dict[str, int]]] = {"x86_64": _table(_X86_64), "aarch64": _table(_AARCH64)}

AF_INET: Final = 2
AF_INET6: Final = 10
SOCK_STREAM: Final = 1
SOCK_TYPE_MASK: Final = 0xF
IPPROTO_TCP: Final = 6
MSG_FASTOPEN: Final = 0x20000000
TIOCSTI: Final = 0x5412
TIOCLINUX: Final = 0x541C
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (``clone``'s low byte is
#: the exit signal, so CLONE_NEWTIME, 0x80, only exists for ``clone3`` and ``unshare``).
CLONE_NAMESPACES: Final = 0x7E020000
X32_SYSCALL_BIT: Final = 0x40000000

RET_KILL_PROCESS: Final = 0x80000000
RET_ERRNO: Final = 0x00050000
RET_ALLOW: Final = 0x7FFF0000

# Classic BPF opcodes.
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_JSET_K: Final = 0x45
_AND_K: Final = 0x54
_RET_K: Final = 0x06

# Offsets into struct seccomp_data (little-endian: the low word of an argument comes first).
_NR: Final = 0
_ARCH: Final = 4


def _arg(index: int) -> int:
    return 16 + 8 * index


#: One instruction before assembly: (opcode, k, jump-if-true label, jump-if-false label).
_Insn = tuple[int, int, str | None, str | None]


class _Program:
    """A tiny assembler: instructions with label jumps, resolved to BPF offsets."""

    def __init__(self) -> None:
        self.insns: list[_Insn] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.insns)

    def load(self, offset: int) -> None:
        self.insns.append((_LD_W_ABS, offset, None, None))

    def jump(self, op: int, k: int, if_true: str | None, if_false: str | None = None) -> None:
        self.insns.append((op, k, if_true, if_false))

    def ret(self, value: int) -> None:
        self.insns.append((_RET_K, value, None, None))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (op, k, if_true, if_false) in enumerate(self.insns):
            jt = self._offset(index, if_true)
            jf = self._offset(index, if_false)
            out += struct.pack("=HBBI", op, jt, jf, k & 0xFFFFFFFF)
        return bytes(out)

    def _offset(self, index: int, label: str | None) -> int:
        if label is None:
            return 0
        offset = self.labels[label] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"BPF jump to {label!r} out of range ({offset})")
        return offset


#: Mode changes, denied when the command runs as root (see :func:`build_filter`).
CHMOD: Final = ("chmod", "fchmod", "fchmodat", "fchmodat2")


def build_filter(
    arch: str, *, network: str = "deny", deny_truncate: bool = False, deny_chmod: bool = False
) -> bytes:
    """The filter program for ``arch``, as packed ``struct sock_filter`` entries.

    Args:
        arch: ``"x86_64"`` or ``"aarch64"``.
        network: ``"deny"`` (no ``socket()`` at all) or ``"proxied"`` (TCP
            over IPv4/IPv6 only; Landlock restricts the ports).
        deny_truncate: also deny ``truncate(2)`` by path (for Landlock ABI < 3,
            which cannot confine it).
        deny_chmod: also deny the ``chmod`` family. Landlock does not govern
            file modes, and root owns every system file: a root command could
            otherwise ``chmod u+s`` a system binary it can merely read.

    >>> len(build_filter("x86_64")) % 8, len(build_filter("aarch64", network="proxied")) % 8
    (0, 0)
    """
    numbers = SYSCALLS[arch]
    p = _Program()
    p.load(_ARCH)
    p.jump(_JEQ_K, AUDIT_ARCH[arch], "arch_ok", "kill")
    p.label("arch_ok")
    p.load(_NR)
    if arch == "x86_64":
        p.jump(_JGE_K, X32_SYSCALL_BIT, "kill", None)
    denied: list[str] = [name for name in (*DENIED, *NO_IPC, *NO_METADATA, *NO_SERVER) if name in numbers]
    if deny_truncate:
        denied.append("truncate")
    if deny_chmod:
        denied += [name for name in CHMOD if name in numbers]
    for name in denied:
        p.jump(_JEQ_K, numbers[name], "eperm", None)
    p.jump(_JEQ_K, numbers["clone3"], "enosys", None)
    p.jump(_JEQ_K, numbers["socket"], "socket", None)
    p.jump(_JEQ_K, numbers["clone"], "clone", None)
    p.jump(_JEQ_K, numbers["ioctl"], "ioctl", None)
    if network == "proxied":
        p.jump(_JEQ_K, numbers["sendto"], "send_flags3", None)
        p.jump(_JEQ_K, numbers["sendmmsg"], "send_flags3", None)
        p.jump(_JEQ_K, numbers["sendmsg"], "send_flags2", None)
    p.ret(RET_ALLOW)

    p.label("socket")
    if network == "proxied":
        p.load(_arg(0))
        p.jump(_JEQ_K, AF_INET, "socket_type", None)
        p.jump(_JEQ_K, AF_INET6, "socket_type", "eacces")
        p.label("socket_type")
        p.load(_arg(1))
        p.insns.append((_AND_K, SOCK_TYPE_MASK, None, None))
        p.jump(_JEQ_K, SOCK_STREAM, "socket_protocol", "eacces")
        p.label("socket_protocol")
        p.load(_arg(2))
        p.jump(_JEQ_K, 0, "allow", None)
        p.jump(_JEQ_K, IPPROTO_TCP, "allow", "eacces")
        p.label("send_flags3")
        p.load(_arg(3))
        p.jump(_JSET_K, MSG_FASTOPEN, "eperm", "allow")
        p.label("send_flags2")
        p.load(_arg(2))
        p.jump(_JSET_K, MSG_FASTOPEN, "eperm", "allow")
    else:
        p.ret(RET_ERRNO | errno.EACCES)

    p.label("clone")
    p.load(_arg(0))
    p.jump(_JSET_K, CLONE_NAMESPACES, "eperm", "allow")
    p.label("ioctl")
    p.load(_arg(1))
    p.jump(_JEQ_K, TIOCSTI, "eperm", None)
    p.jump(_JEQ_K, TIOCLINUX, "eperm", "allow")

    p.label("allow")
    p.ret(RET_ALLOW)
    p.label("eacces")
    p.ret(RET_ERRNO | errno.EACCES)
    p.label("eperm")
    p.ret(RET_ERRNO | errno.EPERM)
    p.label("enosys")
    p.ret(RET_ERRNO | errno.ENOSYS)
    p.label("kill")
    p.ret(RET_KILL_PROCESS)
    return p.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


PR_SET_NO_NEW_PRIVS: Final = 38
PR_GET_SECCOMP: Final = 21
PR_SET_SECCOMP: Final = 22
SECCOMP_MODE_FILTER: Final = 2


def _prctl(*args: int | ctypes.c_void_p) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.prctl(*args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def machine() -> str | None:
    """This machine's architecture if the filter supports it, else ``None``."""
    arch = platform.machine()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    return arch if arch in AUDIT_ARCH else None


def available() -> bool:
    """Whether this kernel supports seccomp filters (``PR_GET_SECCOMP`` works)."""
    try:
        _prctl(PR_GET_SECCOMP, 0, 0, 0, 0)
    except OSError:
        return False
    return True


def no_new_privs() -> None:
    """Set ``no_new_privs``: no exec may grant privileges again (setuid, file caps)."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def install(program: bytes) -> None:
    """Set ``no_new_privs`` and install ``program`` on this thread, for good.

    Raises:
        OSError: the kernel refused; the process must not run the command.
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    no_new_privs()
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.cast(ctypes.pointer(prog), ctypes.c_void_p), 0, 0)


__all__ = [
    "DENIED",
    "NO_IPC",
    "NO_METADATA",
    "NO_SERVER",
    "SYSCALLS",
    "available",
    "build_filter",
    "install",
    "machine",
    "no_new_privs",
]
