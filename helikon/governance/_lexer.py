"""Reading a shell command line: splitting it into sub-commands, and one
sub-command into words and redirections.

This module owns the quoting rules the Bash matcher (:mod:`._bash`) relies on:
single quotes, double quotes (with their backslash escapes), ``$'...'`` and
backslash escapes outside quotes, and line continuations. Operators inside
quotes are text. It knows nothing of programs or wrappers.

Splitting happens on ``&&``, ``||``, ``;``, ``|``, ``|&``, ``&`` and newlines
outside quotes (the book's list), and also on ``(``, ``)`` and backticks, so
subshells and command substitutions outside double quotes become
sub-commands of their own. The ``&`` of a redirection (``2>&1``, ``&>file``,
``>&2``) and the ``|`` of ``>|`` are not operators. A command substitution
inside double quotes is not inspected; the split reports it as *opaque*.
"""

from __future__ import annotations

import enum
from typing import Final, final

import attrs


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
class Word:
    """A word with quotes and escapes removed."""

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
    return split_line(command)[0]


def split_line(command: str) -> tuple[tuple[str, ...], bool]:
    """The sub-commands of ``command`` and whether a substitution in double quotes hid some."""
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


# -- words and redirections ------------------------------------------------------


def _read_word(s: str, i: int) -> tuple[Word, int]:
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
    return Word(text, len(text) if quoted_from is None else quoted_from), i


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


def tokenize(segment: str) -> tuple[list[Word], tuple[Redirect, ...]]:
    """The words and redirections of one sub-command."""
    words: list[Word] = []
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


__all__ = ["Redirect", "RedirectKind", "Word", "split_commands", "split_line", "tokenize"]
