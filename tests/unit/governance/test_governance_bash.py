"""The operator-aware Bash matcher: splitting, wrappers, unquoting, ``bash -c``,
and the book's documented limitations (which must stay true and documented)."""

from __future__ import annotations

import pytest

from helikon.governance import (
    MAX_SHELL_DEPTH,
    RedirectKind,
    parse_command,
    program_matches,
    resolve,
    runs_any,
    runs_only,
    shell_payload,
    split_commands,
)


def programs(command: str) -> list[str]:
    return [c.program for c in resolve(command).commands]


# -- 1. splitting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("echo ok && rm -rf .", ["echo ok", "rm -rf ."]),
        ("a || b", ["a", "b"]),
        ("a; b", ["a", "b"]),
        ("a | b", ["a", "b"]),
        ("a |& b", ["a", "b"]),
        ("a & b", ["a", "b"]),
        ("a\nb", ["a", "b"]),
        ("a;;b;", ["a", "b"]),
        ("  ", []),
    ],
)
def test_splits_on_every_operator_the_book_lists(line: str, expected: list[str]) -> None:
    assert list(split_commands(line)) == expected


@pytest.mark.parametrize(
    "line",
    ["echo 'a && b; c | d'", 'echo "a && b; c | d"', "echo a\\;b", "echo $'a;b'"],
)
def test_operators_inside_quotes_or_escaped_are_text(line: str) -> None:
    assert len(split_commands(line)) == 1


@pytest.mark.parametrize("line", ["make 2>&1", "make >&2", "make &>/dev/null", "make &>>log", "make >| out"])
def test_redirection_ampersands_and_bars_are_not_operators(line: str) -> None:
    assert split_commands(line) == (line,)


def test_subshells_and_unquoted_substitutions_are_inspected() -> None:
    assert "rm" in programs("(cd /tmp && rm -rf x)")
    assert "rm" in programs("echo $(rm -rf /)")
    assert "rm" in programs("echo `rm -rf /`")
    assert "rm" in programs("if true; then rm -rf /; fi")
    assert "rm" in programs("f() { rm -rf /; }")


# -- 2. wrappers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "sudo rm -rf /",
        "sudo -u root rm x",
        "sudo -Eu root rm x",
        "sudo --user root rm x",
        "sudo --user=root -- rm x",
        "doas -u root rm x",
        "timeout 5 rm x",
        "timeout 5s rm x",
        "timeout -s KILL -k 2 10 rm x",
        "timeout --signal=KILL 5 rm x",
        "nice rm x",
        "nice -n 10 rm x",
        "nice -10 rm x",
        "nohup rm x",
        "stdbuf -oL rm x",
        "stdbuf -o L -e 0 rm x",
        "env rm x",
        "env -i PATH=/bin rm x",
        "env -u HOME FOO=1 rm x",
        "env -S 'rm -rf' /",
        "command rm x",
        "command -p rm x",
        "FOO=1 BAR='a b' rm x",
        "exec rm x",
        "time -p rm x",
        "sudo timeout 5 nice -n 1 nohup env A=1 command rm x",
        "/usr/bin/sudo rm x",
    ],
)
def test_wrappers_and_their_flags_are_stripped(line: str) -> None:
    assert programs(line) == ["rm"]


def test_a_bare_wrapper_or_assignment_runs_nothing() -> None:
    assert programs("sudo") == []
    assert programs("FOO=bar") == [""]  # no program, but an assignment an allow rule refuses
    assert resolve("FOO=bar").commands[0].assignments == ("FOO=bar",)
    assert parse_command("fi") is None


# -- 3. unquoting ------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["\\rm x", "'rm' x", '"rm" x', "r''m x", 'r""m x', "$'rm' x", "r\\m x"])
def test_the_program_token_is_unquoted(line: str) -> None:
    assert programs(line) == ["rm"]


def test_arguments_and_redirections_are_unquoted() -> None:
    cmd = parse_command("echo 'a b' \"c\" > '/etc/x y' 2>&1 >>log <in")
    assert cmd is not None
    assert cmd.args == ("a b", "c")
    kinds = [(r.kind, r.target) for r in cmd.redirects]
    assert kinds == [
        (RedirectKind.WRITE, "/etc/x y"),
        (RedirectKind.DUPLICATE, ""),
        (RedirectKind.APPEND, "log"),
        (RedirectKind.READ, "in"),
    ]


# -- 4. bash -c --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "bash -c 'rm -rf /'",
        "sh -c 'rm -rf /'",
        "bash -lc 'rm x'",
        "zsh -e -c 'rm x'",
        "bash -o pipefail -c 'rm x'",
    ],
)
def test_shell_c_payloads_are_followed(line: str) -> None:
    assert "rm" in programs(line)


def test_a_shell_without_c_has_no_payload() -> None:
    cmd = parse_command("bash script.sh -c x")
    assert cmd is not None and shell_payload(cmd) is None


def test_nesting_is_followed_to_the_bound_and_then_marked_opaque() -> None:
    def nest(depth: int) -> str:
        line = "rm x"
        for _ in range(depth):
            line = "sh -c " + "'" + line.replace("'", "'\\''") + "'"
        return line

    assert MAX_SHELL_DEPTH == 3
    assert "rm" in programs(nest(3)) and not resolve(nest(3)).opaque
    deep = resolve(nest(4))
    assert "rm" not in [c.program for c in deep.commands]
    assert deep.opaque


# -- the book's examples -----------------------------------------------------------------


@pytest.mark.parametrize("line", ["echo ok && rm -rf .", "sudo rm -rf /", "bash -c 'rm -rf /'"])
def test_one_rm_matcher_catches_the_books_three_examples(line: str) -> None:
    assert runs_any(line, {"rm"})


def test_deny_matching_is_lenient_and_allow_matching_exact() -> None:
    assert program_matches("/bin/rm", "rm") and program_matches("RM", "rm")
    assert not program_matches("rmdir", "rm")
    assert runs_any("/bin/rm -rf x", {"rm"})
    assert not runs_only("/tmp/evil/git status", {"git"})


def test_allow_matching_requires_every_sub_command_and_fails_closed() -> None:
    assert runs_only("git add . && git commit -m wip | git log", {"git"})
    assert not runs_only("git status && rm -rf .", {"git"})
    assert not runs_only("bash -c 'git status'", {"git"})  # bash itself is not git
    assert not runs_only("", {"git"})
    assert not runs_only('git commit -m "$(cat msg)"', {"git"})  # opaque


# -- scope & limitations (documented; these pin them) ------------------------------------


def test_a_substitution_inside_double_quotes_is_inspected() -> None:
    resolution = resolve('echo "$(rm -rf /)"')
    assert [c.program for c in resolution.commands] == ["echo", "rm"]
    assert not resolution.opaque


@pytest.mark.parametrize(
    ("line", "seen"),
    [
        ("find / -delete", "find"),
        ("find . -exec rm {} +", "rm"),
        ("echo x | xargs rm", "rm"),
        ("eval 'rm -rf /'", "rm"),
    ],
)
def test_indirect_programs_are_followed(line: str, seen: str) -> None:
    assert seen in programs(line)


def test_a_variable_program_is_opaque_and_deny_matching_fails_closed() -> None:
    resolution = resolve("$CMD -rf /")
    assert resolution.opaque and resolution.reasons == ("a program named by a variable or a substitution",)
    assert runs_any("$CMD -rf /", {"rm"})
    assert not runs_only("$CMD status", {"git"})


def test_limitation_heredoc_bodies_read_as_commands_err_on_the_side_of_matching() -> None:
    assert runs_any("cat <<EOF\nrm -rf /\nEOF", {"rm"})
