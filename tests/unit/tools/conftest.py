"""Shared fixtures of the sandboxed-tool tests: a root, a secret outside it,
both path resolvers, and a way to call a tool as the interpreter would."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import Denied, ToolError
from helikon.ids import CallId, RunId
from helikon.protocols import Tool
from helikon.tools import Sandbox
from helikon.tools.sandbox._resolve import openat2_works

SECRET = "TOP SECRET: outside the sandbox"


def tool_context() -> ToolContext[None]:
    return ToolContext(
        None, SessionState(), Actions(), CancellationToken(), TracerHandle(), CallId("c1"), RunId("r1"), "tester"
    )


def invoke(tool: Tool, **args: Any) -> Any:
    """Call ``tool`` with JSON ``args`` the way an interpreter does."""
    return anyio.run(tool.invoke, tool_context(), args)


def refused(tool: Tool, **args: Any) -> str:
    """Call ``tool`` and return the ``denied: ...`` text the model would read (fails if not denied)."""
    with pytest.raises(ToolError) as caught:
        invoke(tool, **args)
    assert isinstance(caught.value.failure, Denied), f"expected a refusal, got: {caught.value}"
    assert str(caught.value).startswith("denied: ")
    return str(caught.value)


@attrs.frozen
class Layout:
    """``root/`` is the sandbox; ``outside/secret.txt`` must never be read or written through it."""

    root: Path
    outside: Path

    @property
    def secret(self) -> Path:
        return self.outside / "secret.txt"


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
