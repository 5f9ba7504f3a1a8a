"""The public facade exports exactly its public names (after httpx's test)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

import helikon


def test_all_lists_every_public_name_and_nothing_else() -> None:
    public = {name for name in dir(helikon) if not name.startswith("_")}
    public -= {name for name in public if isinstance(getattr(helikon, name), types.ModuleType)}
    assert set(helikon.__all__) - {"__version__"} == public


def test_every_exported_name_resolves() -> None:
    for name in helikon.__all__:
        assert getattr(helikon, name) is not None, name


def test_every_exported_name_imports_from_the_module_the_table_names() -> None:
    for module, names in helikon._EXPORTS.items():
        for name in names:
            assert getattr(helikon, name) is getattr(importlib.import_module(module), name), name
    assert set(helikon.__all__) == {*helikon._LOCATIONS, "__version__"}


def test_the_type_checking_imports_match_the_table() -> None:
    """Type checkers read the ``TYPE_CHECKING`` block; the runtime reads ``_EXPORTS``: they agree."""
    tree = ast.parse(Path(helikon.__file__).read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    seen: dict[str, tuple[str, ...]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        assert all(alias.asname == alias.name for alias in node.names), "re-export as `X as X`"
        seen[node.module] = tuple(alias.name for alias in node.names)
    assert seen == helikon._EXPORTS


def test_the_strategies_export_what_they_list() -> None:
    strategies = importlib.import_module("helikon.testing.strategies")
    for name in strategies.__all__:
        assert getattr(strategies, name) is not None, name
    with pytest.warns(DeprecationWarning, match="tool_errors is deprecated.*tool_failures"):
        tool_errors = strategies.tool_errors
    assert "tool_errors" not in strategies.__all__ and tool_errors() is not None


def test_all_is_sorted_and_unique() -> None:
    names = [n for n in helikon.__all__ if n != "__version__"]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        helikon.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def _loaded_after(statement: str) -> set[str]:
    heavy = ("trio", "anyio", "jsonschema", "cattrs", "httpx", "hypothesis", "temporalio", "psycopg", "redis")
    code = f"import sys; {statement}; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {m for m in out.strip().split(",") if m}


def test_core_imports_do_not_pull_in_heavy_or_optional_packages() -> None:
    assert _loaded_after("import helikon") == set()
    assert _loaded_after("from helikon import LlmAgent, RunContext, collect, tool") == set()


def test_the_testing_package_exports_its_models() -> None:
    testing = importlib.import_module("helikon.testing")
    assert {"FunctionModel", "MockModel", "ModelFunction", "ModelReply"} <= set(testing.__all__)
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name


def test_the_step_api_is_exported_by_both_of_its_names() -> None:
    """docs/interpreters.md imports ``pending_effect`` from ``helikon``."""
    from helikon import pending, pending_effect

    assert pending_effect is pending
