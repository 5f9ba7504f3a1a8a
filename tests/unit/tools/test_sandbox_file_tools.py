"""Read, Write and Edit: what they do inside the sandbox, and how an agent run sees them."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor, TimeoutError
from pathlib import Path

import anyio
import pytest
from sandbox_support import Layout, invoke, refused

from helikon import AgentInput, LlmAgent, RunContext, collect
from helikon.errors import InvalidArgs, ToolError
from helikon.events import ToolOutputItem
from helikon.model import ToolEffect
from helikon.protocols import Tool
from helikon.testing import MockModel, call_tools, say
from helikon.tools import BashTool, EditTool, GlobTool, GrepTool, HostBackend, ReadTool, Sandbox, WriteTool


def test_the_tools_have_the_pinned_names_effects_and_path_arguments(sandbox: Sandbox) -> None:
    expected = [
        (ReadTool(sandbox), "Read", ToolEffect.READ_ONLY),
        (WriteTool(sandbox), "Write", ToolEffect.WRITE),
        (EditTool(sandbox), "Edit", ToolEffect.WRITE),
        (GlobTool(sandbox), "Glob", ToolEffect.READ_ONLY),
        (GrepTool(sandbox), "Grep", ToolEffect.READ_ONLY),
        (BashTool(HostBackend(sandbox)), "Bash", ToolEffect.SIDE_EFFECT),
    ]
    for tool, name, effect in expected:
        assert isinstance(tool, Tool)
        assert (tool.name, tool.effect) == (name, effect)
        assert tool.parameters["type"] == "object" and tool.parameters["additionalProperties"] is False
        if name != "Bash":
            assert any("path" in prop for prop in tool.parameters["properties"]), name
    assert ReadTool(sandbox).parameters["required"] == ["file_path"]


# -- Read ---------------------------------------------------------------------------


def test_read_numbers_lines_and_pages_with_offset_and_limit(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    read = ReadTool(sandbox)

    assert invoke(read, file_path="src/app.py") == "     1\tdef main():\n     2\t    return 42"
    page = invoke(read, file_path="long.txt", offset=4, limit=2)
    assert page == "     4\tline 4\n     5\tline 5\n[showing lines 4-5; read on with offset=6]"
    assert invoke(read, file_path="long.txt", offset=9).endswith("    10\tline 10")
    with pytest.raises(ToolError, match="has only 10 lines"):
        invoke(read, file_path="long.txt", offset=11)


def test_read_caps_lines_and_bytes(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "big.txt").write_text("x" * 5000 + "\n" + "short\n" * 50)
    read = ReadTool(sandbox, max_lines=20, max_line_chars=100, max_bytes=1000)
    text = invoke(read, file_path="big.txt")
    assert text.splitlines()[0] == "     1\t" + "x" * 100 + " [line cut]"
    assert len(text) < 1200 and "read on with offset=" in text


def test_read_refuses_binaries_directories_and_fifos_without_hanging(
    sandbox: Sandbox, layout: Layout
) -> None:
    (layout.root / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" * 10)
    (layout.root / "empty.txt").write_text("")
    os.mkfifo(layout.root / "pipe")
    read = ReadTool(sandbox)

    with pytest.raises(ToolError, match="binary file"):
        invoke(read, file_path="blob.bin")
    with pytest.raises(ToolError, match="is a directory"):
        invoke(read, file_path="src")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(invoke, read, file_path="pipe")
        try:
            with pytest.raises(ToolError, match="not a regular file"):
                pending.result(timeout=5)
        except TimeoutError:
            os.close(os.open(layout.root / "pipe", os.O_WRONLY | os.O_NONBLOCK))  # unblock it
            raise AssertionError("reading a FIFO hung the tool") from None
    with pytest.raises(ToolError, match="No such file"):
        invoke(read, file_path="nope.txt")
    assert invoke(read, file_path="empty.txt") == "empty.txt is empty"


def test_bad_arguments_are_invalid_args() -> None:
    with Sandbox.open(".") as box, pytest.raises(ToolError) as caught:
        invoke(ReadTool(box), file_path=3)
    assert isinstance(caught.value.failure, InvalidArgs)


# -- Write --------------------------------------------------------------------------


def test_write_creates_parents_and_replaces_atomically_keeping_the_mode(
    sandbox: Sandbox, layout: Layout
) -> None:
    write = WriteTool(sandbox)
    assert invoke(write, file_path="pkg/sub/new.py", content="A = 1\n") == "Created pkg/sub/new.py (6 bytes)"
    assert (layout.root / "pkg" / "sub" / "new.py").read_text() == "A = 1\n"

    script = layout.root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    before = script.stat().st_ino
    assert invoke(write, file_path="run.sh", content="echo new\n").startswith("Wrote run.sh")
    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert script.stat().st_ino != before, "replaced by rename, not rewritten in place"
    assert not [p for p in layout.root.iterdir() if p.name.startswith(".helikon-")], "no temporary file left"


def test_write_refuses_directories(sandbox: Sandbox) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        invoke(WriteTool(sandbox), file_path="src", content="x")
    with pytest.raises(ToolError, match="not a file path"):
        invoke(WriteTool(sandbox), file_path="src/", content="x")


# -- Edit -----------------------------------------------------------------------------


def test_edit_replaces_one_exact_occurrence(sandbox: Sandbox, layout: Layout) -> None:
    edit = EditTool(sandbox)
    assert invoke(edit, file_path="src/app.py", old_string="return 42", new_string="return 43") == (
        "Edited src/app.py: replaced 1 occurrence"
    )
    assert (layout.root / "src" / "app.py").read_text() == "def main():\n    return 43\n"


def test_edit_insists_on_uniqueness_unless_replace_all(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "dup.py").write_text("x = 1\nx = 1\n")
    edit = EditTool(sandbox)
    with pytest.raises(ToolError, match="occurs 2 times"):
        invoke(edit, file_path="dup.py", old_string="x = 1", new_string="x = 2")
    assert (layout.root / "dup.py").read_text() == "x = 1\nx = 1\n"
    assert invoke(edit, file_path="dup.py", old_string="x = 1", new_string="x = 2", replace_all=True) == (
        "Edited dup.py: replaced 2 occurrences"
    )
    assert (layout.root / "dup.py").read_text() == "x = 2\nx = 2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"file_path": "src/app.py", "old_string": "nowhere", "new_string": "x"}, "was not found"),
        ({"file_path": "src/app.py", "old_string": "42", "new_string": "42"}, "the same"),
        ({"file_path": "src/app.py", "old_string": "", "new_string": "x"}, "use Write"),
        ({"file_path": "missing.py", "old_string": "a", "new_string": "b"}, "does not exist"),
    ],
)
def test_edit_failures_say_what_to_do(sandbox: Sandbox, args: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        invoke(EditTool(sandbox), **args)


def test_an_edit_moves_the_mtime_to_a_later_second(sandbox: Sandbox, layout: Layout) -> None:
    """Same size, same second: Python's bytecode cache would miss the change unless the second moves on."""
    app = layout.root / "src" / "app.py"
    os.utime(app)  # "just written"
    before = app.stat().st_mtime
    invoke(EditTool(sandbox), file_path="src/app.py", old_string="42", new_string="43")
    assert int(app.stat().st_mtime) > int(before)
    assert app.stat().st_mtime - before < 3


def test_edit_refuses_non_utf8(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "latin.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        invoke(EditTool(sandbox), file_path="latin.txt", old_string="caf", new_string="tea")


# -- in a run --------------------------------------------------------------------------


def test_a_refusal_is_a_tool_result_and_the_run_goes_on(layout: Layout) -> None:
    model = MockModel(
        [
            call_tools(
                ("Read", {"file_path": "../outside/secret.txt"}), ("Read", {"file_path": "src/app.py"})
            ),
            say("The secret is out of reach; app.py returns 42."),
        ]
    )
    with Sandbox.open(layout.root) as box:
        agent = LlmAgent(name="reader", model=model, tools=[ReadTool(box)])
        result = anyio.run(collect, agent.run(RunContext.ephemeral(None), AgentInput.from_user_text("read")))
    outputs = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert outputs[0].is_error and outputs[0].content.startswith("denied: ../outside/secret.txt")
    assert "TOP SECRET" not in outputs[0].content
    assert not outputs[1].is_error and "return 42" in outputs[1].content
    assert result.final_output == "The secret is out of reach; app.py returns 42."


def test_the_sandbox_is_a_closable_capability(tmp_path: Path) -> None:
    box = Sandbox.open(tmp_path)
    assert box.root == os.path.realpath(tmp_path) and repr(box).startswith("Sandbox(")
    box.close()
    box.close()
    with pytest.raises(ValueError, match="closed"):
        box.fileno()
    with pytest.raises(NotADirectoryError):
        Sandbox.open(tmp_path / "file" if (tmp_path / "file").write_text("x") else tmp_path)
    refused(ReadTool(Sandbox.open(tmp_path)), file_path="/etc/hostname")
