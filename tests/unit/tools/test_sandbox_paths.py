"""Escape attempts against the file tools, each a test that fails if the escape works.

Every attempt runs under both resolvers (``openat2`` and the ``O_NOFOLLOW``
walk). A test checks two things: the model gets ``denied: ...``, and the
file outside the root was neither read (its text is not in any result) nor
written (its content and directory are unchanged).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from sandbox_support import SECRET, Layout, invoke, refused

from helikon.errors import ToolError
from helikon.tools import EditTool, GlobTool, GrepTool, ReadTool, Sandbox, WriteTool


def assert_outside_untouched(layout: Layout) -> None:
    assert layout.secret.read_text() == SECRET + "\n"
    assert sorted(p.name for p in layout.outside.iterdir()) == ["secret.txt"]


# -- .. and absolute paths -----------------------------------------------------


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "src/../../outside/secret.txt", "./../outside/secret.txt"]
)
def test_dot_dot_out_of_the_root_is_denied(sandbox: Sandbox, layout: Layout, path: str) -> None:
    assert "outside the sandbox" in refused(ReadTool(sandbox), file_path=path)
    refused(WriteTool(sandbox), file_path=path, content="pwned")
    refused(EditTool(sandbox), file_path=path, old_string="TOP", new_string="pwned")
    refused(WriteTool(sandbox), file_path=path.replace("secret.txt", "new.txt"), content="pwned")
    assert_outside_untouched(layout)


def test_dot_dot_that_stays_inside_is_fine(sandbox: Sandbox) -> None:
    assert "return 42" in invoke(ReadTool(sandbox), file_path="src/../src/./app.py")


def test_absolute_paths_outside_the_root_are_denied(sandbox: Sandbox, layout: Layout) -> None:
    for path in (str(layout.secret), "/etc/passwd", "/", str(layout.root) + "-sibling/x"):
        assert "absolute path outside the sandbox" in refused(ReadTool(sandbox), file_path=path)
    refused(WriteTool(sandbox), file_path=str(layout.outside / "new.txt"), content="pwned")
    refused(EditTool(sandbox), file_path=str(layout.secret), old_string="TOP", new_string="pwned")
    assert "home-relative" in refused(ReadTool(sandbox), file_path="~/.ssh/id_rsa")
    assert_outside_untouched(layout)


def test_absolute_paths_inside_the_root_are_taken_relative_to_it(sandbox: Sandbox, layout: Layout) -> None:
    assert "return 42" in invoke(ReadTool(sandbox), file_path=str(layout.root / "src" / "app.py"))
    refused(ReadTool(sandbox), file_path=str(layout.root / ".." / "outside" / "secret.txt"))


# -- symlinks ----------------------------------------------------------------------


def test_a_symlink_to_a_file_outside_is_denied(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "abs-link").symlink_to(layout.secret)
    (layout.root / "src" / "rel-link").symlink_to("../../outside/secret.txt")
    for link in ("abs-link", "src/rel-link"):
        refused(ReadTool(sandbox), file_path=link)
        refused(WriteTool(sandbox), file_path=link, content="pwned")
        refused(EditTool(sandbox), file_path=link, old_string="TOP", new_string="pwned")
    assert_outside_untouched(layout)


def test_a_symlink_to_a_directory_outside_is_denied(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "out").symlink_to(layout.outside)
    (layout.root / "src" / "up").symlink_to("../..")
    for directory in ("out", "src/up/outside"):
        refused(ReadTool(sandbox), file_path=f"{directory}/secret.txt")
        refused(WriteTool(sandbox), file_path=f"{directory}/new.txt", content="pwned")
        refused(GlobTool(sandbox), pattern="*", path=directory)
        refused(GrepTool(sandbox), pattern="SECRET", path=directory)
    assert_outside_untouched(layout)


def test_searching_the_root_does_not_follow_a_symlinked_directory_out(
    sandbox: Sandbox, layout: Layout
) -> None:
    (layout.root / "out").symlink_to(layout.outside)
    (layout.root / "leak.txt").symlink_to(layout.secret)
    listed = invoke(GlobTool(sandbox), pattern="**/*")
    assert "out" in listed.splitlines() and "out/secret.txt" not in listed
    assert invoke(GrepTool(sandbox), pattern="SECRET").startswith("No matches")


def test_symlinks_that_stay_inside_are_followed(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "alias").symlink_to("src")
    (layout.root / "src" / "again.py").symlink_to("app.py")
    assert "return 42" in invoke(ReadTool(sandbox), file_path="alias/again.py")
    invoke(WriteTool(sandbox), file_path="alias/again.py", content="x = 1\n")
    assert (layout.root / "src" / "again.py").is_symlink(), "writing through a link keeps the link"
    assert (layout.root / "src" / "app.py").read_text() == "x = 1\n"


def test_an_absolute_symlink_back_into_the_root_is_still_denied(sandbox: Sandbox, layout: Layout) -> None:
    # RESOLVE_BENEATH semantics: an absolute target is an escape, wherever it points.
    (layout.root / "abs").symlink_to(layout.root / "src" / "app.py")
    refused(ReadTool(sandbox), file_path="abs")


def test_symlink_loops_are_refused_not_hung(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "a").symlink_to("b")
    (layout.root / "b").symlink_to("a")
    with pytest.raises(ToolError):
        invoke(ReadTool(sandbox), file_path="a")


# -- /proc magic links -------------------------------------------------------------


def test_proc_self_root_is_denied(sandbox: Sandbox, layout: Layout) -> None:
    via_proc = f"/proc/self/root{layout.secret}"
    refused(ReadTool(sandbox), file_path=via_proc)
    refused(WriteTool(sandbox), file_path=f"/proc/self/root{layout.outside}/new.txt", content="pwned")
    depth = len(layout.root.parts)
    (layout.root / "proc-root").symlink_to("../" * depth + "proc/self/root")
    refused(ReadTool(sandbox), file_path=f"proc-root{layout.secret}")
    (layout.root / "proc-abs").symlink_to("/proc/self/root")
    refused(ReadTool(sandbox), file_path=f"proc-abs{layout.secret}")
    assert_outside_untouched(layout)


@pytest.mark.parametrize("resolver_name", ["openat2", "walk"])
def test_magic_links_inside_a_proc_root_are_denied(resolver_name: str) -> None:
    try:
        box = Sandbox.open("/proc/self", resolver=resolver_name)  # type: ignore[arg-type]
    except OSError:
        pytest.skip("no openat2 on this kernel")
    with box:
        for magic in ("root/etc/hostname", "cwd", "exe", "fd/0"):
            refused(ReadTool(box), file_path=magic)


# -- hard links ----------------------------------------------------------------------


def test_a_hard_link_to_a_file_outside_is_not_written(sandbox: Sandbox, layout: Layout) -> None:
    os.link(layout.secret, layout.root / "hard.txt")
    assert "hard links" in refused(WriteTool(sandbox), file_path="hard.txt", content="pwned")
    assert "hard links" in refused(
        EditTool(sandbox), file_path="hard.txt", old_string="TOP", new_string="pwned"
    )
    assert_outside_untouched(layout)


# -- NUL bytes and long paths -----------------------------------------------------------


@pytest.mark.parametrize("path", ["src/app.py\0", "\0", f"src\0{'/..' * 4}/outside/secret.txt"])
def test_nul_bytes_are_denied(sandbox: Sandbox, layout: Layout, path: str) -> None:
    assert "NUL" in refused(ReadTool(sandbox), file_path=path)
    assert "NUL" in refused(WriteTool(sandbox), file_path=path, content="x")
    assert_outside_untouched(layout)


def test_over_long_paths_are_denied(sandbox: Sandbox) -> None:
    assert "too long" in refused(ReadTool(sandbox), file_path="a/" * 2100 + "x")
    assert "longer than 255" in refused(ReadTool(sandbox), file_path="x" * 256)
    assert "longer than 255" in refused(WriteTool(sandbox), file_path="src/" + "é" * 128, content="x")
    assert not any(len(p.name) > 255 for p in Path(sandbox.root).rglob("*"))


# -- the race: a symlink swapped in between check and use ---------------------------------


def _place(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, clearing whatever a tool created there meanwhile."""
    for _ in range(1000):
        try:
            os.rename(source, target)
            return
        except OSError:
            shutil.rmtree(target, ignore_errors=True)
    raise AssertionError(f"could not put {source} in place")


def _flip(root: Path, outside: Path, stop: threading.Event, flips: list[int]) -> None:
    """Swap ``root/swap`` between a real directory and a symlink to ``outside``, as fast as possible."""
    swap, parked, staged = root / "swap", root / "parked", root / "staged"
    while not stop.is_set():
        _place(swap, parked)
        os.symlink(outside, staged)
        _place(staged, swap)
        time.sleep(0)  # let the reader see the symlink state too, not only the transitions
        os.unlink(swap)
        _place(parked, swap)
        flips[0] += 1
        time.sleep(0)


def test_a_symlink_swapped_in_during_resolution_never_leads_out(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "swap").mkdir()
    (layout.root / "swap" / "secret.txt").write_text("inside\n")
    stop = threading.Event()
    flips = [0]
    flipper = threading.Thread(target=_flip, args=(layout.root, layout.outside, stop, flips))
    outcomes = {"inside": 0, "denied": 0, "missing": 0}
    flipper.start()
    try:
        deadline = time.monotonic() + 1.0
        attempts = 0
        while time.monotonic() < deadline or attempts < 2000:
            attempts += 1
            try:
                fd = sandbox.open_file("swap/secret.txt")
            except ToolError:
                outcomes["denied"] += 1
                continue
            except OSError:
                outcomes["missing"] += 1
                continue
            with os.fdopen(fd) as handle:
                text = handle.read()
            assert SECRET not in text, f"escaped through the swapped symlink after {attempts} attempts"
            outcomes["inside"] += 1
            try:  # and the write path: locate() + create in the located directory
                dir_fd, name = sandbox.locate("swap/written.txt")
            except (ToolError, OSError):
                continue
            os.close(dir_fd)
            assert name == "written.txt"
    finally:
        stop.set()
        flipper.join()
    assert_outside_untouched(layout)
    # The race was really run: both states of the swap were seen many times.
    assert outcomes["inside"] > 5 and outcomes["denied"] > 5 and flips[0] > 20, (outcomes, flips)


def test_writes_during_a_swap_race_never_land_outside(sandbox: Sandbox, layout: Layout) -> None:
    (layout.root / "swap").mkdir()
    stop = threading.Event()
    flips = [0]
    flipper = threading.Thread(target=_flip, args=(layout.root, layout.outside, stop, flips))
    write = WriteTool(sandbox)
    flipper.start()
    try:
        written = denied = 0
        for attempt in range(400):
            try:
                invoke(write, file_path=f"swap/w{attempt}.txt", content="x")
                written += 1
            except ToolError:
                denied += 1
    finally:
        stop.set()
        flipper.join()
    assert_outside_untouched(layout)
    assert written > 5 and denied > 5 and flips[0] > 20, (written, denied, flips)
