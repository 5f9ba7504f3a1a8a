"""Guard rules: pre-mode safety rules that deny or ask, and the built-in breakers.

A :class:`GuardRule` is checked after the deny rules and before the allow
rules and the mode, so even ``BYPASS`` and a matching allow rule do not skip
it. Its action is :attr:`GuardAction.DENY` (refuse) or :attr:`GuardAction.ASK`
(ask the approval handler; with none installed, the ask resolves to deny).

:meth:`GuardRule.destructive_defaults` is the always-on set a run context
installs unless told ``without_default_guards()``; every one of them asks:

1. **Recursive remove of the root or the home directory**: an ``rm`` with
   ``-r``/``-R``/``--recursive`` whose operand is ``/`` (``/*``, ``/tmp/..``
   and other spellings that collapse to it) or ``~``/``$HOME``/``${HOME}``
   (or ``~/*``). Subtrees such as ``/etc`` are protected against writes
   only, not against ``rm -rf``.
2. **Writes to protected system paths**: a write whose target is ``/`` or lies
   under ``/etc``, ``/usr``, ``/bin``, ``/sbin``, ``/sys``, ``/boot`` or
   ``/dev``, except the device nodes in :data:`DEVICE_ALLOWLIST` (``> /dev/null``
   is never blocked). Only absolute targets are checked (``..`` inside them
   is collapsed); a relative ``> ../../etc/passwd`` is not canonicalized.
3. **The .git/.ssh/.env write breaker**: a write whose target has a ``.git``
   or ``.ssh`` component, or whose last component is ``.env`` or ``.env.*``.
   Component-exact and case-insensitive: ``name.git/``, ``.gitignore`` and
   ``environment.env`` pass, ``.SSH/`` and ``.ENV`` trip.

"A write" is a write tool's path argument (``Write``/``Edit``, see
:class:`~helikon.governance.ToolArguments`) or, in a Bash command, a ``>``,
``>>``, ``&>``, ``>|`` or ``<>`` redirection target, a ``tee`` operand, a
``dd of=`` target, the destination of ``cp``/``mv``/``install``/``ln`` and
the operands of ``touch``/``mkdir``/``truncate`` (see :func:`write_targets`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Final, TypeAlias, assert_never, final

import attrs

from helikon._json import JsonValue
from helikon.governance._bash import SimpleCommand, program_matches, resolve
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
    matches_any,
)

#: Top-level directories a write must not touch.
SYSTEM_DIRECTORIES: Final = ("bin", "boot", "dev", "etc", "sbin", "sys", "usr")

#: Device nodes that are fine to write despite living under ``/dev``.
DEVICE_ALLOWLIST: Final = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2")

_HOMES: Final = ("~", "$HOME", "${HOME}")


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


def write_targets(command: SimpleCommand) -> tuple[str, ...]:
    """The paths one sub-command writes, as far as the guards look.

    >>> write_targets(resolve("cat a | tee -a /etc/hosts > out.txt 2>&1").commands[1])
    ('out.txt', '/etc/hosts')
    >>> write_targets(resolve("cp -r build/ /usr/local/app").commands[0])
    ('/usr/local/app',)
    """
    found = [r.target for r in command.redirects if r.writes]
    name = command.program.rsplit("/", 1)[-1]
    operands = _operands(command.args)
    if name == "tee" or name in ("touch", "mkdir", "truncate"):
        found.extend(operands)
    elif name == "dd":
        found.extend(a.removeprefix("of=") for a in command.args if a.startswith("of="))
    elif name in ("cp", "mv", "install", "ln"):
        directories = [
            a.removeprefix("--target-directory=") for a in command.args if a.startswith("--target-directory=")
        ]
        directories += [command.args[i + 1] for i, a in enumerate(command.args[:-1]) if a == "-t"]
        found.extend(directories or operands[-1:])
    return tuple(found)


def _written_paths(tool: str, args: JsonValue, arguments: ToolArguments) -> Iterator[str]:
    yield from arguments.values(tool, ArgumentRole.WRITE_PATH, args)
    for line in arguments.values(tool, ArgumentRole.COMMAND, args):
        for command in resolve(line).commands:
            yield from write_targets(command)


def _commands(tool: str, args: JsonValue, arguments: ToolArguments) -> Iterator[SimpleCommand]:
    for line in arguments.values(tool, ArgumentRole.COMMAND, args):
        yield from resolve(line).commands


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


def is_system_path(path: str) -> bool:
    """Whether writing ``path`` writes ``/`` or a protected system directory.

    >>> [is_system_path(p) for p in ("/etc/passwd", "/tmp/../usr/bin/x", "/", "/dev/null", "etc/passwd")]
    [True, True, True, False, False]
    """
    parts = _absolute_components(path)
    if parts is None:
        return False
    if not parts:
        return True
    if ("/" + "/".join(parts)).casefold() in DEVICE_ALLOWLIST:
        return False
    return parts[0].casefold() in SYSTEM_DIRECTORIES


def is_protected_dot_path(path: str) -> bool:
    """Whether ``path`` has a ``.git``/``.ssh`` component or names a ``.env``/``.env.*`` file.

    >>> [is_protected_dot_path(p) for p in (".SSH/id_rsa", "a/.env.local", "repo/.git/HEAD")]
    [True, True, True]
    >>> [is_protected_dot_path(p) for p in (".gitignore", "name.git/HEAD", "environment.env")]
    [False, False, False]
    """
    components = [c.casefold() for c in clean_path(path).split("/") if c]
    if any(c in (".git", ".ssh") for c in components):
        return True
    last = components[-1] if components else ""
    return last == ".env" or last.startswith(".env.")


def _is_root_or_home(target: str) -> bool:
    for home in _HOMES:
        if target == home or target.startswith(home + "/"):
            return clean_path(target[len(home) :]) in ("", "*")
    parts = _absolute_components(target)
    return parts is not None and parts in ([], ["*"])


def removes_root_or_home(command: SimpleCommand) -> bool:
    """Whether a sub-command is a recursive ``rm`` of ``/`` or ``~``.

    >>> [removes_root_or_home(resolve(c).commands[0]) for c in ("rm -rf /", "rm -fr -- ~", "rm -rf ./build")]
    [True, True, False]
    """
    if not program_matches(command.program, "rm"):
        return False
    recursive = any(
        a == "--recursive" or (a.startswith("-") and not a.startswith("--") and ("r" in a or "R" in a))
        for a in command.args[: command.args.index("--") if "--" in command.args else None]
    )
    return recursive and any(_is_root_or_home(t) for t in _operands(command.args))


# -- the rule --------------------------------------------------------------------------------


def _describe(matcher: GuardMatcher) -> str:
    match matcher:
        case ToolNamed() | BashProgram() | ReadPath() | EditPath():
            return describe_matcher(matcher)
        case RecursiveRemoveOfRootOrHome():
            return "destructive command: recursive remove of / or ~"
        case SystemPathWrite():
            return "write to a protected system path (/, /etc, /usr, /bin, /sbin, /sys, /boot, /dev)"
        case ProtectedDotPathWrite():
            return "write to a protected VCS/secret path (.git, .ssh, .env)"
        case _:
            assert_never(matcher)


def guard_matches(matcher: GuardMatcher, tool: str, args: JsonValue, arguments: ToolArguments) -> bool:
    """Whether ``matcher`` trips for ``tool`` called with ``args`` (rule forms: any part)."""
    match matcher:
        case ToolNamed() | BashProgram() | ReadPath() | EditPath():
            return matches_any(matcher, tool, args, arguments)
        case RecursiveRemoveOfRootOrHome():
            return any(removes_root_or_home(c) for c in _commands(tool, args, arguments))
        case SystemPathWrite():
            return any(is_system_path(p) for p in _written_paths(tool, args, arguments))
        case ProtectedDotPathWrite():
            return any(is_protected_dot_path(p) for p in _written_paths(tool, args, arguments))
        case _:
            assert_never(matcher)


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
        """Whether this guard trips for ``tool`` called with ``args``."""
        return guard_matches(self.matcher, tool, args, arguments)


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
    "is_protected_dot_path",
    "is_system_path",
    "removes_root_or_home",
    "write_targets",
]
