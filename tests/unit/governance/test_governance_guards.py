"""Guard rules and the built-in destructive breakers, with the book's examples."""

from __future__ import annotations

import pytest

from helikon._json import JsonValue
from helikon.governance import (
    GuardAction,
    GuardRule,
    ProtectedDotPathWrite,
    RecursiveRemoveOfRootOrHome,
    SystemPathWrite,
    is_protected_dot_path,
    is_system_path,
)

DEFAULTS = GuardRule.destructive_defaults()


def trips(tool: str, args: JsonValue) -> list[str]:
    return [type(g.matcher).__name__ for g in DEFAULTS if g.matches(tool, args)]


def bash_trips(command: str) -> list[str]:
    return trips("Bash", {"command": command})


def test_the_defaults_are_three_asking_breakers_in_order() -> None:
    assert [type(g.matcher) for g in DEFAULTS] == [
        RecursiveRemoveOfRootOrHome,
        SystemPathWrite,
        ProtectedDotPathWrite,
    ]
    assert all(g.action is GuardAction.ASK for g in DEFAULTS)
    assert all(g.message for g in DEFAULTS)


# -- recursive remove of / and ~ ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf ~",
        "rm -fr /",
        "rm -Rf /",
        "rm -r /",
        "rm --recursive --force /",
        "rm -rf -- /",
        "rm -rf /*",
        "rm -rf //",
        "rm -rf /tmp/..",
        "rm -rf ~/",
        "rm -rf ~/*",
        "rm -rf $HOME",
        'rm -rf "${HOME}"',
        "rm -rf / tmp",
        "sudo rm -rf /",
        "bash -c 'rm -rf /'",
        "echo ok && rm -rf ~",
        "/bin/rm -rf /",
    ],
)
def test_recursive_remove_of_root_or_home_trips(command: str) -> None:
    assert "RecursiveRemoveOfRootOrHome" in bash_trips(command)


@pytest.mark.parametrize(
    "command",
    ["rm -rf ./build", "rm file.txt", "rm -f /", "rm -rf ~/project", "rm -rf /tmp/x", "echo rm -rf /"],
)
def test_ordinary_removes_do_not_trip(command: str) -> None:
    assert "RecursiveRemoveOfRootOrHome" not in bash_trips(command)


def test_a_recursive_remove_of_a_system_subtree_is_a_system_path_write() -> None:
    assert bash_trips("rm -rf /etc") == ["SystemPathWrite"]
    assert bash_trips("rm -rf /usr/local") == ["SystemPathWrite"]


# -- writes to protected system paths ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "echo x > /etc/passwd",
        "echo x >/etc/passwd",
        "echo x >> /usr/lib/x",
        "echo x &> /bin/sh",
        "echo x 2> /sbin/init",
        "echo x > /sys/kernel/x",
        "echo x > /boot/grub.cfg",
        "echo x > /dev/sda",
        "echo x > /",
        "echo x > /tmp/../etc/hosts",
        "echo x | tee /etc/hosts",
        "echo x | sudo tee -a /etc/hosts",
        "dd if=/dev/zero of=/dev/sda",
        "cp evil /usr/bin/ls",
        "mv evil /bin/",
        "install -m 755 tool /usr/local/bin/tool",
        "touch /etc/nologin",
        "sh -c 'echo x > /etc/passwd'",
    ],
)
def test_writes_to_system_paths_trip(command: str) -> None:
    assert "SystemPathWrite" in bash_trips(command)


@pytest.mark.parametrize(
    "command",
    [
        "make > /dev/null",
        "make 2>/dev/null",
        "make &>/dev/null",
        "make >> /dev/null 2>&1",
        "echo x > /dev/stderr",
        "echo x > /dev/stdout",
        "cat /etc/passwd",
        "cp /etc/hosts ./hosts",
        "echo x > out.txt",
        "echo x > /tmp/etc/x",
    ],
)
def test_reads_and_device_allowlist_do_not_trip(command: str) -> None:
    assert "SystemPathWrite" not in bash_trips(command)


def test_write_tools_are_guarded_by_their_path_argument() -> None:
    assert "SystemPathWrite" in trips("Write", {"path": "/etc/passwd", "content": "x"})
    assert "SystemPathWrite" in trips("Edit", {"file_path": "/usr/lib/x"})
    assert trips("Write", {"path": "./notes.txt", "content": "x"}) == []
    assert trips("Read", {"path": "/etc/passwd"}) == []


def test_a_relative_target_climbing_into_a_system_directory_name_trips() -> None:
    assert bash_trips("echo x > ../../etc/passwd") == ["SystemPathWrite"]
    assert bash_trips("echo x > ../notes/etc.txt") == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/etc", True), ("/ETC/passwd", True), ("/etcetera", False), ("/dev/null", False), ("/dev/tty", False)],
)
def test_is_system_path(path: str, expected: bool) -> None:
    assert is_system_path(path) is expected


# -- the .git/.ssh/.env write breaker ----------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        "repo/.git/HEAD",
        "a/.ssh/authorized_keys",
        ".env",
        "src/.env.local",
        ".SSH/id_rsa",
        ".Git/config",
        "config/.ENV",
        "src/../.git/config",
        ".git\\config",
    ],
)
def test_the_dot_path_breaker_trips_on_component_matches(path: str) -> None:
    assert is_protected_dot_path(path)
    assert "ProtectedDotPathWrite" in trips("Write", {"path": path, "content": "x"})


@pytest.mark.parametrize(
    "path", [".gitignore", "name.git/config", "environment.env", ".envrc", "src/main.rs", ".github/ci.yml"]
)
def test_the_dot_path_breaker_ignores_lookalikes(path: str) -> None:
    assert not is_protected_dot_path(path)
    assert trips("Write", {"path": path, "content": "x"}) == []


def test_the_dot_path_breaker_covers_bash_writes_but_not_reads() -> None:
    assert "ProtectedDotPathWrite" in bash_trips("echo x > .git/config")
    assert "ProtectedDotPathWrite" in bash_trips("echo key | tee .ssh/authorized_keys")
    assert "ProtectedDotPathWrite" in bash_trips("cp .env.example .env")
    assert bash_trips("cat .env") == []
    assert bash_trips("echo x > notes.txt") == []


# -- user guard rules --------------------------------------------------------------------


def test_user_guard_rules_use_the_rule_forms_with_an_action() -> None:
    ask = GuardRule.bash_command("git", message="git needs a human")
    deny = GuardRule.tool("Deploy", GuardAction.DENY)
    assert ask.action is GuardAction.ASK and ask.message == "git needs a human"
    assert ask.matches("Bash", {"command": "make && git push"})
    assert deny.matches("Deploy", {}) and deny.message == "tool 'Deploy'"
    assert GuardRule.read("*.pem").matches("Read", {"path": "keys/a.pem"})
    assert GuardRule.edit("migrations/**").matches("Write", {"path": "migrations/0001.sql"})
