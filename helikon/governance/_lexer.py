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
import itertools
import re
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
    #: The operator as written (``>``, ``2>``'s ``>``, ``<<<``, ...); ``""`` when built by hand.
    operator: str = ""

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
    #: One ``"1"`` (quoted or escaped) or ``"0"`` per character of ``text``; ``""``
    #: means "quoted from ``quoted_from`` on".
    mask: str = ""

    @property
    def plain(self) -> bool:
        return self.quoted_from == len(self.text)

    def quoted_at(self, index: int) -> bool:
        """Whether the character at ``index`` came from quoting or escaping."""
        if self.mask:
            return self.mask[index] == "1"
        return index >= self.quoted_from


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
    """The sub-commands of ``command`` and whether some part could not be read.

    A command substitution inside double quotes (``"$(...)"``, ``"`...`"``)
    is read too: its sub-commands follow the line's own. ``opaque`` is True
    when such a substitution is not closed.
    """
    segments, inner, opaque = _split(command)
    for text in inner:
        more, deeper = split_line(text)
        segments.extend(more)
        opaque = opaque or deeper
    return tuple(segments), opaque


def _substitution_end(s: str, start: int) -> int:
    """Index of the ``)`` closing a ``$(`` whose body starts at ``start`` (-1 if none)."""
    depth, j, n = 1, start, len(s)
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            j = _closing_single(s, j + 1, escapes=False)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def _split(command: str) -> tuple[list[str], list[str], bool]:
    segments: list[str] = []
    inner: list[str] = []
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
                if command.startswith("$(", j):
                    end = _substitution_end(command, j + 2)
                    if end < 0:
                        opaque = True
                        j = n
                        break
                    inner.append(command[j + 2 : end])
                    j = end + 1
                    continue
                if command[j] == "`":
                    end = command.find("`", j + 1)
                    if end < 0:
                        opaque = True
                        j = n
                        break
                    inner.append(command[j + 1 : end])
                    j = end + 1
                    continue
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
    return segments, inner, opaque


def _closing_single(s: str, start: int, *, escapes: bool) -> int:
    """Index just past the ``'`` closing a single-quoted run that starts at ``start``."""
    j = start
    while j < len(s) and s[j] != "'":
        j += 2 if escapes and s[j] == "\\" else 1
    return min(j + 1, len(s))


# -- words and redirections ------------------------------------------------------


_ANSI_C: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_c(s: str, j: int) -> tuple[str, int]:
    """Decode the escape at ``s[j]`` (just past a backslash) inside ``$'...'``."""
    c = s[j]
    if c in _ANSI_C:
        return _ANSI_C[c], j + 1
    digits = {"x": (16, 2), "u": (16, 4), "U": (16, 8)}.get(c)
    if digits is not None:
        base, most = digits
        k = j + 1
        while k < len(s) and k < j + 1 + most and s[k] in "0123456789abcdefABCDEF":
            k += 1
        if k == j + 1:
            return "\\" + c, j + 1
        return chr(min(int(s[j + 1 : k], base), 0x10FFFF)), k
    if c in "01234567":
        k = j
        while k < len(s) and k < j + 3 and s[k] in "01234567":
            k += 1
        return chr(int(s[j:k], 8) & 0xFF), k
    if c == "c" and j + 1 < len(s):
        return chr(ord(s[j + 1]) & 0x1F), j + 2
    return "\\" + c, j + 1


def _read_word(s: str, i: int) -> tuple[Word, int]:
    """Read one word from ``i``, removing quotes and escapes; stop at a blank or redirection."""
    out: list[str] = []
    mask: list[str] = []

    def add(text: str, quoted: bool) -> None:
        out.append(text)
        mask.append(("1" if quoted else "0") * len(text))

    n = len(s)
    while i < n:
        c = s[i]
        if c in " \t\n<>" or (c == "&" and s.startswith("&>", i)):
            break
        if c == "\\":
            if i + 1 < n and s[i + 1] != "\n":  # backslash-newline is a line continuation
                add(s[i + 1], True)
            i += 2
        elif c == "'":
            close = s.find("'", i + 1)
            close = n if close < 0 else close
            add(s[i + 1 : close], True)
            i = close + 1
        elif c == "$" and s.startswith("$'", i):
            j = i + 2
            while j < n and s[j] != "'":
                if s[j] == "\\" and j + 1 < n:
                    decoded, j = _ansi_c(s, j + 1)
                    add(decoded, True)
                    continue
                add(s[j], True)
                j += 1
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                if s[j] == "\\" and j + 1 < n and s[j + 1] in '"\\$`\n':
                    j += 1
                    if s[j] == "\n":
                        j += 1
                        continue
                add(s[j], True)
                j += 1
            i = j + 1
        else:
            add(c, False)
            i += 1
    text = "".join(out)
    flags = "".join(mask)
    quoted_from = flags.find("1")
    return Word(text, len(text) if quoted_from < 0 else quoted_from, flags), i


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
    return Redirect(kind, "" if kind is RedirectKind.DUPLICATE else target.text, op), i


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


#: How many words brace expansion may make of one sub-command before it is opaque.
MAX_EXPANSION: Final = 256

# -- brace expansion -----------------------------------------------------------


def _sequence(body: str) -> list[str] | None:
    """``a..e``, ``1..5`` or ``1..9..2`` as bash expands them (capped), or None."""
    parts = body.split("..")
    if len(parts) not in (2, 3):
        return None
    step = 1
    if len(parts) == 3:
        if not re.fullmatch(r"-?\d+", parts[2]):
            return None
        step = abs(int(parts[2])) or 1
    first, last = parts[0], parts[1]
    if re.fullmatch(r"-?\d+", first) and re.fullmatch(r"-?\d+", last):
        a, b = int(first), int(last)
        numbers = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return [str(n) for n in numbers[: MAX_EXPANSION + 1]]
    if len(first) == 1 and len(last) == 1:
        a, b = ord(first), ord(last)
        codes = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return [chr(c) for c in codes[: MAX_EXPANSION + 1]]
    return None


def _brace_alternatives(text: str, mask: str) -> list[tuple[str, str]] | None:
    """The words one brace expansion of ``text`` makes, or None if it has none (one pass)."""
    stack: list[int] = []
    pairs: dict[int, tuple[int, list[int]]] = {}
    commas: dict[int, list[int]] = {}
    for j, char in enumerate(text):
        if mask[j] == "1":
            continue
        if char == "{":
            stack.append(j)
            commas[j] = []
        elif char == "}" and stack:
            start = stack.pop()
            pairs[start] = (j, commas[start])
        elif char == "," and stack:
            commas[stack[-1]].append(j)
    for start in sorted(pairs):
        if start and text[start - 1] == "$" and mask[start - 1] == "0":
            continue  # ``${VAR}`` is a parameter, not a brace expansion
        end, inner = pairs[start]
        if inner:
            bounds = [start, *inner, end]
            alternatives = [(text[a + 1 : b], mask[a + 1 : b]) for a, b in itertools.pairwise(bounds)]
        else:
            sequence = _sequence(text[start + 1 : end]) if "1" not in mask[start:end] else None
            if sequence is None:
                continue
            alternatives = [(item, "0" * len(item)) for item in sequence]
        prefix, prefix_mask = text[:start], mask[:start]
        suffix, suffix_mask = text[end + 1 :], mask[end + 1 :]
        return [(prefix + t + suffix, prefix_mask + m + suffix_mask) for t, m in alternatives]
    return None


def expand_braces(word: Word, limit: int = MAX_EXPANSION) -> tuple[Word, ...] | None:
    """The words brace expansion makes of ``word`` (None past ``limit`` words).

    >>> [w.text for w in expand_braces(Word("{rm,-rf,x}", 10))]
    ['rm', '-rf', 'x']
    >>> [w.text for w in expand_braces(Word("/*{,}", 5))]
    ['/*', '/*']
    """
    mask = word.mask or "0" * word.quoted_from + "1" * (len(word.text) - word.quoted_from)
    if "{" not in word.text:
        return (word,)
    done: list[tuple[str, str]] = []
    work = [(word.text, mask)]
    while work:
        text, text_mask = work.pop()
        alternatives = _brace_alternatives(text, text_mask)
        if alternatives is None:
            if text or "1" in text_mask or (not done and not work and not mask.count("0")):
                done.append((text, text_mask))
        else:
            work.extend(reversed(alternatives))
        if len(done) + len(work) > limit:
            return None
    return tuple(Word(t, m.find("1") if "1" in m else len(t), m) for t, m in done)


__all__ = [
    "MAX_EXPANSION",
    "Redirect",
    "RedirectKind",
    "Word",
    "expand_braces",
    "split_commands",
    "split_line",
    "tokenize",
]
