"""Opening a path beneath a directory descriptor without ever leaving it.

This module owns the two ways a sandbox path becomes a file descriptor:

- **openat2** with ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`` (Linux 5.6+):
  the kernel resolves the whole path relative to the root descriptor and
  fails with ``EXDEV`` the moment any step (``..``, an absolute or relative
  symlink) would leave it, and refuses ``/proc`` magic links. It is atomic
  with respect to concurrent renames and symlink swaps (``EAGAIN`` when a
  rename raced a ``..``; we retry).
- **the walk**, everywhere else: one ``openat`` per component with
  ``O_NOFOLLOW``, from descriptors we hold. ``..`` pops our own stack of
  descriptors (never the kernel's ``..``), a symlink is read with
  ``readlinkat`` and spliced into the remaining components (an absolute
  target is an escape, as under ``RESOLVE_BENEATH``), at most
  :data:`MAX_LINKS` of them. A symlink swapped in between our check and our
  open makes the ``O_NOFOLLOW`` open fail, and we look again; nothing is
  ever followed by the kernel.

Both raise :class:`Escape` for a refusal and ``OSError`` for everything else
(``ENOENT``, ``EISDIR``, ...).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections import deque
from typing import Any, Final

#: Symlinks followed while resolving one path (Linux's own limit).
MAX_LINKS: Final = 40
#: Retries when openat2 reports a concurrent rename (``EAGAIN``) or the walk sees a swap.
MAX_RETRIES: Final = 64

SYS_OPENAT2: Final = 437  # x86_64 and asm-generic alike
RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_BENEATH: Final = 0x08


class Escape(Exception):
    """The path would leave the sandbox (or uses a link that is never allowed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_libc: ctypes.CDLL | None = None


def _syscall() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def openat2(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """``openat2(dir_fd, path, {flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})``.

    Raises:
        Escape: the path leaves ``dir_fd`` or crosses a magic link.
        OSError: any other failure, with its errno.
    """
    how = _OpenHow(
        flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
    )
    encoded = os.fsencode(path)
    for _ in range(MAX_RETRIES):
        fd = int(
            _syscall()(
                ctypes.c_long(SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(encoded),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code == errno.EAGAIN:
            continue
        if code == errno.EXDEV:
            raise Escape("the path leads outside the sandbox")
        if code == errno.ELOOP and not flags & os.O_NOFOLLOW:
            raise Escape("too many symbolic links, or a /proc magic link")
        raise OSError(code, os.strerror(code), path)
    raise Escape("the path kept changing while it was resolved")


def openat2_works(dir_fd: int) -> bool:
    """Whether this kernel (and any seccomp profile around us) lets openat2 through."""
    try:
        os.close(openat2(dir_fd, ".", os.O_PATH))
    except (OSError, Escape):
        return False
    return True


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part != "."]


def walk_open(root_fd: int, path: str, flags: int, mode: int = 0o666) -> int:
    """Open ``path`` beneath ``root_fd`` one ``O_NOFOLLOW`` component at a time.

    Same contract as :func:`openat2` (symlinks inside the root are followed,
    by us; anything leaving it is an :class:`Escape`).
    """
    pending = deque(_components(path))
    stack: list[int] = []
    links = retries = 0
    try:
        while True:
            current = stack[-1] if stack else root_fd
            if not pending:  # the path names a directory we already hold
                return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=current)
            name = pending.popleft()
            if name == "..":
                if not stack:
                    raise Escape("the path leads outside the sandbox")
                os.close(stack.pop())
                continue
            last = not pending
            try:
                if last:
                    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
                    if not (flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode)):
                        return fd
                    os.close(fd)  # O_PATH | O_NOFOLLOW opened the link itself: follow it ourselves
                else:
                    flags_dir = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                    stack.append(os.open(name, flags_dir, dir_fd=current))
                    continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                try:
                    info: os.stat_result | None = os.stat(name, dir_fd=current, follow_symlinks=False)
                except FileNotFoundError:
                    info = None
                if info is None or not stat.S_ISLNK(info.st_mode):
                    if info is not None and exc.errno == errno.ENOTDIR and not stat.S_ISDIR(info.st_mode):
                        raise  # really not a directory
                    retries += 1  # it changed under us (a swap race): look again
                    if retries > MAX_RETRIES:
                        raise Escape("the path kept changing while it was resolved") from None
                    pending.appendleft(name)
                    continue
                if last and flags & os.O_NOFOLLOW:
                    raise
            # ``name`` is a symlink: read it (never follow it) and splice in its target.
            try:
                target = os.readlink(name, dir_fd=current)
            except OSError:  # swapped back to a file or removed: look again
                retries += 1
                if retries > MAX_RETRIES:
                    raise Escape("the path kept changing while it was resolved") from None
                pending.appendleft(name)
                continue
            if target.startswith("/"):
                raise Escape("an absolute symbolic link leads outside the sandbox")
            links += 1
            if links > MAX_LINKS:
                raise Escape("too many symbolic links")
            pending.extendleft(reversed(_components(target)))
    finally:
        for fd in stack:
            os.close(fd)


def open_beneath(root_fd: int, path: str, flags: int, mode: int = 0o666, *, use_openat2: bool = True) -> int:
    """Open ``path`` (relative) beneath ``root_fd`` with the chosen resolver."""
    if use_openat2:
        return openat2(root_fd, path or ".", flags, mode)
    return walk_open(root_fd, path, flags, mode)


__all__ = ["MAX_LINKS", "Escape", "open_beneath", "openat2", "openat2_works", "walk_open"]
