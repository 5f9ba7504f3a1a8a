"""Test-wide configuration: the Hypothesis profiles, the browser fixture, and
the grouping of tests for parallel runs.

``ci`` runs many examples with no deadline (shared CI machines are slow and
noisy, so timing says nothing) and prints the reproduction blob of a failure;
``dev`` runs few, for a fast edit-test loop. ``HYPOTHESIS_PROFILE`` picks one
by name; otherwise ``ci`` when the ``CI`` environment variable is set, else
``dev``. Health checks stay on: a test that really needs one suppressed says
so itself.

The suite runs in parallel under pytest-xdist (``./test.sh`` passes
``-n auto --dist loadfile``). Each worker is a process of its own, so
what a test must not share is what lives outside the process: files (use
``tmp_path``), ports (bind port 0), and the shared PostgreSQL and Redis
(session ids, and so rows and keys, under a random prefix per test; see
``tests/integration/sessions/conftest.py``). ``--dist loadfile`` keeps each
test file on one worker, so a module-scoped fixture (a server, a browser,
every example's run) is built once, not once per worker. (``loadgroup`` and
``xdist_group`` marks would be finer, but xdist 3.8 ignores the groups under
pytest 9.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=500, deadline=None, derandomize=False, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def launch_chromium() -> Callable[[Any], Any]:
    """``launch(playwright) -> browser``: Debian's headless Chromium driven by
    Playwright (which never downloads a browser of its own here). Skips when
    either is missing locally; fails under CI, whose .ci/run installs both.
    Use with ``sync_playwright()`` from ``playwright.sync_api``."""
    chromium = shutil.which("chromium")
    missing = "the chromium package" if chromium is None else None
    if importlib.util.find_spec("playwright") is None:
        missing = "playwright"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} is missing; .ci/run installs it")
        pytest.skip(f"{missing} is not installed")

    def launch(playwright: Any) -> Any:
        return playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])

    return launch
