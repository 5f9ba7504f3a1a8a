"""The :class:`Sandbox`: a directory opened once, as a capability.

Every path a model gives a file tool goes through here. The rules:

- A path is checked before it touches the filesystem: a NUL byte, more than
  :data:`PATH_MAX` bytes, a component over :data:`NAME_MAX` bytes, ``~`` and
  an absolute path outside the root are refused. An absolute path inside the
  root is taken relative to it (models like absolute paths).
- It is then resolved *from the root's descriptor*, never from a path string
  (see ``_resolve.py``): ``..`` that climbs out, a symlink (absolute, or
  relative but leading out) and ``/proc`` magic links are refused, however
  the directory tree changes meanwhile.
- A refusal is ``ToolError.denied(...)``: the model reads ``denied: ...``
  and the run goes on. Other failures (no such file) are plain
  ``ToolError``\\ s.

The sandbox confines the file tools of this process. It does not confine a
child process: that is the execution backend's job (``OsSandboxBackend``).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final, Literal, final

from helikon.errors import ToolError
from helikon.tools.sandbox._resolve import Escape, open_beneath, openat2_works

#: Longest path accepted, in bytes (Linux's ``PATH_MAX`` less the NUL).
PATH_MAX: Final = 4095
#: Longest path component accepted, in bytes (``NAME_MAX``).
NAME_MAX: Final = 255
#: Symlinks followed when locating a file to write.
_MAX_HOPS: Final = 40

Resolver = Literal["auto", "openat2", "walk"]


@final
class Sandbox:
    """A directory capability: file tools may only reach what is beneath it.

    Open one with :meth:`open` and share it between tools; it holds one
    directory descriptor until :meth:`close` (or the end of a ``with``).

    >>> import tempfile
    >>> with Sandbox.open(tempfile.mkdtemp()) as box:
    ...     box.relative("src/../README.md")
    'src/../README.md'
    """

    __slots__ = ("_fd", "_root", "_use_openat2")

    def __init__(self, fd: int, root: str, use_openat2: bool) -> None:
        self._fd = fd
        self._root = root
        self._use_openat2 = use_openat2

    @classmethod
    def open(cls, root: str | os.PathLike[str], *, resolver: Resolver = "auto") -> Sandbox:
        """Open ``root`` (a directory) as the sandbox.

        Args:
            root: the directory; symlinks in *this* path are resolved once, here.
            resolver: ``"auto"`` uses ``openat2`` when the kernel has it and
                the ``O_NOFOLLOW`` walk otherwise; ``"openat2"`` or ``"walk"``
                insist on one (tests use this to exercise both).

        Raises:
            NotADirectoryError, FileNotFoundError: ``root`` is not a directory.
            OSError: ``resolver="openat2"`` on a kernel without it.
        """
        real = os.path.realpath(os.fspath(root))
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if resolver == "walk":
            use = False
        else:
            use = openat2_works(fd)
            if resolver == "openat2" and not use:
                os.close(fd)
                raise OSError(errno.ENOSYS, "openat2 with RESOLVE_BENEATH is not available here")
        return cls(fd, real, use)

    @property
    def root(self) -> str:
        """The root directory's absolute, symlink-free path (for display and for cwd)."""
        return self._root

    @property
    def resolver(self) -> str:
        """``"openat2"`` or ``"walk"``: how paths are resolved."""
        return "openat2" if self._use_openat2 else "walk"

    def fileno(self) -> int:
        """The root directory's descriptor (owned by the sandbox: do not close it)."""
        if self._fd < 0:
            raise ValueError("the sandbox is closed")
        return self._fd

    def close(self) -> None:
        """Release the root descriptor. Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox({self._root!r}, resolver={self.resolver!r})"

    # -- paths -----------------------------------------------------------------

    def relative(self, path: str) -> str:
        """``path`` checked and made relative to the root (``"."`` for the root itself).

        Nothing is resolved yet: this only refuses what can never be inside.

        Raises:
            ToolError: ``denied: ...`` for a NUL byte, an over-long path or
                component, ``~``, or an absolute path outside the root.
        """
        if "\0" in path:
            raise ToolError.denied(f"{path!r}: the path contains a NUL byte")
        size = len(os.fsencode(path))
        if size > PATH_MAX:
            raise ToolError.denied(f"the path is too long ({size} bytes; the limit is {PATH_MAX})")
        if any(len(os.fsencode(part)) > NAME_MAX for part in path.split("/")):
            raise ToolError.denied(f"a component of the path is longer than {NAME_MAX} bytes")
        if path.startswith("~"):
            raise ToolError.denied(f"{path}: home-relative paths are outside the sandbox")
        if path.startswith("/"):
            if path.rstrip("/") == self._root:
                return "."
            if not path.startswith(self._root + "/"):
                raise ToolError.denied(f"{path}: absolute path outside the sandbox root {self._root}")
            path = path[len(self._root) + 1 :]
        path = path.lstrip("/")
        return path or "."

    def _open(self, rel: str, flags: int, mode: int = 0o666, shown: str | None = None) -> int:
        try:
            return open_beneath(self.fileno(), rel, flags, mode, use_openat2=self._use_openat2)
        except Escape as exc:
            raise ToolError.denied(f"{shown or rel}: {exc.reason}") from None

    def open_file(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        """Open ``path`` beneath the root; the caller owns (and closes) the descriptor.

        Symlinks that stay inside are followed; anything else is refused.

        Raises:
            ToolError: ``denied: ...`` when the path leads outside.
            OSError: no such file, not a directory, permissions, ...
        """
        return self._open(self.relative(path), flags, mode, path)

    def open_dir(self, path: str = ".") -> int:
        """Open directory ``path`` beneath the root for listing (caller closes it)."""
        return self.open_file(path, os.O_RDONLY | os.O_DIRECTORY)

    def locate(self, path: str, *, create_dirs: bool = False) -> tuple[int, str]:
        """The directory that holds ``path``'s final file, and that file's name.

        A symlink in the final component is followed (inside the root only),
        so the name returned is never a symlink at the time of the call. Use
        it with ``dir_fd=`` calls that never follow (``rename``, ``O_EXCL``
        creation): a symlink swapped in later is then replaced, not followed.

        Args:
            path: the file's path.
            create_dirs: create missing parent directories (one ``mkdirat``
                per component, each from a descriptor beneath the root).

        Returns:
            ``(dir_fd, name)``; the caller closes ``dir_fd``.

        Raises:
            ToolError: ``denied: ...`` for an escape; an ordinary failure when
                ``path`` names a directory rather than a file.
            OSError: a missing parent (without ``create_dirs``), permissions, ...
        """
        rel = self.relative(path)
        for _ in range(_MAX_HOPS):
            head, _, name = rel.rpartition("/")
            if name in ("", ".", ".."):
                raise ToolError(f"{path}: not a file path")
            parent = self._parent(head or ".", path, create_dirs)
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return parent, name
            except BaseException:
                os.close(parent)
                raise
            if not stat.S_ISLNK(info.st_mode):
                return parent, name
            try:
                target = os.readlink(name, dir_fd=parent)
            finally:
                os.close(parent)
            if target.startswith("/"):
                raise ToolError.denied(f"{path}: an absolute symbolic link leads outside the sandbox")
            rel = f"{head}/{target}" if head else target
        raise ToolError.denied(f"{path}: too many symbolic links")

    def _parent(self, head: str, shown: str, create: bool) -> int:
        flags = os.O_PATH | os.O_DIRECTORY
        try:
            return self._open(head, flags, shown=shown)
        except FileNotFoundError:
            if not create:
                raise
        parts = head.split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            try:
                os.close(self._open(prefix, flags, shown=shown))
            except FileNotFoundError:
                above = self._open("/".join(parts[: end - 1]) or ".", flags, shown=shown)
                try:
                    os.mkdir(parts[end - 1], dir_fd=above)
                except FileExistsError:
                    pass
                finally:
                    os.close(above)
        return self._open(head, flags, shown=shown)


__all__ = ["NAME_MAX", "PATH_MAX", "Sandbox"]
