"""The Bash tool over real processes: allow/deny lists (the governance matcher), results, cancellation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from process_support import alive, wait_for_file, written

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import Denied, ToolError
from helikon.ids import CallId, RunId
from helikon.tools import BashTool, HostBackend, Sandbox

pytestmark = pytest.mark.integration


def context(token: CancellationToken | None = None) -> ToolContext[None]:
    return ToolContext(
        None,
        SessionState(),
        Actions(),
        token or CancellationToken(),
        TracerHandle(),
        CallId("c1"),
        RunId("r1"),
        "tester",
    )


def bash(tool: BashTool, command: str, **args: Any) -> str:
    result = anyio.run(tool.invoke, context(), {"command": command, **args})
    assert isinstance(result, str)
    return result


def denied(tool: BashTool, command: str) -> str:
    with pytest.raises(ToolError) as caught:
        bash(tool, command)
    assert isinstance(caught.value.failure, Denied)
    return str(caught.value)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "keep.txt").write_text("precious\n")
    return tmp_path


def test_results_read_like_a_terminal(root: Path) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root)))
    assert bash(tool, "cat keep.txt") == "precious\n[exit code 0]"
    assert bash(tool, "echo oops >&2; exit 3") == "[stderr]\noops\n[exit code 3]"
    assert (
        bash(tool, "sleep 5", timeout=0.3) == "[timed out: the command and everything it started were killed]"
    )
    assert bash(tool, "kill -TERM $$") == "[killed by SIGTERM]"


@pytest.mark.parametrize(
    "command",
    [
        "rm keep.txt",
        "echo ok && rm -f keep.txt",
        "sudo rm keep.txt",
        "bash -c 'rm keep.txt'",
        "/bin/rm keep.txt",
    ],
)
def test_denied_programs_are_refused_wherever_they_hide(root: Path, command: str) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root)), deny_commands=["rm"])
    assert "runs 'rm'" in denied(tool, command)
    assert (root / "keep.txt").read_text() == "precious\n"


def test_an_allow_list_fails_closed(root: Path) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root)), allow_commands=["echo", "ls", "cat"])
    assert bash(tool, "ls | cat && echo done").endswith("done\n[exit code 0]")
    assert "'python3'" in denied(tool, "echo hi; python3 -c 'print(1)'")
    assert "'rm'" in denied(tool, 'echo "$(rm keep.txt)"')
    assert "cannot be checked" in denied(tool, 'echo "$(ls"')
    assert (root / "keep.txt").exists()


def test_the_description_states_the_backend_and_the_lists(root: Path) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root), timeout=30), allow_commands=["git"], deny_commands=["rm"])
    text = tool.description
    assert "host (no containment)" in text and "not contained" in text
    assert "killed after 30 s" in text and "Only these programs may run: git" in text and "rm" in text
    assert tool.parameters["properties"]["timeout"]["maximum"] == 30


def test_firing_the_run_token_kills_the_command_tree(root: Path) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root), timeout=60))
    token = CancellationToken()

    async def main() -> str:
        async with anyio.create_task_group() as group:

            async def fire() -> None:
                with anyio.fail_after(10):
                    while not written(root / "bg.pid"):  # the pid, not just the redirect's empty file
                        await anyio.sleep(0.02)
                token.cancel()

            group.start_soon(fire)
            try:
                await tool.invoke(context(token), {"command": "sleep 300 & echo $! > bg.pid; wait"})
            except ToolError as exc:
                return str(exc)
        return "not cancelled"

    assert anyio.run(main, backend="trio") == "cancelled: the command and everything it started were killed"
    assert not alive(int(wait_for_file(root / "bg.pid")))


@pytest.mark.parametrize("args", [{"command": ""}, {"command": 3}, {"command": "ls", "timeout": -1}])
def test_bad_arguments_are_invalid(root: Path, args: dict[str, Any]) -> None:
    tool = BashTool(HostBackend(Sandbox.open(root)))
    with pytest.raises(ToolError, match="invalid arguments"):
        anyio.run(tool.invoke, context(), args)
