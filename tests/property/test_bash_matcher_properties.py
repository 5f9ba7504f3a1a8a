"""Issue 30: a denied program stays denied however it is wrapped, quoted, braced
or chained, and an allow rule never passes a prefixed program. The matcher is
pure: nothing here runs a command."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from helikon.governance import AllowRule, DenyRule, GuardRule, Verdict

RM = DenyRule.bash_command("rm")
GIT = AllowRule.bash_command("git")
DEFAULTS = GuardRule.destructive_defaults()

WRAPPERS = [
    "sudo", "sudo -u root", "doas", "env", "env -i A=1", "nice -n 5", "nohup", "timeout 5", "stdbuf -oL",
    "setsid", "ionice -c3", "taskset -c 0", "flock /tmp/l", "chrt -f 10", "unshare -r", "nsenter -t 1 -m",
    "xargs -0", "busybox", "exec", "command", "time", "strace -f", "faketime +1d", "eatmydata", "coproc",
]  # fmt: skip
SHELLS = ["bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "fish", "tcsh", "csh", "busybox sh", "yash"]
PROGRAM_SPELLINGS = [
    "rm",
    "\\rm",
    "'rm'",
    '"rm"',
    "r''m",
    "$'rm'",
    "$'\\x72m'",
    "/bin/rm",
    "{rm,}",
    "r{m,}",
    "/b?n/rm",
]


def _quote_into_shell(line: str, shell: str, style: int) -> str:
    if style == 0:
        return f"{shell} -c {shlex.quote(line)}"
    if style == 1:
        return f"{shell} <<< {shlex.quote(line)}"
    if style == 2:
        return f"echo {shlex.quote(line)} | {shell}"
    return f"{shell} -c {shlex.quote(line)} x"


@st.composite
def hidden_rm(draw: st.DrawFn) -> str:
    line = f"{draw(st.sampled_from(PROGRAM_SPELLINGS))} -rf x"
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            line = f"{draw(st.sampled_from(WRAPPERS))} {line}"
        elif choice == 1 and "'" not in line:
            line = _quote_into_shell(line, draw(st.sampled_from(SHELLS)), draw(st.integers(0, 3)))
        elif choice == 2:
            before = draw(st.sampled_from(["ls", "echo ok", "true"]))
            line = f"{before} {draw(st.sampled_from(['&&', ';', '||', '|']))} {line}"
        elif choice == 3:
            line = f"( {line} )" if draw(st.booleans()) else f"{{ {line}; }}"
        elif choice == 4:
            line = f"f() {{ {line}; }}; f"
        else:
            line = f'echo "$({line})"'
    return line


@settings(max_examples=300, deadline=None)
@given(hidden_rm())
def test_a_hidden_rm_is_never_clear(line: str) -> None:
    assert RM.check("Bash", {"command": line}) is not Verdict.NO, line


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["PATH=.:$PATH", "LD_PRELOAD=./x.so", "GIT_SSH_COMMAND=evil", "sudo", "env", "doas", "su -c"]
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["git status", "git pull", "git log --oneline"]),
)
def test_an_allow_rule_never_passes_a_prefixed_program(prefixes: list[str], command: str) -> None:
    line = " ".join(prefixes) + " " + (shlex.quote(command) if prefixes[-1] == "su -c" else command)
    assert not GIT.matches("Bash", {"command": line}), line


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(
        [".git/hooks/pre-commit", ".env", ".ssh/authorized_keys", ".gi?/config", ".{x,git}/HEAD"]
    ),
    st.sampled_from(["echo x > {}", "exec >{}", "> {}", "tee {}", "cp a {}", "{{ echo; }} >> {}", "2>{}"]),
    st.sampled_from(["", "sudo ", "env ", "timeout 5 "]),
)
def test_a_dot_path_write_always_trips(target: str, template: str, prefix: str) -> None:
    line = prefix + template.format(target)
    assert any(g.check("Bash", {"command": line}) is not Verdict.NO for g in DEFAULTS), line
