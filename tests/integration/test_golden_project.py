"""``examples/golden_project`` works as its README says, as a project of its
own: copied out of the checkout and run with pytest in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "golden_project"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("golden_project") / "golden_project"
    shutil.copytree(PROJECT, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def pytest_in(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HELIKON_", "PYTEST_"))}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_goldens_replay(project: Path) -> None:
    result = pytest_in(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


def test_a_tool_regression_fails_only_the_live_tools_replay(project: Path) -> None:
    plain = pytest_in(project, "tests/test_goldens.py", SHOP_BROKEN_DISCOUNT="1")
    live = pytest_in(project, "tests/test_goldens.py", "--helikon-live-tools", SHOP_BROKEN_DISCOUNT="1")

    assert plain.returncode == 0, plain.stdout
    assert live.returncode == 1, live.stdout
    assert "1 failed, 2 passed" in live.stdout
    out = live.stdout
    assert "sales.jsonl no longer matches the agent (live-tools replay)" in out
    assert "gave another result from quote(" in out
    assert "pytest tests/test_goldens.py::test_sales_quotes_a_discounted_order --helikon-record" in out


def test_recording_again_gives_the_committed_bytes(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "again"
    shutil.copytree(project, copy)
    result = pytest_in(copy, "tests/test_goldens.py", "--helikon-record")

    assert result.returncode == 0, result.stdout + result.stderr
    for golden in ("sales.jsonl", "support.jsonl"):
        again = (copy / "tests/goldens" / golden).read_bytes()
        assert again == (PROJECT / "tests/goldens" / golden).read_bytes()
