"""The operator-aware Bash matcher: which programs does a command line run?

This module owns the pragmatic shell reading that deny rules, allow rules and
guard rules share (and that a Bash tool's own deny/allow lists use). It is not
a POSIX shell; it reads a line the way an attacker would try to hide a
program in it, and it says so when it cannot see everything:

1. **Split** (:mod:`._lexer`) the line into sub-commands on ``&&``, ``||``, ``;``, ``|``,
   ``|&``, ``&`` and newlines, outside quotes; also on ``(``, ``)`` and backticks,
   so subshells and substitutions are sub-commands of their own. Substitutions
   inside double quotes (``"$(...)"``) are read too.
2. **Expand braces** (``{rm,-rf,x}`` is ``rm -rf x``; ``/*{,}``; ``{r..r}m``), at
   most :data:`MAX_EXPANSION` words per sub-command.
3. **Strip prefixes**: reserved words (``!``, ``{``, ``if``, ``then``, ``do``, ...),
   ``function NAME``, ``coproc [NAME]``, ``VAR=x`` assignments and the wrappers
   in :data:`WRAPPERS` with their options and operands (``sudo``, ``env``,
   ``setsid``, ``flock``, ``taskset``, ``unshare``, ``busybox``, ...). What was
   stripped is kept (:attr:`SimpleCommand.wrappers`, ``.assignments``): allow
   rules refuse it.
4. **Unquote** the program token (``\\rm``, ``'rm'``, ``r''m`` and ``$'\\x72m'`` are ``rm``).
5. **Follow** what a sub-command runs in turn, to :data:`MAX_SHELL_DEPTH` levels:
   a shell's ``-c`` payload (every shell in :data:`SHELLS`, ``pwsh -Command``,
   ``fish --command``), a shell's here-string (``bash <<< 'rm x'``), ``su -c``,
   ``script -c``, ``flock -c``, ``watch``/``parallel``/``sg`` command strings,
   ``xargs`` and ``find -exec`` commands, ``eval`` and ``trap`` strings and
   ``alias`` bodies. Heredoc bodies are read as commands.
6. **Track** ``cd``/``pushd`` so later relative paths are known (``cd / && rm -rf *``).

What the matcher cannot see is not guessed: :class:`Resolution` lists
``reasons`` and is ``opaque``. Deny rules and guards then *ask* (fail closed)
and allow rules refuse:

- a shell reading its program from a pipe, a file or ``<`` (``echo 'rm x' | sh``,
  ``sh script``, ``source x``); the ``echo``/``printf`` text of such a line is
  read as commands too, so the common spelling is still denied outright;
- a program named by a variable or substitution (``$CMD``, ``$(echo rm)``);
  ``eval`` of a variable; a shell nested deeper than the bound; a brace
  expansion past its cap; a ``$'...'``/substitution left unclosed.

Known limitations: glob and variable expansion are not performed (a glob in the
program word is matched against the denied name); what an interpreter does
(``python -c``, ``perl -e``, ``make``, ``git -c alias...``, a script's content)
is not read; ``#`` comments are not recognised and heredoc bodies are read as
commands (both err on the side of matching).
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import re
import shlex
from collections.abc import Collection
from typing import Final, final

import attrs

from helikon.governance._lexer import MAX_EXPANSION, Redirect, Word, expand_braces, split_line, tokenize
from helikon.governance._wrappers import ALLOW_RULE_WRAPPERS, SHELLS, WRAPPERS, Wrapper, wrapper_named

#: How many nested ``bash -c`` levels are followed (the top level is depth 0).
MAX_SHELL_DEPTH: Final = 3

#: Reserved words stripped from the front of a sub-command (only when unquoted).
RESERVED_WORDS: Final = frozenset(
    {"!", "{", "}", "do", "done", "elif", "else", "esac", "fi", "if", "then", "until", "while"}
)


@final
@attrs.frozen
class SimpleCommand:
    """One sub-command after brace expansion, prefix stripping and unquoting.

    ``program`` is ``""`` for a sub-command that only redirects (``> .env``,
    ``exec >.git/hooks/x``, a wrapper whose ``-c`` string is in ``runs``).
    ``depth`` counts the ``bash -c`` levels it was found under; ``cwd`` is the
    directory an earlier ``cd`` of the line moved to (``""``: where the line
    started; None: unknown).
    """

    program: str
    args: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    depth: int = 0
    #: Wrappers stripped before the program, in order (``("sudo", "env")``).
    wrappers: tuple[str, ...] = ()
    #: ``VAR=x`` words stripped before the program (the shell's or ``env``'s).
    assignments: tuple[str, ...] = ()
    #: Command lines this sub-command runs in turn (``su -c``, ``watch``, ...).
    runs: tuple[str, ...] = ()
    #: Why some of what this sub-command runs cannot be seen.
    unknown: tuple[str, ...] = ()
    cwd: str | None = ""


@final
@attrs.frozen
class Resolution:
    """Every sub-command of a line, in order; ``opaque`` when some part of the
    line was left uninspected, with the ``reasons``."""

    commands: tuple[SimpleCommand, ...]
    opaque: bool = False
    reasons: tuple[str, ...] = ()


class Verdict(enum.Enum):
    """Whether a line runs a program, as far as the matcher can tell."""

    #: No sub-command runs it and every part of the line was read.
    NO = "no"
    #: Some sub-command runs it.
    YES = "yes"
    #: None that the matcher sees, but part of the line could not be read.
    UNKNOWN = "unknown"


_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_GLOB_CHARS: Final = "*?["


def _basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def _is_assignment(word: Word) -> bool:
    match = _ASSIGNMENT.match(word.text)
    return match is not None and match.end() <= word.quoted_from


# -- one sub-command ----------------------------------------------------------------------


def _option_value(words: list[Word], i: int, attached: str) -> tuple[str, int]:
    """An option's value (attached or the next word) and the index after it."""
    if attached:
        return attached, i + 1
    return (words[i + 1].text if i + 1 < len(words) else ""), i + 2


def _skip_wrapper(spec: Wrapper, words: list[Word], i: int) -> tuple[list[Word], int, list[str], bool]:
    """Step over ``spec``'s options and operands from ``i`` (just after its name).

    Returns the words (an ``env -S`` string is spliced in), the index of the
    program, the command lines given to command options, and whether such an
    option was seen (then nothing after it is a program).
    """
    runs: list[str] = []
    operands = spec.operands
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if text == "-" and (spec.assignments or spec.command_options):  # ``env -`` / ``su -``
            i += 1
        elif text.startswith("--") and len(text) > 2:
            name, has_value, value = text[2:].partition("=")
            if "--" + name in spec.split_string:
                payload, after = _option_value(words, i, value if has_value else "")
                words, i = [*words[:i], *tokenize(payload)[0], *words[after:]], i
                continue
            if "--" + name in spec.command_options:
                payload, i = _option_value(words, i, value if has_value else "")
                runs.append(payload)
                continue
            i += 2 if name in spec.long_with_value and not has_value else 1
        elif text.startswith("-") and len(text) > 1:
            if spec.numeric_options and text[1:].isdigit():
                i += 1
                continue
            for k, flag in enumerate(text[1:], start=2):
                if f"-{flag}" in spec.command_options:
                    payload, i = _option_value(words, i, text[k:])
                    runs.append(payload)
                    break
                if flag in spec.short_with_value:
                    if f"-{flag}" in spec.split_string:
                        payload, after = _option_value(words, i, text[k:])
                        words = [*words[:i], *tokenize(payload)[0], *words[after:]]
                        break
                    i = _option_value(words, i, text[k:])[1]
                    break
            else:
                i += 1
        elif spec.assignments and _is_assignment(words[i]):
            i += 1
        elif operands > 0:
            operands -= 1
            i += 1
        else:
            break
    if spec.command_options:  # ``runuser user -c x`` and friends: a command option anywhere
        for k in range(i, len(words) - 1):
            if words[k].text in spec.command_options:
                runs.append(words[k + 1].text)
    return words, min(i, len(words)), runs, bool(runs)


def _prefix_end(words: list[Word], i: int) -> int:
    """Skip ``function NAME``/``coproc NAME`` when they start at ``i``; else ``i``."""
    word = words[i]
    if not word.plain:
        return i
    if word.text == "function":
        return min(i + 2, len(words))
    if word.text == "coproc":
        named = i + 2 < len(words) and words[i + 2].text == "{"
        return i + (2 if named else 1)
    return i


def parse_command(segment: str, depth: int = 0, cwd: str | None = "") -> SimpleCommand | None:
    """Read one sub-command: expand braces; strip reserved words, assignments and
    wrappers; unquote.

    Returns None when nothing is left to run and nothing is redirected (an
    empty segment, ``fi``, a bare assignment).

    >>> cmd = parse_command("sudo -u root FOO=1 nice -n 5 'rm' -rf / 2>/dev/null")
    >>> cmd.program, cmd.args, [r.target for r in cmd.redirects], cmd.wrappers
    ('rm', ('-rf', '/'), ['/dev/null'], ('sudo', 'nice'))
    >>> parse_command("timeout -s KILL 5s env -i PATH=/bin \\\\rm x").program
    'rm'
    >>> parse_command("exec >.git/hooks/pre-commit").redirects[0].target
    '.git/hooks/pre-commit'
    >>> parse_command("fi") is None
    True
    """
    raw, redirects = tokenize(segment)
    unknown: list[str] = []
    words: list[Word] = []
    made = 0
    for word in raw:
        expanded = expand_braces(word, MAX_EXPANSION - made) if made < MAX_EXPANSION else None
        if expanded is None:
            unknown.append("a brace expansion larger than the matcher expands")
            words.append(word)
        else:
            made += len(expanded) - 1
            words.extend(expanded)
    wrappers: list[str] = []
    assignments: list[str] = []
    runs: list[str] = []
    stdin_wrapper: Wrapper | None = None
    i = 0
    while i < len(words):
        word = words[i]
        wrapper = wrapper_named(_basename(word.text))
        if word.plain and word.text in RESERVED_WORDS:
            i += 1
        elif (after := _prefix_end(words, i)) != i:
            i = after
        elif _is_assignment(word):
            assignments.append(word.text)
            i += 1
        elif wrapper is not None:
            wrappers.append(wrapper.name)
            words, i, given, stops = _skip_wrapper(wrapper, words, i + 1)
            runs.extend(given)
            if stops:
                i = len(words)
            elif wrapper.shell_rest and i < len(words):
                rest = [w.text for w in words[i:]]
                cut = next((k for k, t in enumerate(rest) if t in wrapper.stop_words), len(rest))
                runs.append(" ".join(rest[:cut]) if len(rest[:cut]) > 1 else rest[0])
                i = len(words)
            elif wrapper.reads_input and i >= len(words):
                stdin_wrapper = wrapper
        else:
            break
    if stdin_wrapper is not None and not runs:
        unknown.append(f"{stdin_wrapper.name} starts a shell that reads its commands from its input")
    if i >= len(words):
        if not (redirects or runs or unknown or assignments):
            return None
        return SimpleCommand(
            "", (), redirects, depth, tuple(wrappers), tuple(assignments), tuple(runs), tuple(unknown), cwd
        )
    program = words[i]
    if any(program.text[k] in "$`" and not program.quoted_at(k) for k in range(len(program.text))):
        unknown.append("a program named by a variable or a substitution")
    if any(c in program.text for c in " \t\n;&|"):
        runs.append(program.text)  # ``sudo -s 'rm x'``: a shell runs the word as a line
    return SimpleCommand(
        program.text,
        tuple(w.text for w in words[i + 1 :]),
        redirects,
        depth,
        tuple(wrappers),
        tuple(assignments),
        tuple(runs),
        tuple(unknown),
        cwd,
    )


# -- what a sub-command runs in turn ----------------------------------------------------


_PWSH: Final = frozenset({"pwsh", "powershell"})


def shell_payload(command: SimpleCommand) -> str | None:
    """The command line a ``bash -c`` / ``sh -c`` sub-command runs, if it is one.

    >>> shell_payload(SimpleCommand("bash", ("-lc", "rm -rf /")))
    'rm -rf /'
    >>> shell_payload(SimpleCommand("fish", ("--command=rm x",)))
    'rm x'
    >>> shell_payload(SimpleCommand("bash", ("script.sh",))) is None
    True
    """
    payload, _ = _shell_input(command)
    return payload


def _shell_input(command: SimpleCommand) -> tuple[str | None, str | None]:
    """A shell's ``-c`` payload, or why its program cannot be seen (None, None: not a shell)."""
    name = _basename(command.program).casefold()
    if name not in SHELLS:
        return None, None
    args = command.args
    if name in _PWSH:
        for k, arg in enumerate(args):
            flag = arg.casefold()
            if flag in ("-c", "-command", "--command", "/c", "/command"):
                return " ".join(args[k + 1 :]), None
            if flag.startswith(("-e", "/e")) and "encodedcommand".startswith(flag[1:]):
                return None, "an encoded PowerShell command"
            if flag in ("-f", "-file", "/file"):
                return None, "a shell running a script file"
            if not flag.startswith(("-", "/")):
                return None, "a shell running a script file"
        return None, "a shell reading its commands from its input"
    wants_payload = False
    k = 0
    while k < len(args):
        arg = args[k]
        if arg == "--":
            k += 1
            break
        if arg.startswith("--command=") or arg.startswith("--init-command="):
            return arg.split("=", 1)[1], None
        if arg in ("--command", "--init-command", "-C") and k + 1 < len(args):
            return args[k + 1], None
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            k += 2
        elif arg.startswith("--"):
            k += 1
        elif len(arg) > 1 and arg[0] in "-+":
            wants_payload = wants_payload or (arg[0] == "-" and "c" in arg[1:])
            k += 1
        else:
            break
    if wants_payload and k < len(args):
        return args[k], None
    here = [r.target for r in command.redirects if r.operator == "<<<"]
    if here:
        return "\n".join(here), None
    if k < len(args) and not any(a.startswith("-") and "s" in a[1:] for a in args[:k]):
        return None, "a shell running a script file"
    if any(r.operator in ("<<", "<<-") for r in command.redirects):
        return None, None  # the heredoc body is read as commands of the line
    if any(r.operator == "<" for r in command.redirects):
        return None, "a shell reading its commands from a file"
    return None, "a shell reading its commands from its input"


def _runs_in_turn(command: SimpleCommand) -> tuple[list[str], list[str]]:
    """The command lines ``command`` runs in turn, and what it runs that cannot be seen."""
    lines = list(command.runs)
    unknown = list(command.unknown)
    name = _basename(command.program)
    payload, reason = _shell_input(command)
    if payload is not None:
        lines.append(payload)
    if reason is not None:
        unknown.append(reason)
    args = command.args
    if name == "eval":
        line = " ".join(args)
        lines.append(line)
        if "$" in line or "`" in line:
            unknown.append("eval of a variable or a substitution")
    elif name in ("source", "."):
        unknown.append("a script read by source")
    elif name == "alias":
        lines.extend(a.split("=", 1)[1] for a in args if "=" in a)
    elif name == "trap":
        operands = [a for a in args if not a.startswith("-")]
        if operands:
            lines.append(operands[0])
    elif name == "find":
        k = 0
        while k < len(args):
            if args[k] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(k + 1, len(args)) if args[j] in (";", "+")), len(args))
                lines.append(shlex.join(args[k + 1 : end]))
                k = end
            k += 1
    return lines, unknown


def _next_cwd(cwd: str | None, command: SimpleCommand) -> str | None:
    """The directory after ``command`` if it is a ``cd``/``pushd``/``popd``."""
    name = _basename(command.program)
    if name == "popd":
        return None
    if name not in ("cd", "pushd", "chdir"):
        return cwd
    operands = [a for a in command.args if not (a.startswith("-") and len(a) > 1)]
    if not operands:
        return "~"
    target = operands[0]
    for home in ("~", "$HOME", "${HOME}"):
        if target == home or target.startswith(home + "/"):
            return "~" + target[len(home) :]
    if target == "-" or "$" in target or "`" in target or target.startswith("~"):
        return None if not target.startswith("~") else target
    if target.startswith("/"):
        return target
    if cwd is None:
        return None
    return f"{cwd}/{target}" if cwd else target


#: The longest command line the matcher reads; a longer one is unreadable.
MAX_LINE_LENGTH: Final = 100_000


@functools.lru_cache(maxsize=256)
def resolve(command: str, max_depth: int = MAX_SHELL_DEPTH) -> Resolution:
    """Every sub-command ``command`` runs, following what each runs in turn to ``max_depth``.

    >>> [c.program for c in resolve("echo ok && sudo rm -rf / ; bash -c 'ls | wc -l'").commands]
    ['echo', 'rm', 'bash', 'ls', 'wc']
    >>> resolve("echo 'rm x' | sh").reasons
    ('a shell reading its commands from its input',)
    """
    if len(command) > MAX_LINE_LENGTH:
        return Resolution((), True, (f"a command line longer than {MAX_LINE_LENGTH} characters",))
    reasons: list[str] = []

    def walk(text: str, depth: int, cwd: str | None) -> list[SimpleCommand]:
        segments, opaque = split_line(text)
        if opaque:
            reasons.append("a substitution that is not closed")
        found: list[SimpleCommand] = []
        texts: list[str] = []
        reads_input = False
        for segment in segments:
            parsed = parse_command(segment, depth, cwd)
            if parsed is None:
                continue
            found.append(parsed)
            cwd = _next_cwd(cwd, parsed)
            lines, unknown = _runs_in_turn(parsed)
            reasons.extend(unknown)
            reads_input = reads_input or any("input" in r for r in unknown)
            if _basename(parsed.program) in ("echo", "printf"):
                texts.append(" ".join(a for a in parsed.args if not a.startswith("-")))
            for line in lines:
                if depth < max_depth:
                    found.extend(walk(line, depth + 1, cwd))
                else:
                    reasons.append("commands nested deeper than the matcher follows")
        if reads_input:  # ``echo 'rm x' | sh``: what is echoed may be the program
            for line in texts:
                found.extend(walk(line.replace("\\n", "\n"), depth + 1, cwd))
        return found

    commands = tuple(walk(command, 0, ""))
    unique = tuple(dict.fromkeys(reasons))
    return Resolution(commands, bool(unique), unique)


# -- matching -----------------------------------------------------------------------------


def program_matches(program: str, wanted: str) -> bool:
    """Whether a resolved ``program`` is ``wanted`` for a *deny* decision.

    Lenient on purpose, since a deny that matches too much errs safe: a path
    (``/bin/rm``) matches by its basename, case is ignored, and a glob in the
    program word (``/bin/r?``) matches every name it could expand to.

    >>> program_matches("/usr/bin/RM", "rm"), program_matches("rmdir", "rm")
    (True, False)
    >>> program_matches("/b*/r[m]", "rm")
    True
    """
    if program == wanted:
        return True
    name, target = _basename(program).casefold(), _basename(wanted).casefold()
    if name == target:
        return True
    return any(c in name for c in _GLOB_CHARS) and fnmatch.fnmatchcase(target, name)


def _runs(command: SimpleCommand, wanted: str) -> bool:
    return program_matches(command.program, wanted) or any(
        program_matches(w, wanted) for w in command.wrappers
    )


def check_runs(command: str, programs: Collection[str]) -> Verdict:
    """Whether ``command`` runs one of ``programs``: YES, NO, or UNKNOWN when it runs
    none that the matcher sees but part of the line could not be read.

    A wrapper counts as run (``sudo rm x`` runs ``sudo`` and ``rm``).

    >>> check_runs("{rm,-rf,x}", {"rm"}), check_runs("ls", {"rm"}), check_runs("$CMD x", {"rm"})
    (<Verdict.YES: 'yes'>, <Verdict.NO: 'no'>, <Verdict.UNKNOWN: 'unknown'>)
    """
    resolution = resolve(command)
    if any(_runs(c, p) for c in resolution.commands for p in programs):
        return Verdict.YES
    return Verdict.UNKNOWN if resolution.opaque else Verdict.NO


def runs_any(command: str, programs: Collection[str]) -> bool:
    """Deny semantics, fail closed: whether any sub-command may run one of ``programs``
    (a line that cannot be read in full counts).

    >>> runs_any("bash -c 'rm -rf /'", {"rm"}), runs_any("echo 'rm x' | sh", {"rm"})
    (True, True)
    """
    return check_runs(command, programs) is not Verdict.NO


def runs_only(command: str, programs: Collection[str]) -> bool:
    """Allow semantics, fail closed: whether every sub-command's program is in ``programs``.

    The comparison is exact (``/tmp/git`` is not ``git``); a line with no
    sub-command, an ``opaque`` one, a sub-command that only redirects, and a
    program behind an assignment (``PATH=. git``) or a wrapper outside
    :data:`ALLOW_RULE_WRAPPERS` (``sudo git``, ``env git``) are not allowed.

    >>> runs_only("git add . && git commit -m wip", {"git"})
    True
    >>> runs_only("git status; rm -rf .", {"git"}), runs_only("GIT_SSH_COMMAND=x git pull", {"git"})
    (False, False)
    """
    resolution = resolve(command)
    if resolution.opaque or not resolution.commands:
        return False
    return all(
        c.program in programs
        and not c.assignments
        and not c.runs
        and all(w in ALLOW_RULE_WRAPPERS for w in c.wrappers)
        for c in resolution.commands
    )


__all__ = [
    "ALLOW_RULE_WRAPPERS",
    "MAX_EXPANSION",
    "MAX_LINE_LENGTH",
    "MAX_SHELL_DEPTH",
    "RESERVED_WORDS",
    "SHELLS",
    "WRAPPERS",
    "Resolution",
    "SimpleCommand",
    "Verdict",
    "Wrapper",
    "check_runs",
    "expand_braces",
    "parse_command",
    "program_matches",
    "resolve",
    "runs_any",
    "runs_only",
    "shell_payload",
]
