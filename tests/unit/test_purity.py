"""The project's own purity check: it passes on helikon and catches each kind of breach."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_purity.py"


def _project(tmp_path: Path, modules: dict[str, str], packages: str = '["pkg/core"]') -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.helikon.purity]\npackages = {packages}\nallow = []\n")
    for name, text in modules.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True, check=False
    )


def test_helikon_pure_packages_pass() -> None:
    done = _run(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 problems" in done.stdout


def test_runs_without_the_shared_checker_from_any_directory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import trio\n", "'trio'"),
        ("from time import monotonic\n", "'time'"),
        ("def f():\n    import random\n    return random.random()\n", "'random'"),
        ("import os\n", "'os'"),
        ("from os import environ\n", "'os'"),
        ("from pathlib import Path\n", "pathlib"),
        ("import datetime\nx = datetime.datetime.now()\n", "datetime.now"),
        ("import os.path\nx = os.environ\n", "os.environ"),
        ("def f():\n    print('hi')\n", "print()"),
        ("def f(p):\n    return open(p)\n", "open()"),
        ("async def f(x):\n    return await x\n", "awaits"),
        ("async def f(x):\n    return 1\n", "async function 'f'"),
        ("import helikon.interpreters\n", "impure helikon module"),
        ("from ..other import thing\n", "impure helikon module"),
        ("import importlib\n", "'importlib'"),
    ],
)
def test_each_kind_of_breach_is_named(tmp_path: Path, source: str, expected: str) -> None:
    root = _project(tmp_path, {
        "helikon/core/mod.py": source,
        "helikon/other.py": "",
    }, packages='["helikon/core"]')
    done = _run(root)
    assert done.returncode == 1, done.stdout
    assert "helikon/core/mod.py:" in done.stdout and expected in done.stdout, done.stdout


def test_allowed_forms_pass(tmp_path: Path) -> None:
    source = (
        "import os.path\nfrom os import path, sep\nfrom pathlib import PurePosixPath\n"
        "from helikon.core import sibling\n"
        "def late():\n    import helikon.interpreters\n    return helikon.interpreters\n"
        "class P:\n    async def stub(self) -> None:\n        '''A protocol method.'''\n        ...\n"
    )
    root = _project(tmp_path, {"helikon/core/mod.py": source, "helikon/core/sibling.py": ""},
                    packages='["helikon/core"]')
    done = _run(root)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        (None, "there is no"),
        ("[tool.other]\nx = 1\n", "no [tool.helikon.purity]"),
        ('[tool.helikon.purity]\npackages = ["missing"]\n', "does not exist"),
    ],
)
def test_unusable_configuration_exits_2(tmp_path: Path, pyproject: str | None, message: str) -> None:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    done = _run(tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
