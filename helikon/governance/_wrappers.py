"""The wrapper and shell tables the Bash matcher (:mod:`._bash`) reads.

A *wrapper* is a program that runs another program given on its command line
(``sudo``, ``env``, ``setsid``, ``flock``, ...); the matcher steps over its
options, option values and operands to the program it runs. A *shell* reads
its program from ``-c``, a here-string, a script file or its input. Both
tables are data: extend them by building your own matcher on
:func:`~helikon.governance.parse_command` if you need more.
"""

from __future__ import annotations

from typing import Final, final

import attrs

#: Shells whose ``-c`` payload (or here-string) is re-read as a command line, and
#: which otherwise read their program from a script file or their input.
SHELLS: Final = frozenset(
    {
        "ash", "bash", "csh", "dash", "elvish", "fish", "hush", "ksh", "ksh93", "loksh", "mksh",
        "nu", "oksh", "pdksh", "posh", "powershell", "pwsh", "rbash", "rc", "sh", "tcsh",
        "xonsh", "yash", "zsh",
    }
)  # fmt: skip

#: Wrappers an allow rule tolerates before its program; any other wrapper (``sudo``,
#: ``env``, ``chroot``, ``nsenter``, ...) or a ``VAR=x`` assignment makes an allow rule refuse.
ALLOW_RULE_WRAPPERS: Final = frozenset({"command", "ionice", "nice", "nohup", "stdbuf", "time", "timeout"})


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
        command_options: options whose value is a command line run by a shell
            (``su -c``, ``script -c``); the words after it are not a program.
        shell_rest: the words after the options form a command line run by a
            shell (``watch``, ``sg``, ``parallel``).
        stop_words: words that end that command line (``parallel``'s ``:::``).
        reads_input: with nothing to run, the wrapper starts a shell that reads
            its input (``su``, ``script``, ``chroot``, ``parallel``).
    """

    name: str
    short_with_value: str = ""
    long_with_value: tuple[str, ...] = ()
    operands: int = 0
    assignments: bool = False
    numeric_options: bool = False
    split_string: tuple[str, ...] = ()
    command_options: tuple[str, ...] = ()
    shell_rest: bool = False
    stop_words: tuple[str, ...] = ()
    reads_input: bool = False


_SUDO_LONG: Final = (
    "chdir", "chroot", "close-from", "command-timeout", "group", "host", "other-user", "prompt",
    "role", "type", "user",
)  # fmt: skip

#: The wrappers stripped before the program is read. ``sudo -h`` is help, not
#: ``-h host``, so ``h`` is deliberately absent from sudo's valued options.
WRAPPERS: Final[tuple[Wrapper, ...]] = (
    Wrapper("builtin"),
    Wrapper("busybox"),
    Wrapper("capsh", long_with_value=("caps", "user", "chroot"), command_options=("-c",)),
    Wrapper("catchsegv"),
    Wrapper("cgexec", short_with_value="g"),
    Wrapper("chpst", short_with_value="uUbenlmdoptc/"),
    Wrapper("chroot", long_with_value=("userspec", "groups"), operands=1, reads_input=True),
    Wrapper("chrt", short_with_value="TPD", operands=1),
    Wrapper("command"),
    Wrapper("dbus-run-session", long_with_value=("config-file", "dbus-daemon")),
    Wrapper("doas", short_with_value="Cu"),
    Wrapper("eatmydata"),
    Wrapper(
        "env",
        short_with_value="uCS",
        long_with_value=("unset", "chdir", "split-string"),
        assignments=True,
        split_string=("-S", "--split-string"),
    ),
    Wrapper("exec", short_with_value="a"),
    Wrapper("fakeroot", short_with_value="lsi", long_with_value=("lib", "faked")),
    Wrapper("faketime", short_with_value="f", operands=1),
    Wrapper("firejail"),
    Wrapper(
        "flock",
        short_with_value="wE",
        long_with_value=("timeout", "conflict-exit-code"),
        operands=1,
        command_options=("-c", "--command"),
    ),
    Wrapper("gosu", operands=1),
    Wrapper("ionice", short_with_value="cnpPu", long_with_value=("class", "classdata", "pid", "pgid", "uid")),
    Wrapper("ltrace", short_with_value="aAeEfLnopsSuxXw", long_with_value=("output", "library")),
    Wrapper("nice", short_with_value="n", long_with_value=("adjustment",), numeric_options=True),
    Wrapper("nocache", short_with_value="n"),
    Wrapper("nohup"),
    Wrapper("nsenter", short_with_value="tSGT", long_with_value=("target", "setuid", "setgid")),
    Wrapper("numactl", short_with_value="CNmipP"),
    Wrapper(
        "parallel",
        short_with_value="jSaEIJLlnNPkX",
        long_with_value=("jobs", "sshlogin", "arg-file", "eof", "max-lines", "max-args", "delay", "timeout"),
        shell_rest=True,
        stop_words=(":::", "::::", ":::+", "::::+"),
        reads_input=True,
    ),
    Wrapper("pkexec", long_with_value=("user",)),
    Wrapper("prlimit", short_with_value="p", long_with_value=("pid",)),
    Wrapper("proxychains", short_with_value="f"),
    Wrapper("proxychains4", short_with_value="f"),
    Wrapper("run0", short_with_value="uDg", long_with_value=("user", "group", "chdir", "property", "unit")),
    Wrapper(
        "runuser",
        short_with_value="ugGsw",
        long_with_value=("user", "group", "supp-group", "shell"),
        command_options=("-c", "--command", "--session-command"),
        reads_input=True,
    ),
    Wrapper(
        "script",
        short_with_value="ETIOBm",
        long_with_value=(
            "echo",
            "timing",
            "log-in",
            "log-out",
            "log-io",
            "log-timing",
            "logging-format",
            "output-limit",
        ),
        operands=1,
        command_options=("-c", "--command"),
        reads_input=True,
    ),
    Wrapper("sem", short_with_value="jS", long_with_value=("jobs", "id"), shell_rest=True),
    Wrapper("setarch", operands=1),
    Wrapper(
        "setpriv",
        long_with_value=(
            "reuid",
            "regid",
            "ruid",
            "rgid",
            "euid",
            "egid",
            "groups",
            "inh-caps",
            "ambient-caps",
            "bounding-set",
            "securebits",
            "pdeathsig",
            "selinux-label",
            "apparmor-profile",
            "landlock-access",
            "landlock-rule",
            "seccomp-filter",
        ),
    ),
    Wrapper("setsid"),
    Wrapper("sg", operands=1, command_options=("-c",), shell_rest=True, reads_input=True),
    Wrapper("stdbuf", short_with_value="ioe", long_with_value=("input", "output", "error")),
    Wrapper("strace", short_with_value="abeEIoOpPsSuUX", long_with_value=("output", "user", "env")),
    Wrapper(
        "su",
        short_with_value="gGsw",
        long_with_value=("group", "supp-group", "shell", "whitelist-environment"),
        operands=1,
        command_options=("-c", "--command", "--session-command"),
        reads_input=True,
    ),
    Wrapper("su-exec", operands=1),
    Wrapper("sudo", short_with_value="CDgpRrtTUu", long_with_value=_SUDO_LONG),
    Wrapper(
        "systemd-run",
        short_with_value="pEuMHs",
        long_with_value=(
            "property",
            "setenv",
            "unit",
            "machine",
            "host",
            "description",
            "slice",
            "uid",
            "gid",
            "nice",
            "working-directory",
            "on-calendar",
            "on-active",
            "service-type",
        ),
    ),
    Wrapper("taskset", operands=1),
    Wrapper("time", short_with_value="fo", long_with_value=("format", "output")),
    Wrapper("timeout", short_with_value="sk", long_with_value=("kill-after", "signal"), operands=1),
    Wrapper("torsocks", short_with_value="uapP"),
    Wrapper("trickle", short_with_value="udwtlsn"),
    Wrapper("unbuffer"),
    Wrapper("unshare", short_with_value="SGRwl", long_with_value=("setuid", "setgid", "root", "wd")),
    Wrapper("valgrind"),
    Wrapper("watch", short_with_value="nq", long_with_value=("interval", "equexit"), shell_rest=True),
    Wrapper(
        "xargs",
        short_with_value="adEILnPs",
        long_with_value=(
            "arg-file",
            "delimiter",
            "eof",
            "replace",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ),
    ),
    Wrapper("xvfb-run", short_with_value="nsfepl"),
)

_WRAPPER_BY_NAME: Final = {w.name: w for w in WRAPPERS}


def wrapper_named(program: str) -> Wrapper | None:
    """The wrapper whose name is ``program``'s basename, if any.

    >>> wrapper_named("/usr/bin/sudo").name, wrapper_named("git")
    ('sudo', None)
    """
    return _WRAPPER_BY_NAME.get(program.rsplit("/", 1)[-1])


__all__ = ["ALLOW_RULE_WRAPPERS", "SHELLS", "WRAPPERS", "Wrapper", "wrapper_named"]
