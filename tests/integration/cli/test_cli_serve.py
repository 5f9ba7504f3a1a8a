"""``helikon serve``: the sidecar's agents behind the agent server, through the real executable."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from cli_support import HELIKON, env, free_port, project

pytestmark = pytest.mark.integration


def request(url: str, body: dict[str, object] | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"content-type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=60) as answer:
        return answer.status, answer.read().decode()


def test_serve_puts_the_sidecar_agents_behind_the_agent_server_and_its_page(tmp_path: Path) -> None:
    project(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [str(HELIKON), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "the server did not start listening"
            time.sleep(0.1)
        status, listing = request(f"{base}/agents")
        assert status == 200
        assert [a["name"] for a in json.loads(listing)["agents"]] == ["budgeting", "triage"]
        status, page = request(f"{base}/")
        assert status == 200 and page.lower().startswith("<!doctype html>")
        status, answer = request(f"{base}/agents/triage/runs", {"input": "How much did I spend?"})
        run = json.loads(answer)
        assert (status, run["status"]) == (200, "completed"), run
        assert run["output"] == "You spent $412 in November."  # a handoff to budgeting, which answered
        kinds = [event["type"] for event in run["events"]]
        assert "HandoffItem" in kinds and kinds.count("ToolCallItem") == 2
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert f"serving budgeting, triage at {base}/" in stderr
    assert "Traceback" not in stderr


def test_serve_one_agent_and_an_unknown_one_is_an_error(tmp_path: Path) -> None:
    project(tmp_path)
    done = subprocess.run(
        [str(HELIKON), "serve", "--agent", "nobody"],
        cwd=tmp_path,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no agent 'nobody' (agents: budgeting, triage)" in done.stderr and "Traceback" not in done.stderr
