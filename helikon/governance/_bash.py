"""The operator-aware Bash matcher: which programs does a command line run?

This module owns the pragmatic shell reading that deny rules, allow rules and
guard rules share (and that a Bash tool's own deny/allow lists should use). It
is not a POSIX shell parser; it follows the book's four steps:

1. **Split** the line into sub-commands on ``&&``, ``||``, ``;``, ``|``,
   ``|&``, ``&`` and newlines, outside quotes. The ``&`` of a redirection
   (``2>&1``, ``&>file``, ``>&2``) and the ``|`` of ``>|`` are not operators.
   Beyond the book, ``(``, ``)`` and backticks outside quotes split too, so a
   subshell ``(rm -rf /)`` or a substitution ``$(rm -rf /)`` / ```rm -rf /```
   outside double quotes is inspected as its own sub-command.
2. **Strip wrappers** with their options and option values: the book's fixed
   list ``timeout``, ``nice``, ``nohup``, ``stdbuf``, ``env`` (with its
   ``VAR=x`` assignments and ``-S`` split strings), ``command``, ``sudo``,
   ``doas``; plus the shell's own prefixes ``exec`` and ``time``, reserved
   words (``!``, ``{``, ``if``, ``then``, ``do``, ...) and leading ``VAR=x``
   assignments, which hide the program the same way. The table is data:
   :data:`WRAPPERS`.
3. **Unquote** the program token (``\\rm``, ``'rm'`` and ``r''m`` are ``rm``).
4. **Re-enter** ``bash -c '...'`` / ``sh -c '...'`` (also ``zsh``, ``dash``,
   ``ksh``) to :data:`MAX_SHELL_DEPTH` levels.

Known limitations (the book's "Scope & limitations", kept true here):

- Command substitution inside double quotes (``"$(...)"``, ``"`...`"``) is not
  inspected; :class:`Resolution` marks such a line ``opaque`` so allow rules
  fail closed on it.
- ``find -exec``/``-delete``, ``xargs``, ``eval`` and ``watch`` are not followed
  into their arguments; only the top-level program is matched.
- Variable-indirect commands (``$CMD arg``, ``eval "$VAR"``) are not resolved;
  the matcher sees the literal, unexpanded token. Globs and variables are not
  expanded; ``$'\\x72m'`` is not decoded.
- ``bash -c`` is followed only to a bounded depth (deeper payloads are
  ``opaque``).
- Heredoc bodies are read as commands (the line splitter does not know them),
  which errs on the side of matching; ``#`` comments are not recognised, with
  the same effect.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection
from typing import Final, final

import attrs

#: How many nested ``bash -c`` levels are followed (the top level is depth 0).
MAX_SHELL_DEPTH: Final = 3

#: Shells whose ``-c`` payload is re-read as a command line.
SHELLS: Final = frozenset({"bash", "dash", "ksh", "sh", "zsh"})

#: Reserved words stripped from the front of a sub-command (only when unquoted).
RESERVED_WORDS: Final = frozenset(
    {"!", "{", "}", "do", "done", "elif", "else", "esac", "fi", "if", "then", "until", "while"}
)


class RedirectKind(enum.Enum):
    """What a redirection does with its target."""

    #: ``>``, ``>|``, ``&>``, ``>&file`` and ``<>``: opens the target for writing.
    WRITE = "write"
    #: ``>>`` and ``&>>``: appends to the target.
    APPEND = "append"
    #: ``<``, ``<<`` and ``<<<``: reads (a heredoc's target is its delimiter).
    READ = "read"
    #: ``>&2``, ``2>&1``, ``<&0``, ``>&-``: duplicates or closes a descriptor.
    DUPLICATE = "duplicate"


@final
@attrs.frozen
class Redirect:
    """One redirection of a sub-command, its target unquoted."""

    kind: RedirectKind
    target: str

    @property
    def writes(self) -> bool:
        """Whether the redirection writes to a path (``WRITE`` or ``APPEND``)."""
        return self.kind in (RedirectKind.WRITE, RedirectKind.APPEND)


@final
@attrs.frozen
class SimpleCommand:
    """One sub-command after wrapper stripping and unquoting.

    ``depth`` counts the ``bash -c`` levels it was found under.
    """

    program: str
    args: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    depth: int = 0


@final
@attrs.frozen
class Resolution:
    """Every sub-command of a line, in order; ``opaque`` when some part of the
    line was left uninspected (a substitution in double quotes, a ``bash -c``
    deeper than the bound)."""

    commands: tuple[SimpleCommand, ...]
    opaque: bool = False


@final
@attrs.frozen
class Wrapper:
    """How to step over a wrapper program to the program it runs.

    Args:
        name: the wrapper's program name (matched on the basename).
        short_with_value: short options that take a value (``-u root``, ``-uroot``).
        long_with_value: long options that take a value (``--user root``).
        operands: positional operands before the program (``timeout``'s duration).
        assignments: whether ``VAR=x`` words may follow (``env``).
        numeric_options: whether ``-10`` is an option (``nice``'s legacy form).
        split_string: options whose value is a command line to re-split (``env -S``).
    """

    name: str
    short_with_value: str = ""
    long_with_value: frozenset[str] = frozenset()
    operands: int = 0
    assignments: bool = False
    numeric_options: bool = False
    split_string: frozenset[str] = frozenset()


#: The wrappers stripped before the program is read. ``sudo -h`` is help, not
#: ``-h host``, so ``h`` is deliberately absent from sudo's valued options.
WRAPPERS: Final[tuple[Wrapper, ...]] = (
    Wrapper("command"),
    Wrapper("doas", short_with_value="Cu"),
    Wrapper(
        "env",
        short_with_value="uCS",
        long_with_value=frozenset({"unset", "chdir", "split-string"}),
        assignments=True,
        split_string=frozenset({"-S", "--split-string"}),
    ),
    Wrapper("exec", short_with_value="a"),
    Wrapper("nice", short_with_value="n", long_with_value=frozenset({"adjustment"}), numeric_options=True),
    Wrapper("nohup"),
    Wrapper("stdbuf", short_with_value="ioe", long_with_value=frozenset({"input", "output", "error"})),
    Wrapper(
        "sudo",
        short_with_value="CDgpRrtTUu",
        long_with_value=frozenset(
            {"close-from", "chdir", "group", "host", "prompt", "chroot", "role", "type",
             "command-timeout", "other-user", "user"}
        ),
    ),
    Wrapper("time"),
    Wrapper("timeout", short_with_value="sk", long_with_value=frozenset({"signal", "kill-after"}), operands=1),
)

_WRAPPER_BY_NAME: Final = {w.name: w for w in WRAPPERS}
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


@attrs.frozen
class _Word:
    text: str
    #: Index in ``text`` of the first character that came from quoting or escaping.
    quoted_from: int

    @property
    def plain(self) -> bool:
        return self.quoted_from == len(self.text)


# -- splitting -----------------------------------------------------------------


def split_commands(command: str) -> tuple[str, ...]:
    """Split a command line into its sub-commands, quote-aware; empty ones are dropped.

    >>> split_commands("echo ok && rm -rf .")
    ('echo ok', 'rm -rf .')
    >>> split_commands("a; b | c || d |& e & f\\ng")
    ('a', 'b', 'c', 'd', 'e', 'f', 'g')
    >>> split_commands("make 2>&1 >/dev/null && echo 'x; y'")
    ('make 2>&1 >/dev/null', "echo 'x; y'")
    """
    return _split(command)[0]


def _split(command: str) -> tuple[tuple[str, ...], bool]:
    segments: list[str] = []
    buf: list[str] = []
    opaque = False
    i, n = 0, len(command)

    def cut() -> None:
        segment = "".join(buf).strip()
        buf.clear()
        if segment:
            segments.append(segment)

    while i < n:
        c = command[i]
        if c == "\\":
            buf.append(command[i : i + 2])
            i += 2
        elif c == "'" or (c == "$" and command.startswith("$'", i)):
            end = _closing_single(command, i + 1 if c == "'" else i + 2, escapes=c == "$")
            buf.append(command[i:end])
            i = end
        elif c == '"':
            j = i + 1
            while j < n and command[j] != '"':
                if command[j] == "`" or command.startswith("$(", j):
                    opaque = True
                j += 2 if command[j] == "\\" else 1
            buf.append(command[i : j + 1])
            i = j + 1
        elif c in "\n;()`":
            cut()
            i += 1
        elif c == "&":
            if command.startswith("&&", i):
                cut()
                i += 2
            elif (i > 0 and command[i - 1] in "<>") or command.startswith("&>", i):
                buf.append(c)  # part of a redirection: >&, <&, &>
                i += 1
            else:
                cut()
                i += 1
        elif c == "|":
            if i > 0 and command[i - 1] == ">":
                buf.append(c)  # >| (clobber) is a redirection
                i += 1
            else:
                cut()
                i += 2 if command.startswith(("||", "|&"), i) else 1
        else:
            buf.append(c)
            i += 1
    cut()
    return tuple(segments), opaque


def _closing_single(s: str, start: int, *, escapes: bool) -> int:
    """Index just past the ``'`` closing a single-quoted run that starts at ``start``."""
    j = start
    while j < len(s) and s[j] != "'":
        j += 2 if escapes and s[j] == "\\" else 1
    return min(j + 1, len(s))


# -- one sub-command -------------------------------------------------------------


def _read_word(s: str, i: int) -> tuple[_Word, int]:
    """Read one word from ``i``, removing quotes and escapes; stop at a blank or redirection."""
    out: list[str] = []
    quoted_from: int | None = None

    def mark() -> None:
        nonlocal quoted_from
        if quoted_from is None:
            quoted_from = len("".join(out))

    n = len(s)
    while i < n:
        c = s[i]
        if c in " \t\n<>" or (c == "&" and s.startswith("&>", i)):
            break
        if c == "\\":
            if i + 1 < n and s[i + 1] != "\n":  # backslash-newline is a line continuation
                mark()
                out.append(s[i + 1])
            i += 2
        elif c == "'":
            mark()
            close = s.find("'", i + 1)
            close = n if close < 0 else close
            out.append(s[i + 1 : close])
            i = close + 1
        elif c == "$" and s.startswith("$'", i):
            mark()
            j = i + 2
            while j < n and s[j] != "'":
                if s[j] == "\\" and j + 1 < n:
                    j += 1
                out.append(s[j])
                j += 1
            i = j + 1
        elif c == '"':
            mark()
            j = i + 1
            while j < n and s[j] != '"':
                if s[j] == "\\" and j + 1 < n and s[j + 1] in '"\\$`\n':
                    j += 1
                    if s[j] == "\n":
                        j += 1
                        continue
                out.append(s[j])
                j += 1
            i = j + 1
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    return _Word(text, len(text) if quoted_from is None else quoted_from), i


_OPERATORS: Final = (  # longest first
    ("&>>", RedirectKind.APPEND),
    ("<<<", RedirectKind.READ),
    ("<<-", RedirectKind.READ),
    ("&>", RedirectKind.WRITE),
    (">>", RedirectKind.APPEND),
    (">|", RedirectKind.WRITE),
    (">&", RedirectKind.WRITE),  # >&word writes; >&2 and >&- duplicate (decided below)
    ("<<", RedirectKind.READ),
    ("<>", RedirectKind.WRITE),
    ("<&", RedirectKind.DUPLICATE),
    (">", RedirectKind.WRITE),
    ("<", RedirectKind.READ),
)


def _read_redirect(s: str, i: int) -> tuple[Redirect | None, int]:
    op, kind = next((op, kind) for op, kind in _OPERATORS if s.startswith(op, i))
    i += len(op)
    while i < len(s) and s[i] in " \t":
        i += 1
    target, i = _read_word(s, i)
    if op == ">&" and (target.text in ("", "-") or target.text.rstrip("-").isdigit()):
        kind = RedirectKind.DUPLICATE
    if not target.text and kind is not RedirectKind.DUPLICATE:
        return None, i
    return Redirect(kind, "" if kind is RedirectKind.DUPLICATE else target.text), i


def _tokenize(segment: str) -> tuple[list[_Word], tuple[Redirect, ...]]:
    words: list[_Word] = []
    redirects: list[Redirect] = []
    i, n = 0, len(segment)
    while i < n:
        if segment[i] in " \t\n" or segment.startswith("\\\n", i):
            i += 2 if segment[i] == "\\" else 1
            continue
        if segment[i] in "<>" or segment.startswith("&>", i):
            redirect, i = _read_redirect(segment, i)
        else:
            word, i = _read_word(segment, i)
            at_operator = i < n and segment[i] in "<>"
            if at_operator and word.plain and word.text.isdigit():
                redirect, i = _read_redirect(segment, i)  # "2>file": the digits are the descriptor
            else:
                words.append(word)
                continue
        if redirect is not None:
            redirects.append(redirect)
    return words, tuple(redirects)


def _basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def _is_assignment(word: _Word) -> bool:
    match = _ASSIGNMENT.match(word.text)
    return match is not None and match.end() <= word.quoted_from


def _skip_wrapper(spec: Wrapper, words: list[_Word], i: int) -> tuple[list[_Word], int]:
    """Step over ``spec``'s options and operands starting at ``i`` (just after its name)."""
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if text == "-" and spec.assignments:  # ``env -`` is ``env -i``
            i += 1
        elif text.startswith("--") and len(text) > 2:
            name, has_value, value = text[2:].partition("=")
            takes = name in spec.long_with_value and not has_value
            if text.split("=", 1)[0] in spec.split_string:
                payload = value if has_value else (words[i + 1].text if i + 1 < len(words) else "")
                rest = words[i + (1 if has_value else 2) :]
                words, i = [*words[:i], *_tokenize(payload)[0], *rest], i
                continue
            i += 2 if takes else 1
        elif text.startswith("-") and len(text) > 1:
            if spec.numeric_options and text[1:].isdigit():
                i += 1
                continue
            for k, flag in enumerate(text[1:], start=2):
                if flag in spec.short_with_value:
                    value = text[k:]
                    if f"-{flag}" in spec.split_string:
                        payload = value or (words[i + 1].text if i + 1 < len(words) else "")
                        rest = words[i + (1 if value else 2) :]
                        words = [*words[:i], *_tokenize(payload)[0], *rest]
                        break
                    i += 1 if value else 2
                    break
            else:
                i += 1
        elif spec.assignments and _is_assignment(words[i]):
            i += 1
        else:
            break
    return words, min(i + spec.operands, len(words))


def parse_command(segment: str, depth: int = 0) -> SimpleCommand | None:
    """Read one sub-command: strip reserved words, assignments and wrappers; unquote.

    Returns None when nothing is left to run (an empty segment, ``fi``, a bare
    assignment).

    >>> cmd = parse_command("sudo -u root FOO=1 nice -n 5 'rm' -rf / 2>/dev/null")
    >>> cmd.program, cmd.args, [r.target for r in cmd.redirects]
    ('rm', ('-rf', '/'), ['/dev/null'])
    >>> parse_command("timeout -s KILL 5s env -i PATH=/bin \\\\rm x").program
    'rm'
    >>> parse_command("fi") is None
    True
    """
    words, redirects = _tokenize(segment)
    i = 0
    while i < len(words):
        word = words[i]
        wrapper = _WRAPPER_BY_NAME.get(_basename(word.text))
        if (word.plain and word.text in RESERVED_WORDS) or _is_assignment(word):
            i += 1
        elif wrapper is not None:
            words, i = _skip_wrapper(wrapper, words, i + 1)
        else:
            break
    if i >= len(words):
        return None
    return SimpleCommand(words[i].text, tuple(w.text for w in words[i + 1 :]), redirects, depth)


def shell_payload(command: SimpleCommand) -> str | None:
    """The command line a ``bash -c`` / ``sh -c`` sub-command runs, if it is one.

    >>> shell_payload(SimpleCommand("bash", ("-lc", "rm -rf /")))
    'rm -rf /'
    >>> shell_payload(SimpleCommand("bash", ("script.sh",))) is None
    True
    """
    if _basename(command.program) not in SHELLS:
        return None
    wants_payload = False
    args = command.args
    k = 0
    while k < len(args):
        arg = args[k]
        if arg == "--":
            k += 1
            break
        if arg in ("-o", "+o", "-O", "+O"):
            k += 2
        elif arg.startswith("--"):
            k += 1
        elif len(arg) > 1 and arg[0] in "-+":
            wants_payload = wants_payload or (arg[0] == "-" and "c" in arg[1:])
            k += 1
        else:
            break
    return args[k] if wants_payload and k < len(args) else None


def resolve(command: str, max_depth: int = MAX_SHELL_DEPTH) -> Resolution:
    """Every sub-command ``command`` runs, following ``bash -c`` to ``max_depth``.

    >>> [c.program for c in resolve("echo ok && sudo rm -rf / ; bash -c 'ls | wc -l'").commands]
    ['echo', 'rm', 'bash', 'ls', 'wc']
    >>> resolve('git commit -m "$(cat msg)"').opaque
    True
    """

    def walk(text: str, depth: int) -> Resolution:
        segments, opaque = _split(text)
        found: list[SimpleCommand] = []
        for segment in segments:
            parsed = parse_command(segment, depth)
            if parsed is None:
                continue
            found.append(parsed)
            payload = shell_payload(parsed)
            if payload is not None and depth < max_depth:
                inner = walk(payload, depth + 1)
                found.extend(inner.commands)
                opaque = opaque or inner.opaque
            elif payload is not None:
                opaque = True
        return Resolution(tuple(found), opaque)

    return walk(command, 0)


def program_matches(program: str, wanted: str) -> bool:
    """Whether a resolved ``program`` is ``wanted`` for a *deny* decision.

    Lenient on purpose, since a deny that matches too much errs safe: a path
    (``/bin/rm``) matches by its basename and case is ignored.

    >>> program_matches("/usr/bin/RM", "rm"), program_matches("rmdir", "rm")
    (True, False)
    """
    return program == wanted or _basename(program).casefold() == _basename(wanted).casefold()


def runs_any(command: str, programs: Collection[str]) -> bool:
    """Deny semantics: whether any sub-command's program is one of ``programs``.

    >>> runs_any("bash -c 'rm -rf /'", {"rm"})
    True
    """
    return any(program_matches(c.program, p) for c in resolve(command).commands for p in programs)


def runs_only(command: str, programs: Collection[str]) -> bool:
    """Allow semantics, fail closed: whether every sub-command's program is in ``programs``.

    The comparison is exact (``/tmp/git`` is not ``git``); a line with no
    sub-command, or an ``opaque`` one, is not allowed.

    >>> runs_only("git add . && git commit -m wip", {"git"})
    True
    >>> runs_only("git status; rm -rf .", {"git"})
    False
    """
    resolution = resolve(command)
    if resolution.opaque or not resolution.commands:
        return False
    return all(c.program in programs for c in resolution.commands)


__all__ = [
    "MAX_SHELL_DEPTH",
    "RESERVED_WORDS",
    "SHELLS",
    "WRAPPERS",
    "Redirect",
    "RedirectKind",
    "Resolution",
    "SimpleCommand",
    "Wrapper",
    "parse_command",
    "program_matches",
    "resolve",
    "runs_any",
    "runs_only",
    "shell_payload",
    "split_commands",
]
