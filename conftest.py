"""Collection rules for the doctest run over ``helikon/``: optional extras
whose drivers are not installed are skipped, not errors."""

from __future__ import annotations

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("temporalio") is None:
    collect_ignore_glob.append("helikon/temporal/*")
if importlib.util.find_spec("psycopg") is None:
    collect_ignore_glob.append("helikon/sessions/_postgres.py")
if importlib.util.find_spec("mcp") is None:
    collect_ignore_glob.append("helikon/mcp/*")
if importlib.util.find_spec("click") is None or importlib.util.find_spec("starlark") is None:
    collect_ignore_glob.append("helikon/cli/*")
if importlib.util.find_spec("redis") is None:
    collect_ignore_glob.append("helikon/sessions/_redis.py")

# ``pytester`` runs pytest on generated projects (the golden-trace plugin's tests).
pytest_plugins = ["pytester"]
