"""The public facade exports exactly its public names (after httpx's test)."""

from __future__ import annotations

import types

import helikon


def test_all_lists_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(helikon).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(helikon.__all__) - {"__version__"} == public


def test_all_is_sorted_and_unique() -> None:
    names = [n for n in helikon.__all__ if n != "__version__"]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_core_import_does_not_pull_in_heavy_or_optional_packages() -> None:
    import subprocess
    import sys

    code = (
        "import sys, helikon; "
        "print(','.join(m for m in ('trio', 'anyio', 'jsonschema', 'cattrs', 'httpx', 'hypothesis') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == ""
