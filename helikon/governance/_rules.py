"""Deny and allow rules: what they match and how.

A rule has one of four forms, the same for :class:`DenyRule` and
:class:`AllowRule`:

- ``.tool(name)``: the tool called exactly ``name``;
- ``.bash_command(program)``: a Bash call by the programs its command runs
  (see :mod:`helikon.governance._bash`);
- ``.read(glob)``: a read tool's path;
- ``.edit(glob)``: a write/edit tool's path.

The two kinds differ in how a compound call matches, and each errs safe:

- a **deny** rule matches when *any* sub-command runs the program (``echo ok
  && rm -rf .`` is an ``rm`` call) or *any* path argument matches;
- an **allow** rule matches only when *every* sub-command runs exactly that
  program and *every* path argument matches, and never for an empty or opaque
  command: a mixed compound command fails closed. Allow rules apply in every
  mode (even ``DONT_ASK``), so they are conservative: a sub-command with a
  ``VAR=x`` assignment (``PATH=.:$PATH git``, ``GIT_SSH_COMMAND=... git``), a
  wrapper other than ``time``/``nice``/``nohup``/``timeout``/``stdbuf``/``ionice``/``command``
  (``sudo git``, ``env git``), a redirect-only part or a command string run in
  turn is not pre-approved.

A deny rule on a command line the matcher cannot read in full (``sh script``,
``$CMD x``, ``cat x | sh``) neither matches nor passes: :meth:`DenyRule.check`
says UNKNOWN and the permission pipeline asks the approval handler.

Which arguments carry paths and commands is data, :class:`ToolArguments`.
:data:`DEFAULT_TOOL_ARGUMENTS` names the sandboxed tools: ``Read`` reads
``path``/``file_path``; ``Glob`` and ``Grep`` read the directory ``path``
(and leave out, themselves, the files below it that read rules protect);
``Write`` and ``Edit`` write ``path``/``file_path`` (and ``Edit`` reads it:
read rules cover it, since a failed match tells what the file holds);
``Bash`` runs
``command``. A tool missing from the mapping is never matched by
the path and Bash forms (only by ``.tool``), and path rules do not look inside
Bash commands.

Path globs are gitignore-style and purely lexical (advisory, not a sandbox:
the real boundary is the sandboxed tools' root):

- a pattern without a ``/`` matches at any depth (``.env``, ``*.pem``);
  a pattern with a ``/`` (leading or inside) is anchored to the root
  (``src/**``, ``/build``); a trailing ``/`` (``build/``) matches only what is
  inside a directory of that name;
- ``*`` and ``?`` stay within a path component, ``**`` spans components,
  ``[abc]``/``[!abc]`` are character classes;
- as in gitignore, a pattern naming a directory also matches what is in it;
- the candidate path is cleaned first: ``\\`` becomes ``/``, ``.`` components
  go, ``..`` collapses (a leading ``..`` survives and never matches an
  anchored pattern), and a leading ``/`` is dropped (absolute paths are
  matched from the root); matching is case-insensitive.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Final, Self, TypeAlias, assert_never, final

import attrs

from helikon._json import JsonValue
from helikon.governance._bash import Verdict, check_runs, runs_only

# -- which arguments carry paths and commands ------------------------------------


class ArgumentRole(enum.Enum):
    """What a tool argument holds, as far as the rules care."""

    #: A path the tool reads (``.read`` rules).
    READ_PATH = "read_path"
    #: A path the tool writes or edits (``.edit`` rules, the write guards).
    WRITE_PATH = "write_path"
    #: A shell command line (``.bash_command`` rules, the command guards).
    COMMAND = "command"


@final
@attrs.frozen
class ToolArgument:
    """Tool ``tool`` carries a value of ``role`` in any of the arguments ``names``."""

    tool: str
    role: ArgumentRole
    names: tuple[str, ...]


@final
@attrs.frozen
class ToolArguments:
    """Which tools' arguments the path and Bash rules read.

    Extend the defaults for tools of your own:

    >>> args = DEFAULT_TOOL_ARGUMENTS.with_tool("NotebookEdit", ArgumentRole.WRITE_PATH, "notebook_path")
    >>> args.values("NotebookEdit", ArgumentRole.WRITE_PATH, {"notebook_path": "a.ipynb"})
    ('a.ipynb',)
    """

    entries: tuple[ToolArgument, ...]

    def with_tool(self, tool: str, role: ArgumentRole, *names: str) -> ToolArguments:
        """These arguments plus tool ``tool`` carrying ``role`` in ``names``."""
        return ToolArguments((*self.entries, ToolArgument(tool, role, tuple(names))))

    def handles(self, tool: str, role: ArgumentRole) -> bool:
        """Whether ``tool`` has arguments of ``role``."""
        return any(e.tool == tool and e.role is role for e in self.entries)

    def values(self, tool: str, role: ArgumentRole, args: JsonValue) -> tuple[str, ...]:
        """The string values (or strings in list values) of ``tool``'s ``role`` arguments.

        >>> DEFAULT_TOOL_ARGUMENTS.values("Edit", ArgumentRole.WRITE_PATH, {"file_path": "a.py"})
        ('a.py',)
        """
        if not isinstance(args, Mapping):
            return ()
        found: list[str] = []
        for entry in self.entries:
            if entry.tool != tool or entry.role is not role:
                continue
            for name in entry.names:
                value = args.get(name)
                if isinstance(value, str):
                    found.append(value)
                elif isinstance(value, Sequence):
                    found.extend(v for v in value if isinstance(v, str))
        return tuple(found)


_PATH_NAMES: Final = ("path", "file_path")

#: The sandboxed tools' names and arguments (the book's ``Read``, ``Write``,
#: ``Edit`` and ``Bash``). ``Edit`` reads its file as well as writing it (whether
#: ``old_string`` matches tells what the file holds), so read rules cover it.
DEFAULT_TOOL_ARGUMENTS: Final = ToolArguments(
    (
        ToolArgument("Read", ArgumentRole.READ_PATH, _PATH_NAMES),
        ToolArgument("Write", ArgumentRole.WRITE_PATH, _PATH_NAMES),
        ToolArgument("Edit", ArgumentRole.WRITE_PATH, _PATH_NAMES),
        ToolArgument("Edit", ArgumentRole.READ_PATH, _PATH_NAMES),
        ToolArgument("Bash", ArgumentRole.COMMAND, ("command",)),
        ToolArgument("Glob", ArgumentRole.READ_PATH, ("path",)),
        ToolArgument("Grep", ArgumentRole.READ_PATH, ("path",)),
    )
)

# -- paths ------------------------------------------------------------------------


def clean_path(path: str) -> str:
    """Lexically clean ``path``: ``\\`` to ``/``, drop ``.`` and the root, collapse ``..``.

    >>> clean_path("./src/../.git/config"), clean_path("a/../../b"), clean_path("/etc//passwd")
    ('.git/config', '../b', 'etc/passwd')
    """
    parts: list[str] = []
    for component in path.replace("\\", "/").split("/"):
        if component in ("", "."):
            continue
        if component == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(component)
    return "/".join(parts)


def _class_regex(pattern: str, start: int) -> tuple[str, int] | None:
    end = pattern.find("]", start + 2 if pattern[start + 1 : start + 2] in ("!", "^") else start + 1)
    if end < 0:
        return None
    body = pattern[start + 1 : end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    escaped = "".join("\\" + ch if ch in "\\^[]" else ch for ch in body)
    return ("[^/" + escaped + "]" if negate else "[" + escaped + "]"), end + 1


@functools.lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    pattern = pattern.replace("\\", "/")
    pattern = pattern.removeprefix("./")
    directory_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    anchored = "/" in pattern
    pattern = pattern.lstrip("/")
    if not pattern:
        return re.compile(r"(?!)")
    out: list[str] = [] if anchored else ["(?:.*/)?"]  # unanchored: at any depth
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/"):
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if i + 2 == len(pattern):
                out.append(".*")
                i += 2
                continue
        ch = pattern[i]
        if ch == "*":
            out.append("[^/]*")
            i += 2 if pattern.startswith("**", i) else 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[" and (cls := _class_regex(pattern, i)) is not None:
            out.append(cls[0])
            i = cls[1]
        else:
            out.append(re.escape(ch))
            i += 1
    suffix = "/.*" if directory_only else "(?:/.*)?"
    return re.compile("".join(out) + suffix, re.IGNORECASE | re.DOTALL)


def path_matches(pattern: str, path: str) -> bool:
    """Whether ``path`` (lexically cleaned) matches the gitignore-style ``pattern``.

    >>> path_matches(".env", "config/.ENV"), path_matches("src/**", "lib/src/a.py")
    (True, False)
    >>> path_matches("src/**", "src/../.git/config"), path_matches("*.pem", "keys/server.pem")
    (False, True)
    """
    return _glob_regex(pattern).fullmatch(clean_path(path)) is not None


# -- matchers -------------------------------------------------------------------------


@final
@attrs.frozen
class ToolNamed:
    """The tool called exactly ``name``."""

    name: str


@final
@attrs.frozen
class BashProgram:
    """A Bash call by the program its sub-commands run."""

    program: str


@final
@attrs.frozen
class ReadPath:
    """A read tool's path, by gitignore-style glob."""

    pattern: str


@final
@attrs.frozen
class EditPath:
    """A write/edit tool's path, by gitignore-style glob."""

    pattern: str


#: What a deny, allow or guard rule looks at.
RuleMatcher: TypeAlias = ToolNamed | BashProgram | ReadPath | EditPath


def rule_verdict(matcher: RuleMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> Verdict:
    """Deny semantics: YES when any sub-command or any path argument matches;
    UNKNOWN when no Bash sub-command the matcher sees matches but part of the
    line cannot be read (see :func:`~helikon.governance.check_runs`).

    >>> rule_verdict(BashProgram("rm"), "Bash", {"command": "echo 'rm x' | sh"}, DEFAULT_TOOL_ARGUMENTS)
    <Verdict.YES: 'yes'>
    >>> rule_verdict(BashProgram("rm"), "Bash", {"command": "sh script.sh"}, DEFAULT_TOOL_ARGUMENTS)
    <Verdict.UNKNOWN: 'unknown'>
    """
    match matcher:
        case ToolNamed(name):
            return Verdict.YES if tool == name else Verdict.NO
        case BashProgram(program):
            verdicts = {check_runs(c, (program,)) for c in arguments.values(tool, ArgumentRole.COMMAND, args)}
            for verdict in (Verdict.YES, Verdict.UNKNOWN):
                if verdict in verdicts:
                    return verdict
            return Verdict.NO
        case ReadPath(pattern):
            paths = arguments.values(tool, ArgumentRole.READ_PATH, args)
            return Verdict.YES if any(path_matches(pattern, p) for p in paths) else Verdict.NO
        case EditPath(pattern):
            paths = arguments.values(tool, ArgumentRole.WRITE_PATH, args)
            return Verdict.YES if any(path_matches(pattern, p) for p in paths) else Verdict.NO
        case _:
            assert_never(matcher)


def matches_any(matcher: RuleMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> bool:
    """Deny semantics, failing closed: any sub-command or any path argument matching
    is enough, and a command line that cannot be read in full matches.

    >>> matches_any(BashProgram("rm"), "Bash", {"command": "echo ok && rm -rf ."}, DEFAULT_TOOL_ARGUMENTS)
    True
    """
    return rule_verdict(matcher, tool, args, arguments) is not Verdict.NO


def matches_all(matcher: RuleMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> bool:
    """Allow semantics, fail closed: every sub-command and every path must match, and
    there must be at least one.

    >>> matches_all(BashProgram("git"), "Bash", {"command": "git pull && make"}, DEFAULT_TOOL_ARGUMENTS)
    False
    """
    match matcher:
        case ToolNamed(name):
            return tool == name
        case BashProgram(program):
            commands = arguments.values(tool, ArgumentRole.COMMAND, args)
            return bool(commands) and all(runs_only(command, (program,)) for command in commands)
        case ReadPath(pattern):
            if arguments.values(tool, ArgumentRole.WRITE_PATH, args):
                return False  # a read rule never pre-approves a write (``Edit`` reads and writes)
            paths = arguments.values(tool, ArgumentRole.READ_PATH, args)
            return bool(paths) and all(path_matches(pattern, p) for p in paths)
        case EditPath(pattern):
            paths = arguments.values(tool, ArgumentRole.WRITE_PATH, args)
            return bool(paths) and all(path_matches(pattern, p) for p in paths)
        case _:
            assert_never(matcher)


def describe_matcher(matcher: RuleMatcher) -> str:
    """A short human description of ``matcher``, used in denial reasons.

    >>> describe_matcher(BashProgram("rm"))
    "bash command 'rm'"
    """
    match matcher:
        case ToolNamed(name):
            return f"tool {name!r}"
        case BashProgram(program):
            return f"bash command {program!r}"
        case ReadPath(pattern):
            return f"read {pattern!r}"
        case EditPath(pattern):
            return f"edit {pattern!r}"
        case _:
            assert_never(matcher)


# -- the rules -----------------------------------------------------------------------------


@attrs.frozen
class _Rule:
    matcher: RuleMatcher

    @classmethod
    def tool(cls, name: str) -> Self:
        """Match the tool called exactly ``name`` (``"Bash"``)."""
        return cls(ToolNamed(name))

    @classmethod
    def bash_command(cls, program: str) -> Self:
        """Match Bash calls by program (operator-, wrapper- and ``bash -c``-aware)."""
        return cls(BashProgram(program))

    @classmethod
    def read(cls, glob: str) -> Self:
        """Match reads whose path matches the gitignore-style ``glob``."""
        return cls(ReadPath(glob))

    @classmethod
    def edit(cls, glob: str) -> Self:
        """Match writes and edits whose path matches the gitignore-style ``glob``."""
        return cls(EditPath(glob))

    def describe(self) -> str:
        """The rule in words, for denial reasons and logs."""
        return describe_matcher(self.matcher)


@final
@attrs.frozen
class DenyRule(_Rule):
    """A first-class deny, checked before everything else, in every mode.

    >>> rule = DenyRule.bash_command("rm")
    >>> [rule.matches("Bash", {"command": c}) for c in ("sudo rm -rf /", "bash -c 'rm -rf /'", "ls")]
    [True, True, False]
    >>> DenyRule.read(".env").matches("Read", {"path": "app/.env"})
    True
    """

    def matches(self, tool: str, args: JsonValue, arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS) -> bool:
        """Whether this rule denies ``tool`` called with ``args`` (any part matching;
        a command line that cannot be read in full matches)."""
        return matches_any(self.matcher, tool, args, arguments)

    def check(self, tool: str, args: JsonValue, arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS) -> Verdict:
        """YES (deny), NO, or UNKNOWN: part of a command line cannot be read, and
        the permission pipeline asks."""
        return rule_verdict(self.matcher, tool, args, arguments)


@final
@attrs.frozen
class AllowRule(_Rule):
    """A pre-approval, checked after deny and guard rules and before the mode.

    >>> rule = AllowRule.bash_command("git")
    >>> [rule.matches("Bash", {"command": c}) for c in ("git add . && git push", "git status; rm x")]
    [True, False]
    >>> AllowRule.edit("src/**").matches("Write", {"path": "src/../secrets.txt"})
    False
    """

    def matches(self, tool: str, args: JsonValue, arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS) -> bool:
        """Whether this rule pre-approves ``tool`` called with ``args`` (every part matching)."""
        return matches_all(self.matcher, tool, args, arguments)


__all__ = [
    "DEFAULT_TOOL_ARGUMENTS",
    "AllowRule",
    "ArgumentRole",
    "BashProgram",
    "DenyRule",
    "EditPath",
    "ReadPath",
    "RuleMatcher",
    "ToolArgument",
    "ToolArguments",
    "ToolNamed",
    "clean_path",
    "describe_matcher",
    "matches_all",
    "matches_any",
    "rule_verdict",
    "path_matches",
]
