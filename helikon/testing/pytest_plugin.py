"""helikon's pytest plugin (registered through the ``pytest11`` entry point).

- ``--helikon-record`` (or ``HELIKON_RECORD=1``): re-record golden traces
  through the live interpreter instead of replaying them.
- the ``helikon_golden`` fixture: a :class:`~helikon.testing.GoldenTraces`.
"""

from __future__ import annotations

import os

import pytest

from helikon.testing._golden import GoldenTraces


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("helikon")
    group.addoption(
        "--helikon-record",
        action="store_true",
        default=False,
        help="re-record helikon golden traces by running the agents live (needs model credentials)",
    )


@pytest.fixture
def helikon_golden(request: pytest.FixtureRequest) -> GoldenTraces:
    """Replay golden traces (or record them under --helikon-record)."""
    record = bool(request.config.getoption("--helikon-record")) or os.environ.get("HELIKON_RECORD") == "1"
    return GoldenTraces(record=record)
