"""Namespaces and an unprivileged user around a sandboxed command.

This module owns the steps of the sandbox launcher (``_launch.py``) that
confine the *process* rather than a list of calls. Like its siblings it
imports only the standard library (the launcher loads it by file path).

The launcher process ``P`` (the session leader the parent kills) does, in
order:

1. with the network proxied: forks the **relay** ``R`` first, which stays
   in the host's network namespace and dies with ``P``
   (``PR_SET_PDEATHSIG``);
2. ``unshare``: new network, IPC, mount and PID namespaces (and, when not
   root, a user namespace mapping only its own uid and gid, so that
   unprivileged users get the same namespaces);
3. brings loopback up in the new network namespace; with the network
   proxied, listens there on the proxy's own address and port and hands the
   listening socket to ``R`` (``SCM_RIGHTS``), which connects each accepted
   connection to the real proxy: the command reaches exactly the proxy's
   address and port, and nothing else exists in its network namespace;
4. forks the command's process ``I``, PID 1 of the new PID namespace, and
   waits for it: when ``I`` dies (it ends, or the parent kills the session
   at a timeout) the kernel kills every process left in the namespace, however
   it forked, re-grouped or daemonised.

``I`` then makes every mount private, mounts a fresh ``/proc`` (which lists
only the sandbox's own processes), and, when ``P`` runs as root, drops to
an unprivileged uid and gid (``setgroups([])``, ``setresgid``,
``setresuid``) after mounting the sandbox root through an idmapped mount
that shows the root's owner as that uid, so the command can write its root
but owns no file outside it (no ``chown``, ``setxattr``, ``utimensat`` or
ACL change on files it does not own). The SysV IPC namespace is empty and
private.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import socket
import struct
import threading
import time
from typing import Any, Final

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000

MS_NOSUID: Final = 2
MS_NODEV: Final = 4
MS_NOEXEC: Final = 8
MS_REC: Final = 0x4000
MS_PRIVATE: Final = 1 << 18

PR_SET_PDEATHSIG: Final = 1
PR_CAPBSET_DROP: Final = 24

# New mount API (the same numbers on every architecture).
SYS_OPEN_TREE: Final = 428
SYS_MOVE_MOUNT: Final = 429
SYS_MOUNT_SETATTR: Final = 442
OPEN_TREE_CLONE: Final = 1
AT_EMPTY_PATH: Final = 0x1000
AT_RECURSIVE: Final = 0x8000
MOVE_MOUNT_F_EMPTY_PATH: Final = 0x4
MOVE_MOUNT_T_EMPTY_PATH: Final = 0x40
MOUNT_ATTR_IDMAP: Final = 0x00100000

SIOCGIFFLAGS: Final = 0x8913
SIOCSIFFLAGS: Final = 0x8914
IFF_UP: Final = 0x1


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    result = _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), None)
    _check(result, f"mount {target}")


def parent_death_signal(sig: int, expected_parent: int) -> None:
    """Be sent ``sig`` when the parent dies; die now if it already has."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0), "PR_SET_PDEATHSIG")
    if os.getppid() != expected_parent:
        os._exit(1)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces(*, network: bool) -> None:
    """``unshare`` the IPC, mount, PID (for the next child) and optionally network namespaces.

    Not root: in a new user namespace that maps only this uid and gid.
    """
    flags = CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWNET if network else 0)
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        unshare(flags | CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    else:
        unshare(flags)
    if network:
        _loopback_up()


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


# -- the relay -------------------------------------------------------------------


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, proxy: tuple[str, int]) -> None:
    with client:
        try:
            upstream = socket.create_connection(proxy, timeout=30)
        except OSError:
            return
        with upstream:
            upstream.settimeout(None)
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def _serve_relay(channel: socket.socket, proxy: tuple[str, int]) -> None:
    _, fds, _, _ = socket.recv_fds(channel, 16, 1)
    channel.close()
    if not fds:
        os._exit(0)
    listener = socket.socket(fileno=fds[0])
    while True:
        try:
            client, _ = listener.accept()
        except (InterruptedError, ConnectionAbortedError):
            continue
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                time.sleep(0.05)  # out of descriptors or memory for now: let connections finish
                continue
            os._exit(0)  # the listener is gone: nothing left to relay
        threading.Thread(target=_carry, args=(client, proxy), daemon=True).start()


def start_relay(proxy: tuple[str, int]) -> socket.socket:
    """Fork the relay (still in this network namespace); return the channel to hand it the listener."""
    ours, theirs = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the relay: bytes between the namespace's listener and the proxy, nothing else
        try:
            ours.close()
            parent_death_signal(signal.SIGKILL, parent)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, theirs.fileno())  # the sandbox root's descriptor among them
            os.closerange(theirs.fileno() + 1, 1024)
            _serve_relay(theirs, proxy)
        finally:
            os._exit(0)
    theirs.close()
    return ours


def hand_over_listener(channel: socket.socket, proxy: tuple[str, int]) -> None:
    """Listen on the proxy's address inside the new network namespace; give the socket to the relay."""
    family = socket.AF_INET6 if ":" in proxy[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.bind(proxy)
        listener.listen(64)
        socket.send_fds(channel, [b"L"], [listener.fileno()])
    channel.close()


# -- in the namespace's first process -------------------------------------------------


def private_proc() -> None:
    """Make every mount private to this namespace, then mount a ``/proc`` of this PID namespace."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _idmap_userns(owner: tuple[int, int], to: tuple[int, int]) -> int:
    """A user namespace fd whose mapping shows ``owner`` (uid, gid) as ``to``."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(done_w)
            unshare(CLONE_NEWUSER)
            os.write(ready_w, b"1")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError("the helper could not create a user namespace")
        _write(f"/proc/{pid}/uid_map", f"{owner[0]} {to[0]} 1\n")
        _write(f"/proc/{pid}/gid_map", f"{owner[1]} {to[1]} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(pid, 0)


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _here(root_fd: int) -> int:
    """``root_fd``'s directory opened again in this mount namespace (the inherited descriptor's
    mount belongs to the parent's namespace, which ``open_tree`` refuses); checked to be the same."""
    path = os.readlink(f"/proc/self/fd/{root_fd}")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    was, now = os.fstat(root_fd), os.fstat(fd)
    if (was.st_dev, was.st_ino) != (now.st_dev, now.st_ino):
        os.close(fd)
        raise OSError(f"the sandbox root {path!r} was replaced while the sandbox started")
    return fd


def idmapped_root(inherited_fd: int, to: tuple[int, int]) -> None:
    """Mount the sandbox root over itself, its owner shown as ``to``; move into it."""
    root_fd = _here(inherited_fd)
    info = os.fstat(root_fd)
    userns = _idmap_userns((info.st_uid, info.st_gid), to)
    libc = _libc()
    try:
        tree = _check(
            libc.syscall(
                ctypes.c_long(SYS_OPEN_TREE),
                ctypes.c_int(root_fd),
                b"",
                ctypes.c_uint(OPEN_TREE_CLONE | AT_EMPTY_PATH | AT_RECURSIVE),
            ),
            "open_tree",
        )
        attr = _MountAttr(MOUNT_ATTR_IDMAP, 0, 0, userns)
        _check(
            libc.syscall(
                ctypes.c_long(SYS_MOUNT_SETATTR),
                ctypes.c_int(tree),
                b"",
                ctypes.c_uint(AT_EMPTY_PATH | AT_RECURSIVE),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
            ),
            "mount_setattr(MOUNT_ATTR_IDMAP) on the sandbox root",
        )
        _check(
            libc.syscall(
                ctypes.c_long(SYS_MOVE_MOUNT),
                ctypes.c_int(tree),
                b"",
                ctypes.c_int(root_fd),
                b"",
                ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
            ),
            "move_mount",
        )
        os.fchdir(tree)
        os.close(tree)
    finally:
        os.close(userns)
        os.close(root_fd)


def drop_bounding_set() -> None:
    """Empty the capability bounding set (no later exec can gain a capability back)."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"PR_CAPBSET_DROP({cap})")


def drop_to(uid: int, gid: int) -> None:
    """As root: no supplementary groups, then ``gid`` and ``uid`` (real, effective and saved)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError("the uid drop did not hold")


def isolate(plan: dict[str, Any], root_fd: int | None) -> None:
    """Run the steps in the module docstring; return in the command's process (``I``).

    ``plan``: ``namespaces`` (bool), ``network`` ("deny" or "proxied"),
    ``proxy`` ([host, port] or None), ``user``/``group`` (the uid and gid
    to run as when root, or None to stay root).
    """
    proxy = tuple(plan["proxy"]) if plan.get("proxy") else None
    root = os.geteuid() == 0
    if plan.get("namespaces"):
        channel = start_relay((str(proxy[0]), int(proxy[1]))) if proxy else None
        enter_namespaces(network=True)
        if channel is not None and proxy is not None:
            hand_over_listener(channel, (str(proxy[0]), int(proxy[1])))
        pid = os.fork()
        if pid != 0:
            _wait_and_mirror(pid)
        # PID 1 of the new namespace: its parent is outside it, so getppid() is 0.
        parent_death_signal(signal.SIGKILL, 0)
        private_proc()
    if root and plan.get("user") is not None:
        to = (int(plan["user"]), int(plan["group"]))
        if root_fd is not None:
            idmapped_root(root_fd, to)
        drop_bounding_set()  # needs CAP_SETPCAP, which the uid drop takes away
        drop_to(*to)
        if plan.get("namespaces"):
            parent_death_signal(signal.SIGKILL, 0)  # a credential change clears it


def _wait_and_mirror(pid: int) -> None:
    """In the launcher: wait for the command's process and end the same way it did."""
    for fd in range(3, 256):
        with contextlib.suppress(OSError):
            os.close(fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


__all__ = ["isolate"]
