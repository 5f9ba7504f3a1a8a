"""The operator-aware Bash matcher: which programs does a command line run?

This module owns the pragmatic shell reading that deny rules, allow rules and
guard rules share (and that a Bash tool's own deny/allow lists should use). It
is not a POSIX shell parser; it follows the book's four steps:

1. **Split** (:mod:`._lexer`) the line into sub-commands on ``&&``, ``||``, ``;``, ``|``,
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

import re
from collections.abc import Collection
from typing import Final, final

import attrs

from helikon.governance._lexer import Redirect, Word, split_line, tokenize

#: How many nested ``bash -c`` levels are followed (the top level is depth 0).
MAX_SHELL_DEPTH: Final = 3

#: Shells whose ``-c`` payload is re-read as a command line.
SHELLS: Final = frozenset({"bash", "dash", "ksh", "sh", "zsh"})

#: Reserved words stripped from the front of a sub-command (only when unquoted).
RESERVED_WORDS: Final = frozenset(
    {"!", "{", "}", "do", "done", "elif", "else", "esac", "fi", "if", "then", "until", "while"}
)


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
    long_with_value: tuple[str, ...] = ()
    operands: int = 0
    assignments: bool = False
    numeric_options: bool = False
    split_string: tuple[str, ...] = ()


#: The wrappers stripped before the program is read. ``sudo -h`` is help, not
#: ``-h host``, so ``h`` is deliberately absent from sudo's valued options.
WRAPPERS: Final[tuple[Wrapper, ...]] = (
    Wrapper("command"),
    Wrapper("doas", short_with_value="Cu"),
    Wrapper(
        "env",
        short_with_value="uCS",
        long_with_value=("unset", "chdir", "split-string"),
        assignments=True,
        split_string=("-S", "--split-string"),
    ),
    Wrapper("exec", short_with_value="a"),
    Wrapper("nice", short_with_value="n", long_with_value=("adjustment",), numeric_options=True),
    Wrapper("nohup"),
    Wrapper("stdbuf", short_with_value="ioe", long_with_value=("input", "output", "error")),
    Wrapper(
        "sudo",
        short_with_value="CDgpRrtTUu",
        long_with_value=(
            "chdir",
            "chroot",
            "close-from",
            "command-timeout",
            "group",
            "host",
            "other-user",
            "prompt",
            "role",
            "type",
            "user",
        ),
    ),
    Wrapper("time"),
    Wrapper("timeout", short_with_value="sk", long_with_value=("kill-after", "signal"), operands=1),
)

_WRAPPER_BY_NAME: Final = {w.name: w for w in WRAPPERS}
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


def _basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def _is_assignment(word: Word) -> bool:
    match = _ASSIGNMENT.match(word.text)
    return match is not None and match.end() <= word.quoted_from


def _skip_wrapper(spec: Wrapper, words: list[Word], i: int) -> tuple[list[Word], int]:
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
                words, i = [*words[:i], *tokenize(payload)[0], *rest], i
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
                        words = [*words[:i], *tokenize(payload)[0], *rest]
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
    words, redirects = tokenize(segment)
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
        segments, opaque = split_line(text)
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
    "Resolution",
    "SimpleCommand",
    "Wrapper",
    "parse_command",
    "program_matches",
    "resolve",
    "runs_any",
    "runs_only",
    "shell_payload",
]
