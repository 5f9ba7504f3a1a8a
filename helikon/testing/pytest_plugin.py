"""helikon's pytest plugin (registered through the ``pytest11`` entry point).

- ``--helikon-record`` (or ``HELIKON_RECORD=1``): re-record golden traces
  through the live interpreter instead of replaying them.
- ``--helikon-live-tools`` (or ``HELIKON_LIVE_TOOLS=1``): replay only the
  model; run tools and dynamic instructions for real.
- the ``helikon_golden`` fixture: a :class:`~helikon.testing.GoldenTraces`
  whose failures name the golden file and the command that re-records it.
"""

from __future__ import annotations

import shlex

import pytest

from helikon.testing._golden import GoldenTraces, env_flag


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("helikon")
    group.addoption(
        "--helikon-record",
        action="store_true",
        default=False,
        help="re-record helikon golden traces by running the agents live (needs model credentials)",
    )
    group.addoption(
        "--helikon-live-tools",
        action="store_true",
        default=False,
        help="replay goldens with tools and dynamic instructions run for real (catches their regressions)",
    )


@pytest.fixture
def helikon_golden(request: pytest.FixtureRequest) -> GoldenTraces:
    """Replay golden traces (or record them under --helikon-record)."""
    record = bool(request.config.getoption("--helikon-record")) or env_flag("HELIKON_RECORD")
    live_tools = bool(request.config.getoption("--helikon-live-tools")) or env_flag("HELIKON_LIVE_TOOLS")
    command = f"pytest {shlex.quote(request.node.nodeid)} --helikon-record"
    root = request.config.rootpath
    if root != request.config.invocation_params.dir:
        command = f"cd {shlex.quote(str(root))} && {command}"
    return GoldenTraces(record=record, live_tools=live_tools, record_command=command)
