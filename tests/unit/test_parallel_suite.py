"""The suite runs in parallel: ``./test.sh`` (and so ``.ci/run``) runs pytest
under pytest-xdist, which the dev extra installs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_sh_runs_pytest_on_parallel_workers() -> None:
    script = (ROOT / "test.sh").read_text()
    (command,) = re.findall(r'-m pytest (.*?)--doctest-modules helikon tests', script, flags=re.S)
    assert '-n "${HELIKON_TEST_WORKERS:-auto}"' in command
    assert "--dist loadfile" in command  # module-scoped fixtures are built once per file


def test_the_dev_extra_installs_xdist() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"pytest-xdist\b", requirement) for requirement in extras["dev"])
