#!/usr/bin/env bash
# Set up a virtualenv and run every check: ruff, mypy --strict, the purity
# check, then the whole test suite (doctests, unit, property, golden,
# integration). HYPOTHESIS_PROFILE=ci (set by .ci/run) runs the thorough
# property tests; the default is the quick dev profile. HELIKON_TEST_PATHS
# narrows what pytest collects (default: helikon tests). Tests run in
# parallel (pytest-xdist): HELIKON_TEST_WORKERS workers, default one per core
# ("auto"); 0 runs them in this process.
set -euo pipefail
cd "$(dirname "$0")"
venv="${HELIKON_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[dev]"
echo "== ruff";   "$venv/bin/ruff" check .
echo "== mypy";   "$venv/bin/mypy" --strict helikon
echo "== purity"; "$venv/bin/python" scripts/check_purity.py
echo "== pytest"; "$venv/bin/python" -m pytest -n "${HELIKON_TEST_WORKERS:-auto}" --dist loadscope \
    --doctest-modules ${HELIKON_TEST_PATHS:-helikon tests} "$@"
