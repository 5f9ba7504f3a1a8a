"""Test-wide configuration: the Hypothesis profiles, the browser fixture, and
the grouping of tests for parallel runs.

``ci`` runs many examples with no deadline (shared CI machines are slow and
noisy, so timing says nothing) and prints the reproduction blob of a failure;
``dev`` runs few, for a fast edit-test loop. ``HYPOTHESIS_PROFILE`` picks one
by name; otherwise ``ci`` when the ``CI`` environment variable is set, else
``dev``. Health checks stay on: a test that really needs one suppressed says
so itself.

The suite runs in parallel under pytest-xdist (``./test.sh`` passes
``-n auto --dist loadscope``). Each worker is a process of its own, so
what a test must not share is what lives outside the process: files (use
``tmp_path``), ports (bind port 0), and the shared PostgreSQL and Redis
(session ids, and so rows and keys, under a random prefix per test; see
``tests/integration/sessions/conftest.py``).

Work is handed out test by test (:func:`pytest_xdist_make_scheduler`), so
one long file does not hold a worker while the other idles; only the tests
of a file that defines a module- or class-scoped fixture (a server, a
browser, every example's run) stay together on one worker, so the fixture
is built once, not once per worker. (``xdist_group`` marks would say the
same per test, but xdist 3.8 ignores the groups under pytest 9.)
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=500, deadline=None, derandomize=False, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


#: A fixture shared by the tests of one file or class (built once per worker that runs them).
_SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](?:module|class|package)["']""")


def shared_fixture_files(root: Path) -> frozenset[str]:
    """The test files (relative to ``root``, as in node ids) whose tests share
    a fixture: they define one of module, class or package scope, or a
    ``conftest.py`` beside or above them does."""
    tests = root / "tests"
    grouped_dirs = [p.parent for p in tests.rglob("conftest.py") if _SHARED_SCOPE.search(p.read_text())]
    return frozenset(
        path.relative_to(root).as_posix()
        for path in tests.rglob("test_*.py")
        if _SHARED_SCOPE.search(path.read_text()) or any(d in path.parents for d in grouped_dirs)
    )


def work_unit(nodeid: str, grouped: frozenset[str]) -> str:
    """What the xdist scheduler hands a worker at once: the whole file for a
    file of :func:`shared_fixture_files`, else the one test."""
    path = nodeid.split("::", 1)[0]
    return path if path in grouped else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with this project's scopes (see :func:`work_unit`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    grouped = shared_fixture_files(Path(str(config.rootpath)))

    class ProjectScopes(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid, grouped)

    return ProjectScopes(config, log)


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


@pytest.fixture(scope="session")
def chromium(launch_chromium: Callable[[Any], Any]) -> Callable[[], AbstractContextManager[Any]]:
    """``with chromium() as browser:``: a browser of :func:`launch_chromium`
    for the block, closed after it (whatever the block raised)."""

    @contextmanager
    def browser() -> Iterator[Any]:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            launched = launch_chromium(playwright)
            try:
                yield launched
            finally:
                launched.close()

    return browser
