"""The ready-made tools are importable from helikon.tools, loaded only when first used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import helikon.tools
import helikon.tools.sandbox

PINNED = [
    "BashTool",
    "EditTool",
    "EgressPolicy",
    "EgressProxy",
    "ExecResult",
    "ExecutionBackend",
    "GlobTool",
    "GrepTool",
    "HostBackend",
    "Isolation",
    "OsSandboxBackend",
    "OsSandboxError",
    "ReadTool",
    "ResourceLimits",
    "Sandbox",
    "SandboxGuarantees",
    "WriteTool",
]


@pytest.mark.parametrize("name", PINNED)
def test_each_name_resolves_to_the_sandbox_packages_object(name: str) -> None:
    assert name in helikon.tools.__all__ and name in helikon.tools.sandbox.__all__
    assert getattr(helikon.tools, name) is getattr(helikon.tools.sandbox, name)


def test_the_sandbox_package_is_loaded_lazily() -> None:
    code = "import sys, helikon.tools; print('helikon.tools.sandbox' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    code = "import sys; from helikon.tools import ReadTool; print('helikon.tools.sandbox' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchTool"):
        helikon.tools.NoSuchTool  # noqa: B018


def test_all_is_sorted_and_dir_lists_the_lazy_names() -> None:
    assert helikon.tools.__all__ == sorted(helikon.tools.__all__, key=lambda n: (n[0].islower(), n))
    assert set(PINNED) <= set(dir(helikon.tools))
