"""Parallel test workers that find the npm MCP servers missing install them once.

Each pytest-xdist worker calls :func:`npm_servers.ensure` from its session
fixture. A fake ``npm`` on ``PATH`` (a script this test writes) stands in for
the real one: it logs each run, waits a moment so the workers overlap, and
lays out the two servers' entry points.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


def fake_npm(bin_dir: Path, log: Path) -> None:
    bin_dir.mkdir()
    script = bin_dir / "npm"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            echo "$$" >> {log}
            sleep 1
            for server in everything filesystem; do
                mkdir -p node_modules/@modelcontextprotocol/server-$server/dist
                echo "// fake" > node_modules/@modelcontextprotocol/server-$server/dist/index.js
            done
            """
        )
    )
    script.chmod(0o755)
    node = bin_dir / "node"
    node.write_text("#!/bin/sh\nexit 0\n")
    node.chmod(0o755)


def test_concurrent_workers_install_the_servers_once(tmp_path: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("the install lock is an flock")
    log = tmp_path / "npm-runs.log"
    fake_npm(tmp_path / "bin", log)
    target = tmp_path / "cache" / "mcp-servers"
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HELIKON_MCP_SERVERS": str(target),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "npm_servers.py")], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [worker.communicate(timeout=60)[0].strip() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0]
    assert outputs == [str(target)] * 3
    assert len(log.read_text().split()) == 1, "npm ci ran more than once"
    assert (target / "node_modules/@modelcontextprotocol/server-everything/dist/index.js").is_file()
