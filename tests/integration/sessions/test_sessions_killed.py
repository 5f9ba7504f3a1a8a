"""A run killed mid-tool (SIGKILL, no cleanup of any kind) leaves a SQLite
session that reopens and projects to a valid conversation, and the chat goes
on from it in a new process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from helikon.codec import from_json
from helikon.ids import CallId
from helikon.items import AssistantMessage, Item, TextPart, ToolCall, ToolResult, user_text
from helikon.sessions import (
    INTERRUPTED_RESULT,
    SqliteSession,
    ToolCallRecorded,
    ToolResultRecorded,
    conversation_problems,
    project,
)

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "killed_agent.py"
TIMEOUT = 60


def run_child(db: Path, mode: str, backend: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(db), "chat", mode, backend],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_child_and_kill_it_in_the_tool(db: Path, backend: str) -> None:
    with subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db), "chat", "hang", backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        watchdog = threading.Timer(TIMEOUT, proc.kill)  # never hang the suite
        watchdog.start()
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            if line.strip() != "IN_TOOL":
                proc.kill()
                pytest.fail(f"the child said {line!r}; stderr: {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)  # no cleanup of any kind
            assert proc.wait() == -signal.SIGKILL
        finally:
            watchdog.cancel()
            proc.kill()


def read(db: Path) -> list[object]:
    async def go() -> list[object]:
        async with SqliteSession.open(db, "chat") as session:
            return list(await session.events())

    return anyio.run(go)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_run_killed_mid_tool_leaves_a_session_that_projects_to_a_valid_conversation(
    tmp_path: Path, backend: str
) -> None:
    db = tmp_path / "chat.db"
    run_child(db, "greet", backend)
    run_child_and_kill_it_in_the_tool(db, backend)

    log = read(db)
    # both tool calls were committed before the tool ran; no result was
    assert [type(e).__name__ for e in log] == [
        "UserMessageEvent",
        "AssistantMessageEvent",
        "UserMessageEvent",
        "AssistantMessageEvent",
        "ToolCallRecorded",
        "ToolCallRecorded",
    ]
    assert not any(type(e) is ToolResultRecorded for e in log)
    assert [e.call_id for e in log if type(e) is ToolCallRecorded] == ["call-quick", "call-slow"]

    conversation = project(log)  # type: ignore[arg-type]
    assert conversation_problems(conversation) == ()
    assert conversation == (
        user_text("hi"),
        AssistantMessage((TextPart("Hello!"),), "researcher"),
        user_text("find x"),
        AssistantMessage((TextPart("Looking it up."),), "researcher"),
        ToolCall(CallId("call-quick"), "quick_lookup", '{"query":"x"}'),
        ToolCall(CallId("call-slow"), "slow_lookup", '{"query":"x"}'),
        ToolResult(CallId("call-quick"), "quick_lookup", INTERRUPTED_RESULT, is_error=True),
        ToolResult(CallId("call-slow"), "slow_lookup", INTERRUPTED_RESULT, is_error=True),
    )

    # a new process picks the chat up: the model sees the repaired history
    out = run_child(db, "resume", backend)
    sent: tuple[Item, ...] = from_json(out.strip().splitlines()[-1], tuple[Item, ...])
    assert sent == (*conversation, user_text("are you there?"))
    final = project(read(db))  # type: ignore[arg-type]
    assert conversation_problems(final) == ()
    assert final[-1] == AssistantMessage((TextPart("Yes; the lookup was interrupted."),), "researcher")
