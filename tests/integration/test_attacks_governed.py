"""Issue 30 through real governed runs: a model's Bash call that hides a write or
a program must be refused by the permission pipeline before the command runs.

Every target is a sentinel inside the test's own project directory; the
commands run (when allowed at all) through ``HostBackend`` rooted there.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from helikon import AllowRule, DenyRule, LlmAgent, PermissionMode, RunContext, ToolOutputItem
from helikon.testing import MockModel, call_tools, say
from helikon.tools import BashTool, HostBackend, Sandbox


def run_bash(root: Path, command: str, ctx: RunContext[Any]) -> str:
    with Sandbox.open(root) as box:
        agent = LlmAgent(
            name="coder",
            model=MockModel([call_tools(("Bash", {"command": command})), say("done")]),
            tools=[BashTool(HostBackend(box))],
        )

        async def go() -> list[Any]:
            return [e async for e in agent.run(ctx, "go")]

        events = anyio.run(go)
    (output,) = [e.item.content for e in events if type(e) is ToolOutputItem]
    return str(output)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "keep.txt").write_text("sentinel\n")
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        "exec >.git/hooks/pre-commit; echo '#!/bin/sh'; echo 'touch pwned'",
        "{ echo '#!/bin/sh'; } > .git/hooks/pre-commit",
        "cd .git && echo x > hooks/pre-commit",
        "echo x | tee .gi?/hooks/pre-commit",
    ],
)
def test_a_hook_write_is_refused_with_default_guards_and_no_handler(project: Path, command: str) -> None:
    output = run_bash(project, command, RunContext.ephemeral(None))

    assert output.startswith("denied:")
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.parametrize("command", ["> .env", "exec 3>.env.local", "printf 'A=1' >> .e?v"])
def test_an_env_write_without_a_command_word_is_refused(project: Path, command: str) -> None:
    output = run_bash(project, command, RunContext.ephemeral(None))

    assert output.startswith("denied:")
    assert not list(project.glob(".env*"))


@pytest.mark.parametrize(
    "command",
    ["{rm,-f,keep.txt}", "echo 'rm -f keep.txt' | sh", "bash <<< 'rm -f keep.txt'", "setsid rm -f keep.txt"],
)
def test_a_deny_rule_on_rm_holds_in_a_run(project: Path, command: str) -> None:
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.bash_command("rm")])

    output = run_bash(project, command, ctx)

    assert output.startswith("denied:")
    assert (project / "keep.txt").read_text() == "sentinel\n"


def test_an_unreadable_line_is_refused_when_nobody_can_be_asked(project: Path) -> None:
    (project / "wipe.sh").write_text("rm -f keep.txt\n")
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.bash_command("rm")])

    output = run_bash(project, "sh wipe.sh", ctx)

    assert output.startswith("denied:") and "script file" in output
    assert (project / "keep.txt").exists()


@pytest.mark.parametrize(
    "command",
    ["PATH=.:$PATH git status", "env PATH=. git status", "GIT_EXEC_PATH=. PATH=. git status"],
)
def test_an_allow_rule_does_not_pre_approve_a_planted_program(project: Path, command: str) -> None:
    planted = project / "git"
    planted.write_text("#!/bin/sh\necho planted > pwned\n")
    planted.chmod(planted.stat().st_mode | stat.S_IXUSR)
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_mode(PermissionMode.DONT_ASK)
        .with_allow_rules([AllowRule.bash_command("git")])
    )

    output = run_bash(project, command, ctx)

    assert output.startswith("denied:")
    assert not (project / "pwned").exists()
