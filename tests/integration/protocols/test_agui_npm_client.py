"""The official ``@ag-ui/client`` (npm, pinned by ``agui_client/``) drives a
helikon AG-UI endpoint over real loopback HTTP: a tool call, a front-end
tool the client runs, and an approval answered with ``resume``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from npm_client import NpmUnavailable, ensure
from protocol_support import approving_context, assistant, serving

from helikon.protocols.agui import AguiServer

pytestmark = pytest.mark.integration

DRIVER = Path(__file__).resolve().parent / "agui_client" / "drive.cjs"


@pytest.fixture(scope="module")
def client_dir() -> Path:
    if shutil.which("node") is None and not os.environ.get("CI"):
        pytest.skip("Node.js is not installed")
    try:
        return ensure()
    except NpmUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


def test_the_official_client_runs_a_tool_call_a_front_end_tool_and_an_approval(client_dir: Path) -> None:
    with serving(AguiServer(assistant(), context=approving_context()).app()) as base:
        done = subprocess.run(
            ["node", str(DRIVER), base + "/"],
            env={**os.environ, "NODE_PATH": str(client_dir / "node_modules")},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    results = {r["scenario"]: r for r in map(json.loads, done.stdout.splitlines())}
    tool_call = results["tool_call"]
    assert (tool_call["tool"], tool_call["toolResult"]) == ("get_weather", "sunny in Paris")
    assert tool_call["answer"] == tool_call["result"] == "The tool said: sunny in Paris"
    frontend = results["frontend_tool"]
    assert frontend["tool"] == "where_am_i"
    assert frontend["answer"] == frontend["result"] == "The tool said: Lyon (city)"
    approval = results["approval"]
    assert approval["custom"] == ["helikon.approval_requested"]
    (pending,) = approval["pending"]
    assert pending["reason"] == "tool_approval" and pending["toolCallId"] == pending["id"]
    assert approval["toolResult"] == "paid 5" and approval["result"] == "The tool said: paid 5"
    assert approval["left"] == 0
    assert {
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_CONTENT",
        "RUN_FINISHED",
    } <= set(results["events"]["types"])
