"""The README's two commands, run as written on a fresh copy of the project
in a directory with nothing beside it (no ``../shared``, no virtualenv).

The copy holds exactly the files git tracks or would track (the committed
tree on a clean checkout, as CI has). The demo command runs whole; the test
command runs as written too — every check it makes (ruff, mypy --strict,
the purity check, pytest) — with pytest narrowed to a few quick files by
``HELIKON_TEST_PATHS``, since the whole suite is what this very run is part
of (``HELIKON_FRESH_COPY`` keeps the copy from starting another copy).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NARROWED = "tests/unit/test_purity.py tests/unit/test_exports.py"


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.DOTALL)[:2]


def _fresh_copy(destination: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=False,
    )
    if listed.returncode != 0:
        pytest.skip("the project is not a git checkout, so its tracked files are unknown")
    project = destination / "helikon"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return project


def _environment(project: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("HELIKON_VENV", "OPENAI_", "ANTHROPIC_", "VIRTUAL_ENV", "PYTEST_"))}
    keep["PATH"] = os.pathsep.join(
        p for p in keep.get("PATH", "").split(os.pathsep) if "venv" not in p
    )
    # mypy's cache holds results keyed by each file's hash, so the checkout's
    # own cache (test.sh ran mypy before pytest) only saves time, never a check.
    cache = ROOT / ".mypy_cache"
    if cache.is_dir():
        shutil.copytree(cache, project / ".mypy_cache", dirs_exist_ok=True)
    return keep


@pytest.mark.skipif(bool(os.environ.get("HELIKON_FRESH_COPY")), reason="already inside a fresh copy's run")
def test_readme_commands_pass_on_a_fresh_copy_with_nothing_beside_it(tmp_path: Path) -> None:
    demo, suite = _readme_commands()
    assert "examples/" in demo and "test.sh" in suite, (demo, suite)
    project = _fresh_copy(tmp_path / "alone")
    assert sorted(p.name for p in project.parent.iterdir()) == ["helikon"]
    assert not (project.parent / "shared").exists()

    environment = _environment(project)
    ran = subprocess.run(["bash", "-c", demo], cwd=project, env=environment,
                         capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.strip(), "the demo printed nothing"

    narrowed = {**environment, "HELIKON_TEST_PATHS": NARROWED, "HELIKON_FRESH_COPY": "1"}
    checked = subprocess.run(["bash", "-c", suite], cwd=project, env=narrowed,
                             capture_output=True, text=True, timeout=2400)
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output[-6000:]
    for step in ("== ruff", "== mypy", "== purity", "== pytest"):
        assert step in output, f"{step!r} did not run:\n{output[-3000:]}"
    assert re.search(r"\d+ passed", output), output[-3000:]
