"""Fixtures of the sandboxed-tool tests: a root with a secret outside it, and both path resolvers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import SECRET, Layout

from helikon.tools import Sandbox
from helikon.tools.sandbox._resolve import openat2_works


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    return Layout(root, outside)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both resolvers: the kernel's ``openat2`` and the portable ``O_NOFOLLOW`` walk."""
    if request.param == "openat2":
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if not openat2_works(fd):
                pytest.skip("this kernel has no openat2; the walk resolver is tested instead")
        finally:
            os.close(fd)
    return str(request.param)


@pytest.fixture
def sandbox(layout: Layout, resolver: str) -> Iterator[Sandbox]:
    with Sandbox.open(layout.root, resolver=resolver) as box:  # type: ignore[arg-type]
        assert box.resolver == resolver
        yield box
