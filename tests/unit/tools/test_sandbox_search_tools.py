"""Glob and Grep: finding files by path and by content, the way git sees the tree."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
import pytest
from sandbox_support import invoke, refused, tool_context

from helikon.context import Governed, ToolContext
from helikon.errors import InvalidArgs, ToolError
from helikon.governance import AllowRule, DenyRule, GuardAction, GuardRule
from helikon.protocols import Tool
from helikon.tools import GlobTool, GrepTool, Sandbox
from helikon.tools.sandbox._walk import expand_braces, glob_regex


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small repository: sources, tests, ignored build output, a .git directory."""
    files = {
        ".gitignore": "build/\n*.log\n!keep.log\n/top-only.txt\n",
        "src/calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        "src/main.py": "from calc import add\nprint(add(2, 3))\n",
        "src/.gitignore": "generated.py\n",
        "src/generated.py": "def add(): ...\n",
        "src/deep/top-only.txt": "kept: the pattern is anchored to the root\n",
        "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "build/out.py": "def add(): ...\n",
        "debug.log": "add\n",
        "keep.log": "add\n",
        "top-only.txt": "ignored\n",
        ".git/config": "[core]\n",
        "README.md": "# Calc\nAdds and subtracts.\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "src" / "blob.bin").write_bytes(b"def add\x00\x01\x02")
    return tmp_path


def test_glob_matches_paths_sorted_and_respects_gitignore(project: Path) -> None:
    with Sandbox.open(project) as box:
        glob = GlobTool(box)
        assert invoke(glob, pattern="**/*.py").splitlines() == [
            "src/calc.py",
            "src/main.py",
            "tests/test_calc.py",
        ]
        assert invoke(glob, pattern="*.log").splitlines() == ["keep.log"]
        assert invoke(glob, pattern="**/top-only.txt").splitlines() == ["src/deep/top-only.txt"]
        assert invoke(glob, pattern="*.py", path="src").splitlines() == ["src/calc.py", "src/main.py"]
        assert invoke(glob, pattern="**/*.{md,bin}").splitlines() == ["README.md", "src/blob.bin"]
        assert invoke(glob, pattern="**/config").startswith("No files match"), ".git is never listed"


def test_gitignore_files_above_the_search_directory_apply(project: Path) -> None:
    with Sandbox.open(project) as box:
        assert invoke(GlobTool(box), pattern="*", path="build").startswith("No files match")
        assert invoke(GrepTool(box), pattern="add", path="src").splitlines() == ["src/calc.py", "src/main.py"]


def test_grep_modes(project: Path) -> None:
    with Sandbox.open(project) as box:
        grep = GrepTool(box)
        assert invoke(grep, pattern=r"def add").splitlines() == ["src/calc.py"]
        assert invoke(grep, pattern="add", output_mode="count").splitlines() == [
            "keep.log:1",
            "src/calc.py:1",
            "src/main.py:2",
            "tests/test_calc.py:3",
        ]
        assert invoke(grep, pattern="return a - b", output_mode="content", context=1).splitlines() == [
            "src/calc.py-5-def sub(a, b):",
            "src/calc.py:6:    return a - b",
        ]
        assert invoke(grep, pattern="^def", output_mode="content", path="src/calc.py").splitlines() == [
            "src/calc.py:1:def add(a, b):",
            "src/calc.py:5:def sub(a, b):",
        ]
        assert invoke(grep, pattern="ADDS", case_insensitive=True).splitlines() == ["README.md"]
        assert invoke(grep, pattern="add", glob="test_*.py").splitlines() == ["tests/test_calc.py"]
        assert invoke(grep, pattern="add", glob="src/**/*.py").splitlines() == ["src/calc.py", "src/main.py"]
        assert invoke(grep, pattern="nothing like this").startswith("No matches")


def test_grep_caps_its_output(project: Path) -> None:
    (project / "many.txt").write_text("hit\n" * 50)
    with Sandbox.open(project) as box:
        text = invoke(GrepTool(box, max_results=10), pattern="hit", output_mode="content", path="many.txt")
    assert len(text.splitlines()) == 11 and text.endswith("[40 more lines not shown; narrow the search]")


def test_bad_patterns_are_reported(project: Path) -> None:
    with Sandbox.open(project) as box:
        with pytest.raises(ToolError) as caught:
            invoke(GrepTool(box), pattern="(")
        assert isinstance(caught.value.failure, InvalidArgs)
        refused(GlobTool(box), pattern="../*")
        refused(GlobTool(box), pattern="/etc/*")
        refused(GrepTool(box), pattern="x", glob="../**")
        with pytest.raises(ToolError, match="No such file"):
            invoke(GlobTool(box), pattern="*", path="missing")


def test_glob_syntax() -> None:
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]
    assert expand_braces("{solo}") == ["{solo}"]
    assert glob_regex("src/**").fullmatch("src/a/b.py")
    assert glob_regex("**/test_?.py").fullmatch("test_a.py")
    assert not glob_regex("*.py").fullmatch("a/b.py")
    assert glob_regex("[!a]*.txt").fullmatch("b.txt") and not glob_regex("[!a]*.txt").fullmatch("a.txt")
    assert glob_regex("a+b(c).txt").fullmatch("a+b(c).txt")


# -- read rules: a search must not read what a Read may not ------------------------------


def governed_context(*, deny: tuple[object, ...] = (), guard: tuple[object, ...] = ()) -> ToolContext[None]:
    return attrs.evolve(tool_context(), governed=Governed(deny_rules=deny, guard_rules=guard))


def governed(tool: Tool, ctx: ToolContext[None], **args: object) -> str:
    result: str = anyio.run(tool.invoke, ctx, args)
    return result


@pytest.fixture
def secrets(project: Path) -> Path:
    (project / ".env").write_text("API_KEY=add-me-secretly\n")
    (project / "config").mkdir()
    (project / "config" / ".env").write_text("DB_PASSWORD=add-this\n")
    (project / "keys").mkdir()
    (project / "keys" / "deploy.pem").write_text("add PRIVATE KEY\n")
    return project


def test_grep_leaves_out_files_a_deny_read_rule_protects(secrets: Path) -> None:
    ctx = governed_context(deny=(DenyRule.read(".env"), DenyRule.read("keys/**")))
    with Sandbox.open(secrets) as box:
        for mode in ("files_with_matches", "content", "count"):
            out = governed(GrepTool(box), ctx, pattern="add|KEY|PASSWORD", output_mode=mode)
            assert "secretly" not in out and "PASSWORD" not in out and "PRIVATE" not in out
            assert ".env" not in out.replace("file(s) left out", "") and "deploy.pem" not in out
            assert "[3 file(s) left out: the run's read rules protect them]" in out
            assert "src/calc.py" in out
        # naming the file itself, or going at it through an absolute path, changes nothing
        direct = governed(GrepTool(box), ctx, pattern="KEY", path=".env")
        assert "secretly" not in direct and "1 file(s) left out" in direct
        absolute = governed(GrepTool(box), ctx, pattern="PASSWORD", path=str(secrets / "config"))
        assert "add-this" not in absolute and "1 file(s) left out" in absolute
        assert "add-this" not in governed(GrepTool(box), ctx, pattern="PASSWORD", glob="*.env")
        # without the rules the same searches find them (the test can fail)
        assert "secretly" in governed(GrepTool(box), tool_context(), pattern="KEY", output_mode="content")


def test_glob_does_not_list_protected_files(secrets: Path) -> None:
    ctx = governed_context(guard=(GuardRule.read("keys/", GuardAction.ASK),), deny=(DenyRule.read("*.env"),))
    with Sandbox.open(secrets) as box:
        out = governed(GlobTool(box), ctx, pattern="**/*")
        assert ".env" not in out.replace("file(s) left out", "") and "deploy.pem" not in out
        assert "README.md" in out and "[3 file(s) left out" in out
        assert "deploy.pem" in governed(GlobTool(box), tool_context(), pattern="**/*")


def test_the_permission_pipeline_sees_the_searched_directory() -> None:
    rule = DenyRule.read("keys")
    assert rule.matches("Grep", {"pattern": "x", "path": "keys"})
    assert rule.matches("Glob", {"pattern": "*", "path": "./keys/sub"})
    assert not rule.matches("Grep", {"pattern": "x", "path": "src"})
    assert AllowRule.read("src/**").matches("Grep", {"pattern": "x", "path": "src/deep"})
