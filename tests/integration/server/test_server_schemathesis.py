"""Schemathesis against the real server's ``/openapi.json``, with and without
auth: the document is what the handlers accept.

The schemathesis CLI (``st``) generates requests from the served schema —
valid and invalid bodies, paths, queries, headers, stateful sequences — and
runs every check (no server error, schema-valid requests accepted, answers
as documented, ``Allow`` headers, schema-violating data refused: every
check). Examples are capped to keep the test quick. The
served schema names no agent, so a second run uses a copy of it whose
``name`` path parameter is the real agent's: its bodies reach real runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import approving_context, assistant, serving

from helikon.server import AgentServer, BearerAuth

pytestmark = pytest.mark.integration

ST = Path(sys.executable).parent / "st"


def _with_agent_name(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for path in schema["paths"].values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "name":
                    parameter["schema"] = {"enum": [name]}
    return schema


@pytest.mark.parametrize(("auth", "real_agent"), [(True, False), (False, True)])
def test_schemathesis_finds_no_server_error(auth: bool, real_agent: bool, tmp_path: Path) -> None:
    if not ST.exists():
        pytest.skip("schemathesis is not installed")
    token = "schemathesis-token"
    server = AgentServer(
        agents=[assistant()],
        context=approving_context(),
        auth=BearerAuth([token]) if auth else None,
    )
    with serving(server.app()) as base:
        command = [
            str(ST),
            "run",
            f"{base}/openapi.json",
            "--url",
            base,
            "--checks",
            "all",
            "--max-examples",
            "12",
            "--seed",
            "21",
            "--request-timeout",
            "10",
            "--no-color",
        ]
        if real_agent:
            schema = _with_agent_name(httpx.get(f"{base}/openapi.json").json(), "assistant")
            (tmp_path / "schema.json").write_text(json.dumps(schema))
            command[2] = str(tmp_path / "schema.json")
        if auth:
            command += ["-H", f"Authorization: Bearer {token}"]
        env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""}
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout.lower(), done.stdout[-4000:]
