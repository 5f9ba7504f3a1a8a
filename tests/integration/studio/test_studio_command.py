"""``helikon studio`` as a real process: it prints its URL (on 127.0.0.1,
the port the OS gave), lists the ``--traces`` directory's traces beside the
project's golden ones, refuses a foreign ``Host``, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "traces"


def test_the_command_serves_traces_and_goldens_on_loopback_only(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests" / "golden" / "traces").mkdir(parents=True)
    shutil.copy(GOLDEN / "single_tool.jsonl", project / "tests" / "golden" / "traces" / "golden_one.jsonl")
    recordings = project / "recordings"
    recordings.mkdir()
    shutil.copy(GOLDEN / "handoff.jsonl", recordings / "mine.jsonl")
    helikon = [sys.executable, "-c", "from helikon._console import main; main()"]
    process = subprocess.Popen(
        [*helikon, "studio", "--traces", "recordings", "--port", "0"],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        line = ""
        while "helikon studio at" not in line:
            line = process.stderr.readline()
            assert line or process.poll() is None, "the studio exited"
            assert time.monotonic() < deadline, "the studio did not start"
        url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        assert url.startswith("http://127.0.0.1:")
        runs = httpx.get(f"{url}/api/runs", timeout=10).json()["runs"]
        assert sorted((r["source"], r["name"], r["agent"]) for r in runs) == [
            ("golden", "traces/golden_one.jsonl", "budget-assistant"),
            ("traces", "mine.jsonl", "triage"),
        ]
        refused = httpx.get(f"{url}/api/runs", headers={"host": "rebound.example"}, timeout=10)
        assert refused.status_code == 403
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, rest = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    # Ctrl-C stops it cleanly
    assert process.returncode == 0, rest
    assert "Traceback" not in rest and "helikon studio stopped" in rest
