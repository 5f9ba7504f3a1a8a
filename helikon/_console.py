"""The ``helikon`` console script's entry point.

It is installed with every helikon, but the command line itself needs the
``cli`` extra (click, rich, starlark-pyo3): without it, this says so in one
line instead of an import traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Final

#: The modules the command line needs, by the distribution that provides them.
NEEDS: Final = {"click": "click", "rich": "rich", "starlark": "starlark-pyo3"}


def main() -> int:
    """Run the ``helikon`` command line, or explain what it needs."""
    missing = [dist for module, dist in NEEDS.items() if importlib.util.find_spec(module) is None]
    if missing:
        print(
            f"helikon: the command line needs {', '.join(missing)}: pip install 'paigasus-helikon[cli]'",
            file=sys.stderr,
        )
        return 2
    cli = importlib.import_module("helikon.cli")
    code: int = cli.main()
    return code


__all__ = ["main"]
