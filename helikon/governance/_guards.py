"""Guard rules: pre-mode safety rules that deny or ask, and the built-in breakers.

A :class:`GuardRule` is checked after the deny rules and before the allow
rules and the mode, so even ``BYPASS`` and a matching allow rule do not skip
it. Its action is :attr:`GuardAction.DENY` (refuse) or :attr:`GuardAction.ASK`
(ask the approval handler; with none installed, the ask resolves to deny).

:meth:`GuardRule.destructive_defaults` is the always-on set a run context
installs unless told ``without_default_guards()``; every one of them asks:

1. **Recursive remove of the root or the home directory**: an ``rm`` with
   ``-r``/``-R``/``--recursive`` (or a ``find ... -delete``) whose operand is
   ``/`` (``/*``, ``/tmp/..``, ``/*{,}``, ``/???`` and other spellings that
   collapse to it or glob over it), a home directory (``~``, ``~root``,
   ``$HOME``, ``${HOME}``, ``/root``, ``/home/NAME``, and ``~/*``), or a
   glob-only operand (``*``, ``.``) after a ``cd`` to one of them
   (``cd / && rm -rf *``). An operand built from a variable that would be
   the root or home if the variable were empty (``rm -rf "$DIR"/*``) asks too.
2. **Writes to protected system paths**: a write whose target is ``/`` or lies
   under one of :data:`SYSTEM_DIRECTORIES` (``/etc``, ``/usr``, ``/bin``,
   ``/sbin``, ``/lib``, ``/lib64``, ``/boot``, ``/sys``, ``/proc``, ``/dev``, ...),
   except the device nodes in :data:`DEVICE_ALLOWLIST` (``> /dev/null`` is never
   blocked). A glob component is matched against the names it could expand to
   (``/e?c/x``), a relative target after ``cd /`` is resolved, and a relative
   target that climbs out of the working directory into a system directory's
   name (``../../etc/passwd``) trips too.
3. **The .git/.ssh/.env write breaker**: a write whose target has a ``.git``
   or ``.ssh`` component, or whose last component is ``.env`` or ``.env.*``.
   Component-exact and case-insensitive: ``name.git/``, ``.gitignore`` and
   ``environment.env`` pass, ``.SSH/`` and ``.ENV`` trip; a glob or brace
   component that could name one trips (``.gi?/hooks``, ``.{git,x}/config``),
   and a target is resolved against an earlier ``cd`` (``cd .git && ... > hooks/x``).

"A write" is a write tool's path argument (``Write``/``Edit``, see
:class:`~helikon.governance.ToolArguments`) or, in a Bash command, a ``>``,
``>>``, ``&>``, ``>|`` or ``<>`` redirection target (also with no command:
``> .env``, ``exec >.git/hooks/x``), a ``tee`` operand, a ``dd of=`` target,
the destination of ``cp``/``mv``/``install``/``ln``/``rsync``, the operands of
``touch``/``mkdir``/``truncate``/``rm``/``rmdir``/``unlink``/``shred`` and of
``chmod``/``chown``/``chgrp``, a ``sed -i`` file, and ``curl -o``/``wget -O``
targets (see :func:`write_targets`).

A line the matcher cannot read in full (see :mod:`helikon.governance._bash`:
a shell fed from a pipe or a script, ``$CMD``, ...) makes every breaker *ask*,
whatever its action: it fails closed.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterator
from typing import Final, TypeAlias, assert_never, final

import attrs

from helikon._json import JsonValue
from helikon.governance._bash import SimpleCommand, Verdict, expand_braces, program_matches, resolve
from helikon.governance._lexer import Word
from helikon.governance._rules import (
    DEFAULT_TOOL_ARGUMENTS,
    ArgumentRole,
    BashProgram,
    EditPath,
    ReadPath,
    RuleMatcher,
    ToolArguments,
    ToolNamed,
    clean_path,
    describe_matcher,
    rule_verdict,
)

#: Top-level directories a write must not touch.
SYSTEM_DIRECTORIES: Final = (
    "bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "sys", "usr",
)  # fmt: skip

#: Device nodes that are fine to write despite living under ``/dev``.
DEVICE_ALLOWLIST: Final = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2")

_HOME: Final = re.compile(r"~[A-Za-z0-9._-]*|\$HOME\b|\$\{HOME(?:[:#%/^,-][^}]*)?\}")
_VARIABLE: Final = re.compile(r"\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])")


class GuardAction(enum.Enum):
    """What a matching guard rule does."""

    #: Refuse the call; the rule's message is the reason.
    DENY = "deny"
    #: Ask the approval handler; the rule's message is the prompt. No handler: deny.
    ASK = "ask"


@final
@attrs.frozen
class RecursiveRemoveOfRootOrHome:
    """Built-in: ``rm -r`` of ``/`` or ``~``."""


@final
@attrs.frozen
class SystemPathWrite:
    """Built-in: a write to ``/`` or under a protected system directory."""


@final
@attrs.frozen
class ProtectedDotPathWrite:
    """Built-in: a write into ``.git``/``.ssh`` or to a ``.env``/``.env.*`` file."""


#: What a guard rule looks at: a rule form or a built-in breaker.
GuardMatcher: TypeAlias = (
    ToolNamed
    | BashProgram
    | ReadPath
    | EditPath
    | RecursiveRemoveOfRootOrHome
    | SystemPathWrite
    | ProtectedDotPathWrite
)


# -- what a command writes --------------------------------------------------------


def _operands(args: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    options_done = False
    for arg in args:
        if options_done or arg == "-" or not arg.startswith("-"):
            found.append(arg)
        elif arg == "--":
            options_done = True
    return found


def _option_values(args: tuple[str, ...], short: str, long: str) -> list[str]:
    found: list[str] = []
    for k, arg in enumerate(args):
        if arg in (short, long):
            found.extend(args[k + 1 : k + 2])
        elif arg.startswith(long + "="):
            found.append(arg.split("=", 1)[1])
        elif arg.startswith(short) and not arg.startswith("--") and len(arg) > len(short):
            found.append(arg[len(short) :])
    return found


_OPERAND_WRITERS: Final = frozenset(
    {"tee", "touch", "mkdir", "truncate", "rm", "rmdir", "unlink", "shred", "mkfifo", "mknod", "setfattr"}
)
_MODE_WRITERS: Final = frozenset({"chmod", "chown", "chgrp", "setfacl", "chattr"})


def write_targets(command: SimpleCommand) -> tuple[str, ...]:
    """The paths one sub-command writes, as far as the guards look (as written:
    :func:`resolved_targets` applies an earlier ``cd``).

    >>> write_targets(resolve("cat a | tee -a /etc/hosts > out.txt 2>&1").commands[1])
    ('out.txt', '/etc/hosts')
    >>> write_targets(resolve("cp -r build/ /usr/local/app").commands[0])
    ('/usr/local/app',)
    >>> write_targets(resolve("2>/etc/shadow").commands[0])
    ('/etc/shadow',)
    """
    found = [r.target for r in command.redirects if r.writes]
    name = command.program.rsplit("/", 1)[-1]
    operands = _operands(command.args)
    if name in _OPERAND_WRITERS:
        found.extend(operands)
    elif name in _MODE_WRITERS:
        found.extend(operands[1:])
    elif name == "dd":
        found.extend(a.removeprefix("of=") for a in command.args if a.startswith("of="))
    elif name in ("cp", "mv", "install", "ln", "rsync"):
        directories = [
            a.removeprefix("--target-directory=") for a in command.args if a.startswith("--target-directory=")
        ]
        directories += [command.args[i + 1] for i, a in enumerate(command.args[:-1]) if a == "-t"]
        found.extend(directories or operands[-1:])
    elif name in ("sed", "perl") and any(
        a.startswith("-i") or a.startswith("--in-place") for a in command.args
    ):
        found.extend(operands[1:])
    elif name == "curl":
        found.extend(_option_values(command.args, "-o", "--output"))
    elif name == "wget":
        found.extend(_option_values(command.args, "-O", "--output-document"))
    return tuple(found)


def _in_directory(cwd: str | None, path: str) -> str:
    """``path`` as seen from where the line started, given the ``cwd`` a ``cd`` left."""
    if not cwd or path.startswith(("/", "~", "$")):
        return path
    return f"{cwd}/{path}"


def resolved_targets(command: SimpleCommand) -> tuple[str, ...]:
    """:func:`write_targets` resolved against the directory an earlier ``cd`` moved to.

    >>> resolved_targets(resolve("cd .git && echo x > hooks/pre-commit").commands[1])
    ('.git/hooks/pre-commit',)
    """
    found: list[str] = []
    for target in write_targets(command):
        expanded = expand_braces(Word(target, len(target))) or (Word(target, len(target)),)
        found.extend(_in_directory(command.cwd, w.text) for w in expanded)
    return tuple(found)


def _written_paths(tool: str, args: JsonValue, arguments: ToolArguments) -> Iterator[str]:
    yield from arguments.values(tool, ArgumentRole.WRITE_PATH, args)
    for line in arguments.values(tool, ArgumentRole.COMMAND, args):
        for command in resolve(line).commands:
            removed = {
                _in_directory(command.cwd, t)
                for t in _removal_operands(command)
                if _is_root_or_home(_in_directory(command.cwd, t))
            }
            yield from (t for t in resolved_targets(command) if t not in removed)  # the rm breaker's


def _commands(tool: str, args: JsonValue, arguments: ToolArguments) -> Iterator[SimpleCommand]:
    for line in arguments.values(tool, ArgumentRole.COMMAND, args):
        yield from resolve(line).commands


def _opaque(tool: str, args: JsonValue, arguments: ToolArguments) -> bool:
    return any(resolve(line).opaque for line in arguments.values(tool, ArgumentRole.COMMAND, args))


# -- the path tests -----------------------------------------------------------------


def _absolute_components(path: str) -> list[str] | None:
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        return None
    parts: list[str] = []
    for component in path.split("/"):
        if component in ("", "."):
            continue
        if component == "..":
            if parts:
                parts.pop()  # ".." at the root stays at the root
        else:
            parts.append(component)
    return parts


def _is_glob(component: str) -> bool:
    return any(c in component for c in "*?[")


def _could_name(component: str, name: str) -> bool:
    """Whether ``component`` is ``name``, or a glob that could expand to it (case-insensitive)."""
    component, name = component.casefold(), name.casefold()
    if component == name:
        return True
    if not _is_glob(component) or (name.startswith(".") and not component.startswith(".")):
        return False  # a glob names a dotfile only with a leading literal dot
    return fnmatch.fnmatchcase(name, component)


def is_system_path(path: str) -> bool:
    """Whether writing ``path`` writes ``/`` or a protected system directory.

    >>> [is_system_path(p) for p in ("/etc/passwd", "/tmp/../usr/bin/x", "/", "/dev/null", "etc/passwd")]
    [True, True, True, False, False]
    >>> [is_system_path(p) for p in ("/lib/x.so", "/e?c/shadow", "../../../etc/passwd", "/tmp/x")]
    [True, True, True, False]
    """
    parts = _absolute_components(path)
    if parts is None:
        relative = clean_path(path).split("/")
        if relative[0] != "..":
            return False
        parts = [p for p in relative if p != ".."]
        if not parts:
            return False
    if not parts:
        return True
    if ("/" + "/".join(parts)).casefold() in DEVICE_ALLOWLIST:
        return False
    return any(_could_name(parts[0], directory) for directory in SYSTEM_DIRECTORIES)


def is_protected_dot_path(path: str) -> bool:
    """Whether ``path`` has a ``.git``/``.ssh`` component or names a ``.env``/``.env.*`` file.

    >>> [is_protected_dot_path(p) for p in (".SSH/id_rsa", "a/.env.local", "repo/.git/HEAD", ".gi?/hooks/x")]
    [True, True, True, True]
    >>> [is_protected_dot_path(p) for p in (".gitignore", "name.git/HEAD", "environment.env", "*.txt")]
    [False, False, False, False]
    """
    components = [c for c in clean_path(path).split("/") if c]
    if any(_could_name(c, ".git") or _could_name(c, ".ssh") for c in components):
        return True
    last = components[-1] if components else ""
    return _could_name(last, ".env") or last.casefold().startswith(".env.") or _could_name(last, ".env.x")


def _root_or_home_rest(target: str) -> str | None:
    """What follows the root or a home directory in ``target`` (None: neither)."""
    home = _HOME.match(target)
    if home is not None:
        return target[home.end() :]
    parts = _absolute_components(target)
    if parts is None:
        return None
    if parts[:1] == ["root"]:
        return "/" + "/".join(parts[1:])
    if parts[:1] == ["home"]:
        return "/" + "/".join(parts[2:]) if len(parts) > 1 else ""
    return "/" + "/".join(parts)


#: Names a glob operand is tried on: one that could name any of them globs over a
#: root or home directory's contents (``*``, ``.*``, ``???``, ``[!.]*``).
_TYPICAL_ENTRIES: Final = ("bin", "etc", "usr", "home", "documents", ".ssh", ".bashrc", ".config")


def _is_root_or_home(target: str) -> bool:
    rest = _root_or_home_rest(target)
    if rest is None:
        return False
    parts = [p for p in rest.split("/") if p not in ("", ".")]
    if not parts:
        return True
    if len(parts) != 1 or not _is_glob(parts[0]):
        return False
    return any(_could_name(parts[0], name) for name in _TYPICAL_ENTRIES)


def _recursive(args: tuple[str, ...]) -> bool:
    options = args[: args.index("--") if "--" in args else None]
    return any(
        a == "--recursive" or (a.startswith("-") and not a.startswith("--") and ("r" in a or "R" in a))
        for a in options
    )


def _removal_operands(command: SimpleCommand) -> list[str]:
    """The trees a sub-command removes recursively (``rm -r`` operands, ``find -delete`` roots)."""
    name = command.program.rsplit("/", 1)[-1]
    if program_matches(command.program, "rm") and _recursive(command.args):
        return _operands(command.args)
    if name == "find" and any(a in ("-delete", "-exec", "-execdir") for a in command.args):
        return [
            a
            for a in command.args[
                : next(
                    (k for k, a in enumerate(command.args) if a.startswith(("-", "(", "!"))),
                    len(command.args),
                )
            ]
        ]
    return []


def removes_root_or_home(command: SimpleCommand) -> bool:
    """Whether a sub-command is a recursive ``rm`` (or ``find -delete``) of ``/`` or a home.

    >>> [removes_root_or_home(resolve(c).commands[0]) for c in ("rm -rf /", "rm -fr -- ~", "rm -rf ./build")]
    [True, True, False]
    >>> last = [resolve(c).commands[-1] for c in ("rm -rf ~root", "rm -rf /*{,}", "cd / && rm -rf *")]
    >>> [removes_root_or_home(c) for c in last]
    [True, True, True]
    """
    return any(_is_root_or_home(_in_directory(command.cwd, t)) for t in _removal_operands(command))


def _may_remove_root_or_home(command: SimpleCommand) -> bool:
    """Whether a recursive removal could be of ``/`` or a home, for a variable or an unknown ``cd``."""
    for target in _removal_operands(command):
        relative = command.cwd is None and not target.startswith(("/", "~", "$"))
        if relative and not [p for p in clean_path(target).split("/") if p and not _is_glob(p)]:
            return True
        if "$" in target and _is_root_or_home(_VARIABLE.sub("", _HOME.sub("~", target))):
            return True
    return False


# -- the rule --------------------------------------------------------------------------------


def _describe(matcher: GuardMatcher) -> str:
    match matcher:
        case ToolNamed() | BashProgram() | ReadPath() | EditPath():
            return describe_matcher(matcher)
        case RecursiveRemoveOfRootOrHome():
            return "destructive command: recursive remove of / or ~"
        case SystemPathWrite():
            return (
                "write to a protected system path (/, /etc, /usr, /bin, /sbin, /lib, /boot, /proc, /dev, ...)"
            )
        case ProtectedDotPathWrite():
            return "write to a protected VCS/secret path (.git, .ssh, .env)"
        case _:
            assert_never(matcher)


def guard_verdict(matcher: GuardMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> Verdict:
    """Whether ``matcher`` trips for ``tool`` called with ``args``: YES, NO, or UNKNOWN
    when nothing trips that the matcher sees but part of a command line cannot be read."""
    match matcher:
        case ToolNamed() | BashProgram() | ReadPath() | EditPath():
            return rule_verdict(matcher, tool, args, arguments)
        case RecursiveRemoveOfRootOrHome():
            commands = list(_commands(tool, args, arguments))
            if any(removes_root_or_home(c) for c in commands):
                return Verdict.YES
            if any(_may_remove_root_or_home(c) for c in commands):
                return Verdict.UNKNOWN
        case SystemPathWrite():
            if any(is_system_path(p) for p in _written_paths(tool, args, arguments)):
                return Verdict.YES
        case ProtectedDotPathWrite():
            if any(is_protected_dot_path(p) for p in _written_paths(tool, args, arguments)):
                return Verdict.YES
        case _:
            assert_never(matcher)
    return Verdict.UNKNOWN if _opaque(tool, args, arguments) else Verdict.NO


def guard_matches(matcher: GuardMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> bool:
    """Whether ``matcher`` trips for ``tool`` called with ``args``, failing closed
    (an UNKNOWN :func:`guard_verdict` trips)."""
    return guard_verdict(matcher, tool, args, arguments) is not Verdict.NO


@final
@attrs.frozen
class GuardRule:
    """A safety rule checked before allow rules and the mode.

    ``message`` is the approval prompt (``ASK``) or the denial reason (``DENY``).

    >>> rules = GuardRule.destructive_defaults()
    >>> [any(r.matches("Bash", {"command": c}) for r in rules)
    ...  for c in ("sudo rm -rf /", "make > /dev/null", "echo x > .git/config", "cat .env")]
    [True, False, True, False]
    """

    matcher: GuardMatcher
    action: GuardAction = GuardAction.ASK
    message: str = attrs.field()

    @message.default
    def _default_message(self) -> str:
        return _describe(self.matcher)

    @classmethod
    def tool(cls, name: str, action: GuardAction = GuardAction.ASK, message: str | None = None) -> GuardRule:
        """Guard the tool called exactly ``name``."""
        return cls._make(ToolNamed(name), action, message)

    @classmethod
    def bash_command(
        cls, program: str, action: GuardAction = GuardAction.ASK, message: str | None = None
    ) -> GuardRule:
        """Guard Bash calls running ``program`` in any sub-command."""
        return cls._make(BashProgram(program), action, message)

    @classmethod
    def read(cls, glob: str, action: GuardAction = GuardAction.ASK, message: str | None = None) -> GuardRule:
        """Guard reads whose path matches ``glob``."""
        return cls._make(ReadPath(glob), action, message)

    @classmethod
    def edit(cls, glob: str, action: GuardAction = GuardAction.ASK, message: str | None = None) -> GuardRule:
        """Guard writes and edits whose path matches ``glob``."""
        return cls._make(EditPath(glob), action, message)

    @classmethod
    def _make(cls, matcher: RuleMatcher, action: GuardAction, message: str | None) -> GuardRule:
        return cls(matcher, action) if message is None else cls(matcher, action, message)

    @classmethod
    def destructive_defaults(cls) -> tuple[GuardRule, ...]:
        """The built-in breakers, in order: recursive ``rm`` of ``/``/``~``, system-path
        writes, ``.git``/``.ssh``/``.env`` writes. All ``ASK``."""
        return (cls(RecursiveRemoveOfRootOrHome()), cls(SystemPathWrite()), cls(ProtectedDotPathWrite()))

    def matches(self, tool: str, args: JsonValue, arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS) -> bool:
        """Whether this guard trips for ``tool`` called with ``args`` (an unreadable line trips)."""
        return guard_matches(self.matcher, tool, args, arguments)

    def check(self, tool: str, args: JsonValue, arguments: ToolArguments = DEFAULT_TOOL_ARGUMENTS) -> Verdict:
        """YES, NO, or UNKNOWN (part of a command line cannot be read): the
        permission pipeline asks on UNKNOWN, whatever the action."""
        return guard_verdict(self.matcher, tool, args, arguments)


__all__ = [
    "DEVICE_ALLOWLIST",
    "SYSTEM_DIRECTORIES",
    "GuardAction",
    "GuardMatcher",
    "GuardRule",
    "ProtectedDotPathWrite",
    "RecursiveRemoveOfRootOrHome",
    "SystemPathWrite",
    "guard_matches",
    "guard_verdict",
    "is_protected_dot_path",
    "is_system_path",
    "removes_root_or_home",
    "resolved_targets",
    "write_targets",
]
