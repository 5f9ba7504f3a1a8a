"""The suite runs in parallel: ``./test.sh`` (and so ``.ci/run``) runs pytest
under pytest-xdist, which the dev extra installs."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_sh_runs_pytest_on_parallel_workers() -> None:
    script = (ROOT / "test.sh").read_text()
    (command,) = re.findall(r'-m pytest (.*?)--doctest-modules', script, flags=re.S)
    assert '${HELIKON_TEST_PATHS:-helikon tests}' in script
    assert '-n "${HELIKON_TEST_WORKERS:-auto}"' in command
    assert "--dist loadscope" in command  # with the project's scopes (tests/conftest.py)


def test_the_dev_extra_installs_xdist() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"pytest-xdist\b", requirement) for requirement in extras["dev"])


def test_work_is_handed_out_per_test_but_files_that_share_a_fixture_stay_together() -> None:
    spec = importlib.util.spec_from_file_location("tests_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    shared_fixture_files, work_unit = conftest.shared_fixture_files, conftest.work_unit

    grouped = shared_fixture_files(ROOT)
    assert "tests/unit/test_examples.py" in grouped  # every example's run, once
    assert "tests/integration/evals/test_evals_html_chromium.py" in grouped  # one browser
    assert "tests/property/test_loop_properties.py" not in grouped
    example = "tests/unit/test_examples.py::test_the_example_runs_and_says_what_it_should[cli_tour.py]"
    assert work_unit(example, grouped) == "tests/unit/test_examples.py"
    prop = "tests/property/test_loop_properties.py::test_identical_inputs_give_identical_event_streams"
    assert work_unit(prop, grouped) == prop
