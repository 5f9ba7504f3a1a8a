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
only the sandbox's own processes), makes every mount read-only but the
sandbox root, the private temporary directory and the write paths, which
it mounts back writable on top (:func:`read_only_outside`: outside them no
time, mode, xattr, size or name changes, whoever owns the file), and, when
``P`` runs as root, drops to an unprivileged uid and gid
(``setgroups([])``, ``setresgid``, ``setresuid``); the root and the write
paths are then idmapped mounts that show their owners as that uid, so the
command can write them but owns no file outside them. The SysV IPC
namespace is empty and private.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import socket
import stat
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
MOUNT_ATTR_RDONLY: Final = 0x00000001
MOUNT_ATTR_IDMAP: Final = 0x00100000
AT_FDCWD: Final = -100

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


def _mount_syscall(number: int, *args: Any, what: str) -> int:
    return _check(_libc().syscall(ctypes.c_long(number), *args), what)


def _clone_tree(fd: int) -> int:
    """A detached recursive copy of the mount tree at ``fd`` (``open_tree(OPEN_TREE_CLONE)``)."""
    flags = ctypes.c_uint(OPEN_TREE_CLONE | AT_EMPTY_PATH | AT_RECURSIVE)
    return _mount_syscall(SYS_OPEN_TREE, ctypes.c_int(fd), b"", flags, what="open_tree")


def _set_attr(fd: int, path: bytes, attr: _MountAttr, what: str) -> None:
    flags = ctypes.c_uint((AT_EMPTY_PATH if not path else 0) | AT_RECURSIVE)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    _mount_syscall(SYS_MOUNT_SETATTR, ctypes.c_int(fd), path, flags, ctypes.byref(attr), size, what=what)


def _idmap(tree: int, source: int, to: tuple[int, int], what: str) -> None:
    """Show ``source``'s owner (uid and gid) as ``to`` throughout the detached ``tree``."""
    info = os.fstat(source)
    userns = _idmap_userns((info.st_uid, info.st_gid), to)
    try:
        _set_attr(
            tree,
            b"",
            _MountAttr(MOUNT_ATTR_IDMAP, 0, 0, userns),
            f"mount_setattr(MOUNT_ATTR_IDMAP) on {what}",
        )
    finally:
        os.close(userns)


def _attach(tree: int, target: int) -> None:
    flags = ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
    _mount_syscall(
        SYS_MOVE_MOUNT, ctypes.c_int(tree), b"", ctypes.c_int(target), b"", flags, what="move_mount"
    )


def idmapped_root(inherited_fd: int, to: tuple[int, int]) -> None:
    """Mount the sandbox root over itself, its owner shown as ``to``; move into it."""
    root_fd = _here(inherited_fd)
    try:
        tree = _clone_tree(root_fd)
        try:
            _idmap(tree, root_fd, to, "the sandbox root")
            _attach(tree, root_fd)
            os.fchdir(tree)
        finally:
            os.close(tree)
    finally:
        os.close(root_fd)


def _open_path(path: str) -> int:
    return os.open(path, os.O_PATH | os.O_CLOEXEC)


def read_only_outside(
    inherited_fd: int | None, writable: list[tuple[str, bool]], to: tuple[int, int] | None
) -> None:
    """Make every mount read-only except the sandbox root and the ``writable`` paths; move into the root.

    Each kept path is first copied as a detached mount tree (idmapped to
    show its owner as ``to`` for the root, and for a path whose flag is
    true); then every mount of this namespace is made read-only
    (``mount_setattr(MOUNT_ATTR_RDONLY, AT_RECURSIVE)`` on ``/``), and the
    copies are mounted back over their paths, outermost first. Outside
    them no file's times, mode, xattrs, size or names can change
    (``EROFS``), whoever owns it. A write path on a filesystem that refuses
    idmapped mounts is kept writable without the idmap. Missing paths,
    device files (writable on a read-only mount) and paths beneath the root
    (already writable) are skipped.
    """
    kept: list[tuple[str, int, int]] = []  # (path, tree, the source's descriptor)
    root_fd = None if inherited_fd is None else _here(inherited_fd)
    try:
        root_path = None if root_fd is None else os.readlink(f"/proc/self/fd/{root_fd}")
        if root_fd is not None and root_path is not None:
            tree = _clone_tree(root_fd)
            kept.append((root_path, tree, root_fd))
            if to is not None:
                _idmap(tree, root_fd, to, "the sandbox root")
        for path, mapped in writable:
            real = os.path.realpath(path)
            if root_path is not None and (real + "/").startswith(root_path.rstrip("/") + "/"):
                continue
            try:
                source = _open_path(real)
            except FileNotFoundError:
                continue
            mode = os.fstat(source).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                os.close(source)
                continue
            tree = _clone_tree(source)
            kept.append((real, tree, source))
            if mapped and to is not None:
                with contextlib.suppress(OSError):  # no idmapped mounts on its filesystem: stays plain
                    _idmap(tree, source, to, real)
        _set_attr(
            AT_FDCWD, b"/", _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0), "mount_setattr(MOUNT_ATTR_RDONLY) on /"
        )
        for path, tree, source in sorted(kept, key=lambda item: item[0].count("/")):
            target = _open_path(path)
            try:
                was, now = os.fstat(source), os.fstat(target)
                if (was.st_dev, was.st_ino) != (now.st_dev, now.st_ino):
                    raise OSError(f"{path!r} was replaced while the sandbox started")
                _attach(tree, target)
            finally:
                os.close(target)
            if source == root_fd:
                os.fchdir(tree)
    finally:
        for _, tree, source in kept:
            os.close(tree)
            if source != root_fd:
                os.close(source)
        if root_fd is not None:
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
    to run as when root, or None to stay root), ``read_only_outside``
    (bool: every mount read-only but the root and ``writable``, a list of
    ``[path, idmapped]``).
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
    to = (int(plan["user"]), int(plan["group"])) if root and plan.get("user") is not None else None
    if plan.get("namespaces") and plan.get("read_only_outside"):
        writable = [(str(path), bool(mapped)) for path, mapped in plan.get("writable", [])]
        read_only_outside(root_fd, writable, to)
    elif to is not None and root_fd is not None:
        idmapped_root(root_fd, to)
    if to is not None:
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
