"""The file tools: ``Read``, ``Write`` and ``Edit``, confined to a :class:`Sandbox`.

Each is a small class implementing the :class:`~helikon.protocols.Tool`
protocol by hand (fixed names and schemas, as the book's tools have). The
filesystem work runs in a worker thread, so a large file does not stall the
event loop. Rules:

- Every path goes through the sandbox (``_sandbox.py``): escapes are
  ``denied: ...`` results, the run goes on.
- Reads refuse directories, devices and FIFOs (opened non-blocking, so a FIFO
  cannot hang the tool) and binary files (a NUL byte in the first 8 KiB).
- Writes are atomic: a temporary file in the same directory, ``fsync``, then
  ``rename`` over the target, all relative to the directory's descriptor.
  A target with more than one hard link is refused: its other name may be
  outside the root, and the caller asked to change *this* file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from collections.abc import Iterator
from typing import Any, BinaryIO, Final, final

import anyio.to_thread

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.governance import ReadPath, path_matches
from helikon.model import ToolEffect
from helikon.tools.sandbox._sandbox import Sandbox

#: Bytes looked at to decide whether a file is binary.
SNIFF_BYTES: Final = 8192
#: Largest file Edit loads.
MAX_EDIT_BYTES: Final = 16 * 1024 * 1024

_PATH_DOC: Final = "Path of the file: relative to the sandbox root, or absolute inside it."


def _string(args: JsonObject, key: str, *, required: bool = True) -> str:
    value = args.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ToolError.invalid_args(f"{key!r} must be a string")
    return value


def _int(args: JsonObject, key: str, default: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError.invalid_args(f"{key!r} must be a positive integer")
    return value


def _failed(path: str, exc: OSError) -> ToolError:
    """An OS error as the model should read it."""
    return ToolError(f"{path}: {exc.strerror or exc}")


def read_rule_patterns(ctx: ToolContext[Any] | None) -> tuple[str, ...]:
    """The globs of the run's read rules (``DenyRule.read`` and ``GuardRule.read`` of either action)."""
    if ctx is None:
        return ()
    governed = ctx.governed
    return tuple(
        rule.matcher.pattern
        for rule in (*governed.deny_rules, *governed.guard_rules)
        if isinstance(getattr(rule, "matcher", None), ReadPath)
    )


def is_protected(patterns: tuple[str, ...], sandbox: Sandbox, path: str) -> bool:
    """Whether a read rule glob in ``patterns`` matches ``path``, as written or once its
    symlinks are resolved inside the sandbox (the pipeline sees only the name as written)."""
    if not patterns:
        return False
    candidates = [sandbox.relative(path)]
    root = os.path.realpath(sandbox.root)
    real = os.path.realpath(os.path.join(root, candidates[0]))
    if real.startswith(root.rstrip("/") + "/"):
        candidates.append(os.path.relpath(real, root))
    return any(path_matches(p, c) for p in patterns for c in candidates)


def refuse_protected(ctx: ToolContext[Any] | None, sandbox: Sandbox, path: str) -> None:
    """Refuse ``path`` when a read rule of the run protects it (see :func:`is_protected`).

    Raises:
        ToolError: ``denied: ...``.
    """
    if is_protected(read_rule_patterns(ctx), sandbox, path):
        raise ToolError.denied(f"{path}: the run's read rules protect this file")


def is_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say it is binary (a NUL byte, as git and grep decide).

    >>> is_binary(b"print('hi')\\n"), is_binary(b"\\x7fELF\\x02\\x01\\x00")
    (False, True)
    """
    return b"\0" in head


def write_atomically(
    dir_fd: int, name: str, data: bytes, mode: int | None = None, replaced_mtime: float | None = None
) -> None:
    """Replace ``name`` in ``dir_fd`` with ``data`` at once (temporary file, fsync, rename).

    ``mode`` is the new file's permission bits; ``None`` gives a new file's
    default (``0o666`` less the umask). ``replaced_mtime`` is the old file's
    modification time: when the new one would fall in the same whole second,
    the write waits for the next second, because tools that cache by
    ``(mtime in seconds, size)`` would miss the change (Python's bytecode
    cache does: an agent that edits ``return a - b`` into ``return a + b``
    and re-runs the tests at once would test the old code).
    """
    temp = f".helikon-{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666 if mode is None else 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb", closefd=True) as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            if replaced_mtime is not None:
                _advance_mtime(handle.fileno(), int(replaced_mtime))
            os.fsync(handle.fileno())
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def _advance_mtime(fd: int, old_second: int) -> None:
    """Make ``fd``'s mtime fall in a later whole second than ``old_second`` (waiting, never faking)."""
    for _ in range(200):
        if int(os.fstat(fd).st_mtime) > old_second:
            return
        time.sleep(max(0.0, old_second + 1 - time.time()) + 0.005)  # the file clock is a little coarse
        os.utime(fd)


def _bounded_lines(handle: BinaryIO, cap: int) -> Iterator[bytes]:
    """The file's lines, each cut to ``cap`` bytes without ever holding more (a minified file is one line)."""
    while True:
        line = handle.readline(cap)
        if not line:
            return
        if len(line) == cap and not line.endswith(b"\n"):
            while (rest := handle.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass
        yield line


def _regular(fd: int, path: str) -> os.stat_result:
    """``fd``'s status, if it is a regular file."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path} is a directory (use Glob to list it)")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{path} is not a regular file")
    return info


def _open_regular(fd: int, path: str) -> tuple[os.stat_result, BinaryIO]:
    """``fd``'s status and ``fd`` as a binary file, if it is a regular file
    (else ``fd`` is closed and the :class:`ToolError` raised)."""
    try:
        info = _regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return info, os.fdopen(fd, "rb")


def _existing(dir_fd: int, name: str, path: str, *, load: bool) -> tuple[int, float, bytes] | None:
    """The mode, mtime (and, with ``load``, content) of the file to replace; ``None`` if there is none.

    Raises:
        ToolError: it is a directory or not a regular file, it has other
            hard links (``denied``), or it is too large to load.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    info, file = _open_regular(fd, path)
    with file as handle:
        if info.st_nlink > 1:
            raise ToolError.denied(
                f"{path} has {info.st_nlink} hard links; another of its names may be outside the sandbox"
            )
        if not load:
            return stat.S_IMODE(info.st_mode), info.st_mtime, b""
        if info.st_size > MAX_EDIT_BYTES:
            raise ToolError(f"{path} is larger than {MAX_EDIT_BYTES} bytes; Edit refuses it")
        return stat.S_IMODE(info.st_mode), info.st_mtime, handle.read()


class _FileTool:
    """What the three file tools share: the sandbox and the protocol's plumbing."""

    __slots__ = ("sandbox",)

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    def output_schema(self) -> JsonObject | None:
        return {"type": "string"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sandbox!r})"

    @contextlib.contextmanager
    def _located(self, path: str, *, create_dirs: bool = False) -> Iterator[tuple[int, str]]:
        """The directory that holds ``path``'s file, open (closed after), and
        the file's name; an ``OSError`` (locating or in the block) is a
        :class:`ToolError` that names ``path``."""
        try:
            dir_fd, name = self.sandbox.locate(path, create_dirs=create_dirs)
        except OSError as exc:
            raise _failed(path, exc) from None
        try:
            yield dir_fd, name
        except OSError as exc:
            raise _failed(path, exc) from None
        finally:
            os.close(dir_fd)


@final
class ReadTool(_FileTool):
    """``Read`` (READ_ONLY): a text file's lines, numbered like ``cat -n``.

    Args:
        sandbox: the directory the tool may read beneath.
        max_lines: lines returned when the model gives no ``limit``.
        max_bytes: the most output returned at once; longer output is cut
            at a line boundary and says how to read on.
        max_line_chars: longer lines are cut (minified files).
    """

    __slots__ = ("max_bytes", "max_line_chars", "max_lines")

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        max_lines: int = 2000,
        max_bytes: int = 256 * 1024,
        max_line_chars: int = 2000,
    ) -> None:
        super().__init__(sandbox)
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_line_chars = max_line_chars

    @property
    def name(self) -> str:
        return "Read"

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.READ_ONLY

    @property
    def description(self) -> str:
        return (
            "Read a text file in the sandbox. Lines come numbered (1-based, as `cat -n`). "
            f"At most {self.max_lines} lines by default: give offset (first line) and limit "
            "(how many) to read a part of a long file. Binary files are refused."
        )

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": _PATH_DOC},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read."},
            },
            "required": ["file_path"],
            "additionalProperties": False,
        }

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        path = _string(args, "file_path")
        refuse_protected(ctx, self.sandbox, path)
        offset = _int(args, "offset", 1)
        limit = _int(args, "limit", self.max_lines)
        return await anyio.to_thread.run_sync(self._read, path, offset, limit)

    def _read(self, path: str, offset: int, limit: int) -> str:
        try:
            fd = self.sandbox.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise _failed(path, exc) from None
        info, file = _open_regular(fd, path)
        with file as handle:
            if is_binary(handle.read(SNIFF_BYTES)):
                raise ToolError(f"{path} is a binary file ({info.st_size} bytes); Read shows text only")
            handle.seek(0)
            return self._numbered(path, handle, offset, limit)

    def _numbered(self, path: str, handle: BinaryIO, offset: int, limit: int) -> str:
        out: list[str] = []
        size = 0
        number = 0
        last = offset + limit - 1
        cut = False
        for number, raw in enumerate(_bounded_lines(handle, 4 * self.max_line_chars), 1):
            if number < offset:
                continue
            if number > last or size > self.max_bytes:
                cut = True
                break
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > self.max_line_chars:
                line = line[: self.max_line_chars] + " [line cut]"
            entry = f"{number:>6}\t{line}"
            out.append(entry)
            size += len(entry) + 1
        if not out:
            if number == 0:
                return f"{path} is empty"
            raise ToolError(f"{path} has only {number} lines; offset {offset} is past the end")
        text = "\n".join(out)
        if cut:
            shown = offset + len(out) - 1
            text += f"\n[showing lines {offset}-{shown}; read on with offset={shown + 1}]"
        return text


@final
class WriteTool(_FileTool):
    """``Write`` (WRITE): create or replace a file, atomically, inside the sandbox.

    Missing parent directories are created. The file keeps the mode of the
    one it replaces (a new file gets ``0o666`` less the umask).
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "Write"

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.WRITE

    @property
    def description(self) -> str:
        return (
            "Write a file in the sandbox, replacing it if it exists (creating parent directories). "
            "Prefer Edit for changing part of an existing file."
        )

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": _PATH_DOC},
                "content": {"type": "string", "description": "The whole new content of the file."},
            },
            "required": ["file_path", "content"],
            "additionalProperties": False,
        }

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        path = _string(args, "file_path")
        content = _string(args, "content")
        return await anyio.to_thread.run_sync(self._write, path, content)

    def _write(self, path: str, content: str) -> str:
        data = content.encode()
        with self._located(path, create_dirs=True) as (dir_fd, name):
            found = _existing(dir_fd, name, path, load=False)
            created = found is None
            if found is None:
                write_atomically(dir_fd, name, data)
            else:
                write_atomically(dir_fd, name, data, found[0], found[1])
        return f"{'Created' if created else 'Wrote'} {path} ({len(data)} bytes)"


@final
class EditTool(_FileTool):
    """``Edit`` (WRITE): replace an exact string in a file.

    ``old_string`` must occur exactly once, unless ``replace_all`` is set;
    the file is rewritten atomically and keeps its mode.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "Edit"

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.WRITE

    @property
    def description(self) -> str:
        return (
            "Replace old_string with new_string in a file in the sandbox. old_string must match the file "
            "exactly (whitespace included) and occur once, or set replace_all to replace every occurrence. "
            "Read the file first."
        )

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": _PATH_DOC},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The text to put in its place."},
                "replace_all": {
                    "type": "boolean",
                    "default": False,
                    "description": "Replace every occurrence instead of exactly one.",
                },
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": False,
        }

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        path = _string(args, "file_path")
        refuse_protected(ctx, self.sandbox, path)
        old = _string(args, "old_string")
        new = _string(args, "new_string")
        replace_all = args.get("replace_all") is True
        if not old:
            raise ToolError("old_string is empty; use Write to create a file")
        if old == new:
            raise ToolError("old_string and new_string are the same; nothing to change")
        return await anyio.to_thread.run_sync(self._edit, path, old, new, replace_all)

    def _edit(self, path: str, old: str, new: str, replace_all: bool) -> str:
        with self._located(path) as (dir_fd, name):
            found = _existing(dir_fd, name, path, load=True)
            if found is None:
                raise ToolError(f"{path} does not exist (use Write to create it)")
            mode, mtime, data = found
            try:
                text = data.decode()
            except UnicodeDecodeError:
                raise ToolError(f"{path} is not UTF-8 text") from None
            count = text.count(old)
            if count == 0:
                raise ToolError(f"old_string was not found in {path}")
            if count > 1 and not replace_all:
                raise ToolError(
                    f"old_string occurs {count} times in {path}; "
                    "add surrounding context to make it unique, or set replace_all"
                )
            updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
            write_atomically(dir_fd, name, updated.encode(), mode, mtime)
        done = count if replace_all else 1
        return f"Edited {path}: replaced {done} occurrence{'s' if done != 1 else ''}"


__all__ = [
    "EditTool",
    "ReadTool",
    "WriteTool",
    "is_binary",
    "is_protected",
    "read_rule_patterns",
    "refuse_protected",
    "write_atomically",
]
