"""``examples/mcp_filesystem_agent.py`` with the real filesystem server, and
its clean skip when Node.js is not there. (``tests/unit/test_examples.py``
runs every example as well, with whatever the environment offers.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import Servers

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp_filesystem_agent.py"


def launch(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in env.items() if "API_KEY" not in k}
    return subprocess.run(
        [sys.executable, str(EXAMPLE)], env=clean, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_filesystem_example_runs_against_the_real_server(servers: Servers, tmp_path: Path) -> None:
    done = launch({**os.environ, "HELIKON_MCP_SERVERS": str(servers.root)}, tmp_path)
    assert done.returncode == 0, done.stderr
    for phrase in (
        "connected to secure-filesystem-server:",
        "fs_write_file                    SIDE_EFFECT",
        "<- fs_move_file (error): denied: denied by deny rule: tool 'fs_move_file'",
        "summary.txt: Bills due: $1,450",
    ):
        assert phrase in done.stdout, done.stdout


def test_the_filesystem_example_skips_cleanly_without_node(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no node, no npx
    env.pop("HELIKON_MCP_SERVERS", None)
    done = launch(env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("skipping: @modelcontextprotocol/server-filesystem needs Node.js")
