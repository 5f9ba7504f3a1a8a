"""Issue 30, the file tools: Edit is no content oracle on a read-protected file,
and no Glob or Grep call can tie up a run (braces, ``**`` backtracking, ReDoS).
Every file is a sentinel in the test's own directory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from sandbox_support import invoke, tool_context

from helikon import LlmAgent, RunContext, ToolOutputItem
from helikon.config import PermissionMode
from helikon.context import Governed, ToolContext
from helikon.errors import InvalidArgs, ToolError
from helikon.governance import (
    AllowRule,
    DenyRule,
    GuardAction,
    GuardRule,
    PermissionSettings,
    fold_permissions,
)
from helikon.model import ToolEffect
from helikon.testing import MockModel, call_tools, say
from helikon.tools import EditTool, GlobTool, GrepTool, ReadTool, Sandbox

SECRET_LINE = "API_KEY=sk-live-0123456789"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".env").write_text(SECRET_LINE + "\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / ".env").write_text("DB_PASSWORD=hunter2hunter2\n")
    (tmp_path / "app.py").write_text("print('hi')\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "prod.key").write_text(SECRET_LINE + "\n")
    (tmp_path / "link").symlink_to(".env")
    (tmp_path / "cfg").symlink_to("config")
    return tmp_path


def governed_ctx(*rules: Any) -> ToolContext[None]:
    deny = tuple(r for r in rules if isinstance(r, DenyRule))
    guard = tuple(r for r in rules if isinstance(r, GuardRule))
    return attrs.evolve(tool_context(), governed=Governed(deny_rules=deny, guard_rules=guard))


def edit_in_run(root: Path, args: dict[str, Any], ctx: RunContext[Any]) -> str:
    with Sandbox.open(root) as box:
        agent = LlmAgent(
            name="coder",
            model=MockModel([call_tools(("Edit", args)), say("done")]),
            tools=[EditTool(box), ReadTool(box)],
        )

        async def go() -> list[Any]:
            return [e async for e in agent.run(ctx, "go")]

        events = anyio.run(go)
    (output,) = [e.item.content for e in events if type(e) is ToolOutputItem]
    return str(output)


# -- Edit is no content oracle -------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["secrets/prod.key", "./secrets/prod.key", "config/../secrets/prod.key", "SECRETS/PROD.KEY", "ABSOLUTE"],
)
def test_edit_of_a_read_protected_file_is_refused_before_it_reads(project: Path, path: str) -> None:
    if path == "ABSOLUTE":
        path = str(project / "secrets" / "prod.key")  # an absolute path inside the sandbox
    args = {"file_path": path, "old_string": "API_KEY=sk-live-0", "new_string": "x"}
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.read("secrets/**")])

    output = edit_in_run(project, args, ctx)

    assert output.startswith("denied:")
    assert "not found" not in output and "occurs" not in output
    assert (project / "secrets" / "prod.key").read_text() == SECRET_LINE + "\n"


def test_a_failed_and_a_matching_guess_read_the_same(project: Path) -> None:
    """The issue's example: with the old code one answer said 'Edited' and the other 'not found'."""
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.read("*.key")])
    right = edit_in_run(
        project, {"file_path": "secrets/prod.key", "old_string": "API_KEY=sk", "new_string": "x"}, ctx
    )
    wrong = edit_in_run(
        project, {"file_path": "secrets/prod.key", "old_string": "NOPE", "new_string": "x"}, ctx
    )
    assert right == wrong and right.startswith("denied:")
    assert (project / "secrets" / "prod.key").read_text() == SECRET_LINE + "\n"


def test_an_asking_read_guard_covers_edit_and_without_a_handler_refuses(project: Path) -> None:
    ctx = RunContext.ephemeral(None).with_guard_rules([GuardRule.read("secrets/", GuardAction.ASK)])
    output = edit_in_run(
        project, {"file_path": "secrets/prod.key", "old_string": "NOPE", "new_string": "x"}, ctx
    )
    assert output.startswith("denied:")


@pytest.mark.parametrize(("tool", "path"), [(EditTool, "link"), (ReadTool, "link"), (EditTool, "cfg/.env")])
def test_the_tool_itself_refuses_a_symlink_to_a_protected_file(project: Path, tool: type, path: str) -> None:
    ctx = governed_ctx(DenyRule.read("/.env"), DenyRule.read("/config/.env"))
    args = (
        {"file_path": path, "old_string": "NOPE", "new_string": "x"}
        if tool is EditTool
        else {"file_path": path}
    )
    with Sandbox.open(project) as box, pytest.raises(ToolError, match="read rules protect"):
        anyio.run(tool(box).invoke, ctx, args)


def test_a_read_allow_rule_does_not_pre_approve_an_edit() -> None:
    settings = PermissionSettings(PermissionMode.DONT_ASK, allow_rules=(AllowRule.read("**"),))
    step = fold_permissions("Edit", ToolEffect.WRITE, {"file_path": "src/a.py"}, settings)
    assert type(step.decision).__name__ == "Deny"  # type: ignore[union-attr]
    assert AllowRule.read("**").matches("Read", {"file_path": "src/a.py"})


def test_edit_without_read_rules_still_edits(project: Path) -> None:
    with Sandbox.open(project) as box:
        out = invoke(EditTool(box), file_path="app.py", old_string="hi", new_string="hello")
    assert out.startswith("Edited") and "hello" in (project / "app.py").read_text()


# -- Grep's context lines and Glob's listings keep to the read rules ----------------------


def test_grep_context_and_glob_listings_leave_protected_files_out(project: Path) -> None:
    (project / "notes.txt").write_text("before\nAPI_KEY lookup\nafter\n")
    ctx = governed_ctx(DenyRule.read(".env"), GuardRule.read("secrets/", GuardAction.ASK))
    with Sandbox.open(project) as box:
        grep = anyio.run(
            GrepTool(box).invoke, ctx, {"pattern": "KEY|PASSWORD", "output_mode": "content", "context": 5}
        )
        glob = anyio.run(GlobTool(box).invoke, ctx, {"pattern": "**/.e*"})
        through_dir_link = anyio.run(GrepTool(box).invoke, ctx, {"pattern": "PASSWORD", "path": "cfg"})
    assert "notes.txt-1-before" in grep and "sk-live" not in grep and "hunter2" not in grep
    assert ".env" not in glob.split("\n[")[0]
    assert "hunter2" not in through_dir_link


# -- bounded patterns -------------------------------------------------------------------------


def deep_tree(root: Path, depth: int = 30) -> None:
    path = root
    for k in range(depth):
        path = path / f"d{k}"
    path.mkdir(parents=True)
    (path / ("a" * 60 + ".txt")).write_text("aaaa\n")


@pytest.mark.parametrize(
    "pattern",
    [
        "{a,b}" * 18,  # the issue's: 18 groups, 262,144 alternatives
        "{a,b,c,d}" * 5,
        "x{1,2,3,4,5,6,7,8,9}{1,2,3,4,5,6,7,8,9}{1,2,3,4}",
        "{" + ",".join(f"{{a{k},b{k}}}" for k in range(9)) + "}" + "{a,b}" * 5,  # nested
    ],
)
def test_a_brace_bomb_is_refused_at_once(tmp_path: Path, pattern: str) -> None:
    with Sandbox.open(tmp_path) as box:
        started = time.monotonic()
        for tool, args in (
            (GlobTool(box), {"pattern": pattern}),
            (GrepTool(box), {"pattern": "a", "glob": pattern}),
        ):
            with pytest.raises(ToolError) as caught:
                invoke(tool, **args)
            assert isinstance(caught.value.failure, InvalidArgs) and "alternatives" in str(caught.value)
        assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    "pattern",
    [
        "**/" * 12 + "x",  # the issue's: **/**/... backtracking
        "**/*/**/*/**/*/**/*/**/*/nothing",
        "**/" + "*a" * 40 + "b",
        "**/[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*.bin",
        "d0/**/" * 8 + "*.nope",
    ],
)
def test_a_backtracking_glob_finishes_quickly(tmp_path: Path, pattern: str) -> None:
    deep_tree(tmp_path)
    with Sandbox.open(tmp_path) as box:
        started = time.monotonic()
        out = invoke(GlobTool(box), pattern=pattern)
        grep = invoke(GrepTool(box), pattern="a", glob=pattern)
    assert time.monotonic() - started < 3
    assert out.startswith("No files match") and grep.startswith("No matches")


def test_too_many_globstars_are_refused(tmp_path: Path) -> None:
    with Sandbox.open(tmp_path) as box, pytest.raises(ToolError, match=r"'\*\*'"):
        invoke(GlobTool(box), pattern="/".join(f"**/d{k}" for k in range(20)))


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "(a|aa)+$", "(a*)*b", "(x+x+)+y", r"^(\w+\s?)*$", "(a|a?)+$", "((a+)+)+c"],
)
def test_a_redos_pattern_finishes_quickly(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "big.txt").write_text(("a" * 31 + "!\n") * 2000 + "x" * 5000 + "!\n")
    with Sandbox.open(tmp_path) as box:
        started = time.monotonic()
        invoke(GrepTool(box), pattern=pattern, output_mode="count")
    assert time.monotonic() - started < 3


def test_a_pattern_the_linear_engine_lacks_gets_a_clear_error(tmp_path: Path) -> None:
    with Sandbox.open(tmp_path) as box:
        for pattern in (r"(a)\1", "(?=a)b", "(?<!x)y"):
            with pytest.raises(ToolError) as caught:
                invoke(GrepTool(box), pattern=pattern)
            assert isinstance(caught.value.failure, InvalidArgs) and "backreferences or lookaround" in str(
                caught.value
            )


def test_the_timeout_stops_the_search_itself(tmp_path: Path) -> None:
    for k in range(50):
        (tmp_path / f"f{k}.txt").write_text("line\n" * 2000)
    with Sandbox.open(tmp_path) as box:
        for tool, args in (
            (GrepTool(box, timeout=1e-9), {"pattern": "line"}),
            (GlobTool(box, timeout=1e-9), {"pattern": "**"}),
        ):
            with pytest.raises(ToolError, match="stopped after"):
                invoke(tool, **args)
        assert invoke(GrepTool(box), pattern="line", output_mode="count").count(":2000") == 50
