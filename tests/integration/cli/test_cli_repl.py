"""``helikon repl`` in a pseudo-terminal: streaming, slash commands, hot reload, a broken save, Ctrl-C."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pexpect
import pytest
from cli_support import HELIKON, env, write

pytestmark = pytest.mark.integration


def sidecar(chat: str, slow_ending: str = "old ending", pause: float = 2.0) -> str:
    return f"""
[agents.chat]
description = "Chats"
model = {{ provider = "mock", replies = [ {{ say = "{chat}" }} ] }}

[agents.slow]
description = "Takes its time"
model = {{ provider = "mock", replies = [ [
    {{ type = "text", text = "Working... " }},
    {{ type = "pause", seconds = {pause} }},
    {{ type = "text", text = "{slow_ending}" }},
    {{ type = "finish", reason = "stop" }},
] ] }}
"""


def save(path: Path, text: str) -> None:
    """Write ``text`` with a later modification time than the previous save."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


@pytest.fixture
def repl(tmp_path: Path) -> pexpect.spawn:
    write(tmp_path, "agents.toml", sidecar("first version"))
    child = pexpect.spawn(
        str(HELIKON),
        ["repl", "--agent", "chat"],
        cwd=str(tmp_path),
        env=env(tmp_path),
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    child.expect_exact("helikon repl: chat, slow; /help for commands")
    child.expect_exact("chat> ")
    yield child
    if child.isalive():
        child.terminate(force=True)


def ask(child: pexpect.spawn, line: str) -> None:
    child.sendline(line)


def test_a_session_with_hot_reload_a_broken_save_and_slash_commands(
    repl: pexpect.spawn, tmp_path: Path
) -> None:
    path = tmp_path / "agents.toml"
    ask(repl, "hello")
    repl.expect_exact("first version")
    repl.expect_exact("chat> ")

    # Saving the sidecar reloads it, with no /reload.
    save(path, sidecar("second version"))
    repl.expect_exact("reloaded agents.toml (saved): chat, slow")
    ask(repl, "hello again")
    repl.expect_exact("second version")
    repl.expect_exact("chat> ")

    # A broken save is reported and the last good definitions stay.
    save(path, "[agents.chat\nmodel = nonsense\n")
    repl.expect_exact("reload failed:")
    repl.expect_exact("not valid TOML")
    repl.expect_exact("keeping the last good definitions")
    ask(repl, "still there?")
    repl.expect_exact("second version")
    repl.expect_exact("chat> ")

    # A save that fails validation (a handoff cycle) is kept out as well.
    save(
        path,
        sidecar("third version")
        + '\n[agents.loop]\nmodel = { provider = "mock", replies = [] }\nhandoffs = ["loop"]\n',
    )
    repl.expect_exact("handoff cycle detected: loop -> loop")
    repl.expect_exact("keeping the last good definitions")

    # Fixing the file brings the new definitions in.
    save(path, sidecar("fourth version"))
    repl.expect_exact("reloaded agents.toml (saved)")
    ask(repl, "and now?")
    repl.expect_exact("fourth version")
    repl.expect_exact("chat> ")

    ask(repl, "/agents")
    repl.expect_exact("* chat - Chats")
    repl.expect_exact("  slow - Takes its time")
    ask(repl, "/agent nobody")
    repl.expect_exact("no agent 'nobody'; /agents lists them")
    ask(repl, "/frobnicate")
    repl.expect_exact("unknown command /frobnicate")
    ask(repl, "/help")
    repl.expect_exact("/reload       reload the sidecar now")
    ask(repl, "/reload")
    repl.expect_exact("reloaded agents.toml (/reload)")
    ask(repl, "/reset")
    repl.expect_exact("conversation reset")
    ask(repl, "/agent slow")
    repl.expect_exact("now talking to slow")
    repl.expect_exact("slow> ")
    ask(repl, "/quit")
    repl.expect(pexpect.EOF)
    repl.wait()
    assert repl.exitstatus == 0
    assert "Traceback" not in (repl.before or "")


def test_a_reload_mid_turn_leaves_the_turn_in_flight_alone(repl: pexpect.spawn, tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    ask(repl, "/agent slow")
    repl.expect_exact("slow> ")
    ask(repl, "go")
    repl.expect_exact("Working... ")
    save(path, sidecar("first version", slow_ending="new ending"))
    repl.expect_exact("old ending")  # the turn in flight finishes as it started ...
    # ... uninterrupted: the reload notice waits until the answer is complete.
    assert repl.before == "", repr(repl.before)
    repl.expect_exact("reloaded agents.toml (saved)")  # (before or after the prompt, under load)
    ask(repl, "go again")
    repl.expect_exact("new ending")  # the next turn uses the new definitions
    repl.expect_exact("slow> ")


def test_ctrl_c_cancels_the_turn_not_the_session(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", sidecar("first version", pause=60))
    child = pexpect.spawn(
        str(HELIKON),
        ["repl", "--agent", "slow"],
        cwd=str(tmp_path),
        env=env(tmp_path),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect_exact("slow> ")
        ask(child, "go")
        child.expect_exact("Working... ")
        started = time.monotonic()
        child.sendintr()
        child.expect_exact("turn cancelled")
        assert time.monotonic() - started < 20  # not the 60 s pause
        # One sentence, not the failure's Python repr (``run failed: Cancelled()``).
        assert "Cancelled()" not in child.before and "run failed" not in child.before
        child.expect_exact("slow> ")
        # The session goes on: another command and another turn work.
        ask(child, "/agent chat")
        child.expect_exact("chat> ")
        ask(child, "hello")
        child.expect_exact("first version")
        child.expect_exact("chat> ")
        # Ctrl-C at the prompt does not leave either; Ctrl-D does.
        child.sendintr()
        child.expect_exact("(Ctrl-D or /quit leaves)")
        child.expect_exact("chat> ")
        child.sendeof()
        child.expect(pexpect.EOF)
        child.wait()
        assert child.exitstatus == 0
    finally:
        if child.isalive():
            child.terminate(force=True)


SPINNER = """
[agents.spinner]
model = { provider = "mock", replies = [ { call = [ { name = "spin" } ] }, { say = "never" } ] }
tools = ["spin"]

[agents.zzz]
model = { provider = "mock", replies = [ { say = "still here" } ] }

[tools.spin]
description = "Spins"
max_steps = 1000000000000
timeout = 120
inline = '''
def run(args):
    for i in range(1000000000):
        for j in range(1000000000):
            pass
'''
"""


def workers_in(directory: Path) -> list[int]:
    """The Starlark worker processes running in ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                b"_starlark_worker.py" in (proc / "cmdline").read_bytes()
                and (proc / "cwd").resolve() == directory
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_ctrl_c_during_a_starlark_tool_kills_its_worker(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", SPINNER)
    child = pexpect.spawn(
        str(HELIKON), ["repl"], cwd=str(tmp_path), env=env(tmp_path), encoding="utf-8", timeout=30
    )
    try:
        child.expect_exact("spinner> ")
        ask(child, "spin")
        child.expect_exact("→ spin({})")
        deadline = time.monotonic() + 10
        while not workers_in(tmp_path):  # the worker is running the loop
            assert time.monotonic() < deadline, "no Starlark worker started"
            time.sleep(0.05)
        started = time.monotonic()
        child.sendintr()
        child.expect_exact("turn cancelled")
        assert time.monotonic() - started < 20
        child.expect_exact("spinner> ")
        assert workers_in(tmp_path) == []
        ask(child, "/agent zzz")
        ask(child, "hello")
        child.expect_exact("still here")
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_history_is_kept_between_sessions(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", sidecar("first version"))
    for line in ("hello", "/quit"):
        child = pexpect.spawn(
            str(HELIKON), ["repl"], cwd=str(tmp_path), env=env(tmp_path), encoding="utf-8", timeout=30
        )
        child.expect_exact("chat> ")
        ask(child, line)
        if line == "/quit":
            child.expect(pexpect.EOF)
        else:
            child.expect_exact("first version")
            child.expect_exact("chat> ")
            child.sendeof()
            child.expect(pexpect.EOF)
    assert "hello" in (tmp_path / ".helikon_history").read_text()
