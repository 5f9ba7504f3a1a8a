"""The public facade exports exactly its public names (after httpx's test)."""

from __future__ import annotations

import subprocess
import sys
import types

import helikon


def test_all_lists_every_public_name_and_nothing_else() -> None:
    public = {name for name in dir(helikon) if not name.startswith("_")}
    public -= {name for name in public if isinstance(getattr(helikon, name), types.ModuleType)}
    assert set(helikon.__all__) - {"__version__"} == public


def test_every_exported_name_resolves() -> None:
    for name in helikon.__all__:
        assert getattr(helikon, name) is not None, name


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
