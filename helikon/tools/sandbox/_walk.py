"""Walking a directory tree inside a sandbox, the way ``git`` sees it.

This module owns the tree walk ``Glob`` and ``Grep`` share, and the glob
syntax they accept. Rules:

- The walk goes from directory descriptor to directory descriptor
  (``openat(..., O_NOFOLLOW)``), so it never leaves the root and never
  loops: a symlink to a directory is listed but not entered, as ``git``
  and ``ripgrep`` do.
- ``.git`` is skipped. ``.gitignore`` files apply as git applies them: each
  to its own directory and below, a deeper file's patterns after a
  shallower one's, the last matching pattern deciding (``!`` re-includes),
  and nothing inside an ignored directory comes back. The ``.gitignore``
  files above the starting directory count too. Patterns are matched with
  ``pathspec``'s git-exact ``GitIgnoreSpec``.
- Entries come in a stable order (sorted by name, depth first), and the walk
  stops after ``max_entries``.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, final

import attrs

from helikon.errors import ConfigError, ToolError
from helikon.tools.sandbox._sandbox import Sandbox

if TYPE_CHECKING:
    import pathspec

#: The most entries a single walk visits.
MAX_ENTRIES: Final = 200_000
#: The deepest directory a walk enters.
MAX_DEPTH: Final = 128
_GITIGNORE_BYTES: Final = 1024 * 1024


@final
@attrs.frozen
class Entry:
    """One name found by the walk."""

    #: Relative to the directory the walk started from, ``/``-separated.
    path: str
    is_dir: bool
    is_symlink: bool


@attrs.frozen
class _Rules:
    """One ``.gitignore`` and where it sits relative to the walk's start.

    A path relative to the start is made relative to the file's directory by
    dropping ``base`` (the directory, when it is below the start) or by
    prepending ``shift`` (the way down from it, when it is above the start).
    """

    spec: pathspec.GitIgnoreSpec
    base: str = ""
    shift: str = ""

    def decide(self, path: str) -> bool | None:
        """True: ignored; False: re-included by a ``!`` pattern; None: no pattern matched."""
        if self.base:
            path = path[len(self.base) + 1 :]
        if self.shift:
            path = f"{self.shift}/{path}"
        return self.spec.check_file(path).include


def require_pathspec() -> None:
    """Check that ``pathspec`` (the ``tools`` extra) is installed.

    Raises:
        ConfigError: it is not; the message says what to install.
    """
    try:
        import pathspec  # noqa: F401
    except ImportError:
        raise ConfigError(
            "Glob and Grep need the 'pathspec' package: pip install 'paigasus-helikon[tools]'"
        ) from None


def _ignored(rules: tuple[_Rules, ...], path: str, is_dir: bool) -> bool:
    verdict = False
    candidate = path + "/" if is_dir else path
    for rule in rules:
        decided = rule.decide(candidate)
        if decided is not None:
            verdict = decided
    return verdict


def _read_gitignore(dir_fd: int) -> pathspec.GitIgnoreSpec | None:
    try:
        fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = handle.read(_GITIGNORE_BYTES).decode("utf-8", errors="replace")
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())


def _outer_rules(sandbox: Sandbox, start: str) -> tuple[_Rules, ...]:
    """The ``.gitignore`` files of the directories above ``start`` (they apply to it too)."""
    normal = posixpath.normpath(sandbox.relative(start))
    if normal in (".", "") or normal.startswith(".."):
        return ()
    parts = normal.split("/")
    rules: list[_Rules] = []
    for depth in range(len(parts)):
        try:
            fd = sandbox.open_dir("/".join(parts[:depth]) or ".")
        except Exception:  # a part that is not there: the walk itself will say so
            break
        try:
            spec = _read_gitignore(fd)
        finally:
            os.close(fd)
        if spec is not None:
            rules.append(_Rules(spec, shift="/".join(parts[depth:])))
    return tuple(rules)


def walk(
    sandbox: Sandbox, start: str = ".", *, gitignore: bool = True, max_entries: int = MAX_ENTRIES
) -> Iterator[Entry]:
    """Every file, directory and symlink below ``start``, depth first, sorted by name.

    Raises:
        ToolError: ``start`` leads outside the sandbox (``denied``).
        OSError: ``start`` is missing or not a directory.
    """
    top = sandbox.open_dir(start)
    budget = [max_entries]
    try:
        yield from _walk_dir(top, "", _outer_rules(sandbox, start) if gitignore else (), gitignore, budget, 0)
    finally:
        os.close(top)


def _walk_dir(
    fd: int, prefix: str, rules: tuple[_Rules, ...], gitignore: bool, budget: list[int], depth: int
) -> Iterator[Entry]:
    if depth > MAX_DEPTH:
        return
    if gitignore:
        spec = _read_gitignore(fd)
        if spec is not None:
            rules = (*rules, _Rules(spec, base=prefix))
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return
        path = f"{prefix}/{entry.name}" if prefix else entry.name
        is_link = entry.is_symlink()
        is_dir = not is_link and entry.is_dir(follow_symlinks=False)
        if (is_dir and entry.name == ".git") or (gitignore and _ignored(rules, path, is_dir)):
            continue
        yield Entry(path, is_dir, is_link)
        if is_dir:
            try:
                child = os.open(
                    entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except OSError:  # gone, or swapped for a symlink: not entered
                continue
            try:
                yield from _walk_dir(child, path, rules, gitignore, budget, depth + 1)
            finally:
                os.close(child)


# -- glob patterns -------------------------------------------------------------


#: The most alternatives one glob's braces may expand to.
MAX_GLOB_ALTERNATIVES: Final = 256

#: The most ``**`` components one glob alternative may hold (repeats collapse first).
MAX_GLOBSTARS: Final = 16

#: The longest glob pattern accepted.
MAX_GLOB_LENGTH: Final = 4096


def expand_braces(pattern: str, limit: int = MAX_GLOB_ALTERNATIVES) -> list[str]:
    """``{a,b}`` alternatives expanded (nested too); a lone brace stays literal.

    At most ``limit`` alternatives: a pattern with more (``{a,b}`` eighteen
    times is 262,144) is refused before it is built.

    >>> expand_braces("src/**/*.{ts,tsx}")
    ['src/**/*.ts', 'src/**/*.tsx']
    >>> expand_braces("{a,b{c,d}}x")
    ['ax', 'bcx', 'bdx']

    Raises:
        ToolError: the pattern expands to more than ``limit`` alternatives.
    """
    done: list[str] = []
    work = [pattern]
    while work:
        current = work.pop()
        expanded = _expand_first(current)
        if expanded is None:
            done.append(current)
        else:
            work.extend(reversed(expanded))
        if len(done) + len(work) > limit:
            raise ToolError.invalid_args(
                f"the glob's braces expand to more than {limit} alternatives; use fewer {{a,b}} groups"
            )
    return done


def _expand_first(pattern: str) -> list[str] | None:
    """The alternatives of the first ``{a,b}`` group of ``pattern`` (None: there is none)."""
    depth = 0
    open_at = -1
    for index, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                open_at = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options, level, current = [], 0, ""
                for inner in pattern[open_at + 1 : index]:
                    if inner == "," and level == 0:
                        options.append(current)
                        current = ""
                        continue
                    level += {"{": 1, "}": -1}.get(inner, 0)
                    current += inner
                options.append(current)
                if len(options) < 2:
                    continue
                head, tail = pattern[:open_at], pattern[index + 1 :]
                return [head + option + tail for option in options]
    return None


# A component pattern as tokens: "*", "?", or (characters, negated) for a class or a literal.
_Token = str | tuple[frozenset[str], bool]


def _tokens(segment: str) -> tuple[_Token, ...]:
    out: list[_Token] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char in "*?":
            if not (char == "*" and out and out[-1] == "*"):  # ``**`` inside a component is ``*``
                out.append(char)
        elif char == "[" and (end := segment.find("]", index + 2)) >= 0:
            body = segment[index + 1 : end]
            negated = body[:1] in ("!", "^")
            body = body[1:] if negated else body
            chars: set[str] = set()
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    low, high = ord(body[k]), ord(body[k + 2])
                    chars.update(chr(c) for c in range(low, min(high, low + 0x3000) + 1))
                    k += 3
                else:
                    chars.add(body[k])
                    k += 1
            out.append((frozenset(chars), negated))
            index = end
        else:
            out.append((frozenset(char), False))
        index += 1
    return tuple(out)


def _one(token: _Token, char: str) -> bool:
    if token == "?":
        return char != "/"
    assert not isinstance(token, str)
    chars, negated = token
    return (char in chars) != negated


def _component_matches(tokens: tuple[_Token, ...], name: str) -> bool:
    """Wildcard match in O(len(tokens) * len(name)): greedy ``*`` with one backtrack point."""
    t = n = 0
    star_t, star_n = -1, 0
    while n < len(name):
        if t < len(tokens) and tokens[t] != "*" and _one(tokens[t], name[n]):
            t += 1
            n += 1
        elif t < len(tokens) and tokens[t] == "*":
            star_t, star_n = t, n
            t += 1
        elif star_t >= 0:
            star_n += 1
            t, n = star_t + 1, star_n
        else:
            return False
    while t < len(tokens) and tokens[t] == "*":
        t += 1
    return t == len(tokens)


@attrs.frozen
class GlobMatcher:
    """A glob over ``/``-separated relative paths, matched without backtracking:
    components by a linear wildcard match, ``**`` by a reachability walk over
    (pattern component, path component) pairs, so no pattern takes more than
    O(pattern x path) steps per alternative."""

    pattern: str
    alternatives: tuple[tuple[tuple[_Token, ...] | None, ...], ...]

    def fullmatch(self, path: str) -> bool:
        parts = path.split("/")
        return any(_path_matches(alternative, parts) for alternative in self.alternatives)


def _path_matches(segments: tuple[tuple[_Token, ...] | None, ...], parts: list[str]) -> bool:
    states = {0}  # pattern positions reachable after consuming the parts so far
    for part in parts:
        closure = _closure(segments, states)
        states = set()
        for i in closure:
            if i < len(segments):
                segment = segments[i]
                if segment is None:
                    states.add(i)  # ``**`` eats this component and stays
                elif _component_matches(segment, part):
                    states.add(i + 1)
        if not states:
            return False
    return len(segments) in _closure(segments, states)


def _closure(segments: tuple[tuple[_Token, ...] | None, ...], states: set[int]) -> set[int]:
    out = set(states)
    for i in sorted(states):
        k = i
        while k < len(segments) and segments[k] is None:  # ``**`` may match zero components
            k += 1
            out.add(k)
    return out


def glob_regex(pattern: str) -> GlobMatcher:
    """A matcher for a glob over ``/``-separated relative paths.

    ``*`` and ``?`` stay within a component, ``**`` as a whole component
    spans any number of them (zero included), ``[...]``/``[!...]`` are
    character classes and ``{a,b}`` alternatives. Bounded: at most
    :data:`MAX_GLOB_ALTERNATIVES` alternatives, :data:`MAX_GLOBSTARS` ``**``
    components each (repeats collapse), :data:`MAX_GLOB_LENGTH` characters.

    >>> rx = glob_regex("src/**/*.py")
    >>> [bool(rx.fullmatch(p)) for p in ("src/a.py", "src/x/y/b.py", "a.py", "src/a.pyc")]
    [True, True, False, False]
    >>> bool(glob_regex("*.md").fullmatch("docs/a.md"))
    False

    Raises:
        ToolError: the pattern is past one of the bounds.
    """
    if len(pattern) > MAX_GLOB_LENGTH:
        raise ToolError.invalid_args(f"the glob is longer than {MAX_GLOB_LENGTH} characters")
    alternatives = []
    for each in expand_braces(pattern):
        segments: list[tuple[_Token, ...] | None] = []
        for segment in each.strip("/").split("/"):
            if segment == "**":
                if segments and segments[-1] is None:
                    continue
                segments.append(None)
            else:
                segments.append(_tokens(segment))
        if segments and segments[-1] is None:
            segments.append(("*",))  # a trailing ``**`` matches what is inside: one component or more
        if sum(s is None for s in segments) > MAX_GLOBSTARS:
            raise ToolError.invalid_args(f"the glob has more than {MAX_GLOBSTARS} '**' components")
        alternatives.append(tuple(segments))
    return GlobMatcher(pattern, tuple(alternatives))


__all__ = [
    "MAX_ENTRIES",
    "MAX_GLOBSTARS",
    "MAX_GLOB_ALTERNATIVES",
    "MAX_GLOB_LENGTH",
    "Entry",
    "GlobMatcher",
    "expand_braces",
    "glob_regex",
    "require_pathspec",
    "walk",
]
