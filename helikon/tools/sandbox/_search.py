"""The search tools: ``Glob`` (find files by name) and ``Grep`` (by content).

Both are READ_ONLY, confined to a :class:`Sandbox`, and walk the tree the
way ``git`` sees it (``_walk.py``: ``.gitignore`` respected, ``.git``
skipped, symlinked directories not entered). They go beyond the book, which
ships only Read/Write/Edit/Bash, because that is what users of coding agents
expect next to them. Output is plain text, sorted by path, capped, and says
when it was cut.

Both are bounded against a hostile pattern: globs are matched without
backtracking (``_walk.GlobMatcher``: brace alternatives, ``**`` components and
length capped), Grep's regular expression runs on RE2 (the ``google-re2``
package of the ``tools`` extra), whose matching time is linear in the text,
and each call has a ``timeout`` that the search checks between lines, so it
stops itself (a thread cannot be stopped from outside).

A search reads many files in one call, so the permission pipeline, which
sees only the directory searched, cannot stop it from reading a file that a
read rule protects: both tools leave out every file matched by the run's
read rules (``DenyRule.read``, and ``GuardRule.read`` of either action, as a
search cannot ask about each file), and say how many they left out.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, final

import anyio.to_thread

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ConfigError, ToolError
from helikon.model import ToolEffect
from helikon.tools.sandbox._files import SNIFF_BYTES, is_binary, is_protected, read_rule_patterns
from helikon.tools.sandbox._sandbox import Sandbox
from helikon.tools.sandbox._walk import GlobMatcher, glob_regex, require_pathspec, walk

_DIR_DOC: Final = "Directory to search: relative to the sandbox root (the default), or absolute inside it."
_MODES: Final = ("files_with_matches", "content", "count")


def _optional_string(args: JsonObject, key: str, default: str) -> str:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ToolError.invalid_args(f"{key!r} must be a string")
    return value


def _prefix(path: str) -> str:
    """How results below ``path`` are shown: ``path/`` (``""`` for the root)."""
    cleaned = path.strip()
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    cleaned = cleaned.rstrip("/")
    return "" if cleaned in ("", ".") else cleaned + "/"


def _protected(ctx: ToolContext[Any], sandbox: Sandbox) -> Callable[[str], bool]:
    """Whether a path (as shown) is one the run's read rules protect; paths
    are matched relative to the sandbox root, as the rules match a Read's,
    and again with their symlinks resolved (a search of a linked directory)."""
    patterns = read_rule_patterns(ctx)
    if not patterns:
        return lambda path: False
    return lambda path: is_protected(patterns, sandbox, path)


def _left_out(count: int) -> str:
    return f"\n[{count} file(s) left out: the run's read rules protect them]" if count else ""


def _check_pattern(pattern: str) -> None:
    if "\0" in pattern:
        raise ToolError.denied("the pattern contains a NUL byte")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError.denied(
            f"{pattern}: glob patterns are relative to the search directory and stay inside it"
        )


class _Deadline:
    """The time a search must stop by; checked between lines and entries."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise ToolError(
                f"the search was stopped after {self.seconds:g} s; narrow the path, the glob or the pattern"
            )


def _compile(pattern: str, case_insensitive: bool) -> Any:
    """The pattern compiled by RE2 (linear-time matching), with a clear error for
    what RE2 does not support."""
    try:
        import re2
    except ImportError:
        raise ToolError(
            "Grep needs the 'google-re2' package (a linear-time regex engine): "
            "pip install 'paigasus-helikon[tools]'"
        ) from None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ToolError.invalid_args(f"invalid regular expression {pattern!r}: {exc}") from None
    options = re2.Options()
    options.case_sensitive = not case_insensitive
    options.max_mem = 64 << 20
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ToolError.invalid_args(
            f"regular expression {pattern!r} is not supported by the linear-time engine (RE2 has no "
            f"backreferences or lookaround): {exc}"
        ) from None


class _SearchTool:
    __slots__ = ("max_results", "sandbox", "timeout")

    def __init__(self, sandbox: Sandbox, *, max_results: int = 1000, timeout: float = 30.0) -> None:
        require_pathspec()
        if timeout <= 0:
            raise ConfigError(f"{type(self).__name__}: timeout must be positive, got {timeout}")
        self.sandbox = sandbox
        self.timeout = timeout
        self.max_results = max_results

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.READ_ONLY

    @property
    def output_schema(self) -> JsonObject | None:
        return {"type": "string"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sandbox!r})"

    def _capped(self, lines: list[str], total: int, noun: str) -> str:
        text = "\n".join(lines[: self.max_results])
        if total > self.max_results:
            text += f"\n[{total - self.max_results} more {noun} not shown; narrow the search]"
        return text


@final
class GlobTool(_SearchTool):
    """``Glob`` (READ_ONLY): files whose path matches a glob, e.g. ``src/**/*.py``.

    Args:
        sandbox: the directory the tool may search beneath.
        max_results: the most paths returned.
        timeout: seconds one search may take; the search stops itself then.

    The glob is matched without backtracking, and bounded: at most 256 brace
    alternatives, 16 ``**`` components, 4096 characters.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "Glob"

    @property
    def description(self) -> str:
        return (
            "Find files in the sandbox by path pattern. `*` and `?` match within a directory name, `**` "
            "any number of directories, `{a,b}` alternatives: `**/*.py`, `src/**/test_*.{js,ts}`. "
            "Paths come sorted, relative to the sandbox root; .gitignore'd files and .git are left out."
        )

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob, relative to path."},
                "path": {"type": "string", "description": _DIR_DOC},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        pattern = _optional_string(args, "pattern", "")
        if not pattern:
            raise ToolError.invalid_args("'pattern' must be a non-empty string")
        path = _optional_string(args, "path", ".")
        _check_pattern(pattern)
        regex = glob_regex(pattern)
        return await anyio.to_thread.run_sync(self._glob, regex, path, _protected(ctx, self.sandbox))

    def _glob(self, regex: GlobMatcher, path: str, protected: Callable[[str], bool]) -> str:
        pattern = regex.pattern
        prefix = _prefix(path)
        deadline = _Deadline(self.timeout)
        matched = []
        try:
            for entry in walk(self.sandbox, path):
                deadline.check()
                if not entry.is_dir and regex.fullmatch(entry.path):
                    matched.append(prefix + entry.path)
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror or exc}") from None
        found = [shown for shown in matched if not protected(shown)]
        hidden = _left_out(len(matched) - len(found))
        if not found:
            return f"No files match {pattern!r} in {path}" + hidden
        return self._capped(found, len(found), "paths") + hidden


@final
class GrepTool(_SearchTool):
    """``Grep`` (READ_ONLY): search file contents with a regular expression.

    Args:
        sandbox: the directory the tool may search beneath.
        max_results: the most lines (or files) returned.
        max_file_bytes: larger files are skipped.
        timeout: seconds one search may take; the search stops itself then.

    The pattern runs on RE2 (``google-re2``, the ``tools`` extra): matching
    time is linear in the text, so no pattern can tie up a run (``(a+)+$`` is
    as fast as ``a``); backreferences and lookaround are not supported.
    """

    __slots__ = ("max_file_bytes",)

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        max_results: int = 500,
        max_file_bytes: int = 8 * 1024 * 1024,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(sandbox, max_results=max_results, timeout=timeout)
        self.max_file_bytes = max_file_bytes

    @property
    def name(self) -> str:
        return "Grep"

    @property
    def description(self) -> str:
        return (
            "Search file contents in the sandbox with a regular expression (RE2 syntax: no "
            "backreferences or lookaround). "
            "output_mode: files_with_matches (default: the paths), content (path:line:text, with "
            "`context` lines around each match) or count (path:matches). Filter files with `glob` "
            "(`*.py` matches names, `src/**/*.py` paths). Binary and .gitignore'd files are skipped."
        )

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression."},
                "path": {"type": "string", "description": "File or directory to search (default: the root)."},
                "glob": {"type": "string", "description": "Only files matching this glob."},
                "output_mode": {"type": "string", "enum": list(_MODES), "default": "files_with_matches"},
                "case_insensitive": {"type": "boolean", "default": False},
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "Lines of context before and after each match (content mode).",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        pattern = _optional_string(args, "pattern", "")
        path = _optional_string(args, "path", ".")
        glob = _optional_string(args, "glob", "")
        mode = _optional_string(args, "output_mode", "files_with_matches")
        if mode not in _MODES:
            raise ToolError.invalid_args(f"'output_mode' must be one of {', '.join(_MODES)}")
        context = args.get("context", 0)
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise ToolError.invalid_args("'context' must be a non-negative integer")
        regex = _compile(pattern, args.get("case_insensitive") is True)
        matcher = None
        if glob:
            _check_pattern(glob)
            matcher = glob_regex(glob)
        protected = _protected(ctx, self.sandbox)
        return await anyio.to_thread.run_sync(self._grep, regex, path, matcher, mode, context, protected)

    def _grep(
        self,
        regex: Any,
        path: str,
        glob: GlobMatcher | None,
        mode: str,
        context: int,
        protected: Callable[[str], bool],
    ) -> str:
        out: list[str] = []
        total = 0
        skipped = [0]
        deadline = _Deadline(self.timeout)
        for shown, lines in self._files(path, glob, protected, skipped, deadline):
            hits = []
            for index, line in enumerate(lines):
                if index % 256 == 0:
                    deadline.check()
                if regex.search(line):
                    hits.append(index)
            if not hits:
                continue
            if mode == "files_with_matches":
                out.append(shown)
                total += 1
            elif mode == "count":
                out.append(f"{shown}:{len(hits)}")
                total += 1
            else:
                block = _content(shown, lines, hits, context)
                total += len(block)
                if len(out) < self.max_results:
                    out.extend(block)
        hidden = _left_out(skipped[0])
        if not out:
            return f"No matches for {regex.pattern!r} in {path}" + hidden
        noun = "lines" if mode == "content" else "files"
        return self._capped(out, max(total, len(out)), noun) + hidden

    def _files(
        self,
        path: str,
        glob: GlobMatcher | None,
        protected: Callable[[str], bool],
        skipped: list[int],
        deadline: _Deadline,
    ) -> Iterator[tuple[str, list[str]]]:
        """``(shown path, lines)`` of every text file to search (``skipped[0]``
        counts the files left out for the read rules)."""
        try:
            fd = self.sandbox.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror or exc}") from None
        try:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
        if not is_dir:
            if protected(path):
                skipped[0] += 1
                return
            lines = self._lines(path)
            if lines is not None:
                yield path, lines
            return
        prefix = _prefix(path)
        for entry in walk(self.sandbox, path):
            deadline.check()
            if entry.is_dir or entry.is_symlink:
                continue
            if glob is not None:
                subject = entry.path if "/" in glob.pattern else entry.path.rsplit("/", 1)[-1]
                if not glob.fullmatch(subject):
                    continue
            if protected(prefix + entry.path):
                skipped[0] += 1
                continue
            lines = self._lines(prefix + entry.path)
            if lines is not None:
                yield prefix + entry.path, lines

    def _lines(self, path: str) -> list[str] | None:
        """A file's lines, or ``None`` for what is not searched (binary, too large, not a file)."""
        try:
            fd = self.sandbox.open_file(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except (OSError, ToolError):
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > self.max_file_bytes:
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if is_binary(data[:SNIFF_BYTES]):
            return None
        return data.decode("utf-8", errors="replace").splitlines()


def _content(shown: str, lines: list[str], hits: list[int], context: int) -> list[str]:
    """``path:n:line`` for matches and ``path-n-line`` for context, groups split by ``--``."""
    out: list[str] = []
    matched = set(hits)
    last = -1
    for hit in hits:
        first = max(hit - context, last + 1)
        if context and out and first > last + 1:
            out.append("--")
        for index in range(first, min(hit + context, len(lines) - 1) + 1):
            mark = ":" if index in matched else "-"
            out.append(f"{shown}{mark}{index + 1}{mark}{lines[index]}")
            last = index
    return out


__all__ = ["GlobTool", "GrepTool"]
