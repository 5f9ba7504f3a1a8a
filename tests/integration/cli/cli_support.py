"""Running the installed ``helikon`` executable (the console script next to ``sys.executable``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.loopback import free_port as free_port

HELIKON = Path(sys.executable).parent / "helikon"
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "traces"
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "HELIKON_DEBUG")


def env(home: Path) -> dict[str, str]:
    """The environment of a run: no provider keys, a private home (history), no colours."""
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    clean.update(HOME=str(home), NO_COLOR="1", TERM="dumb", COLUMNS="200")
    return clean


def helikon(*args: str, cwd: Path, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    if not HELIKON.exists():
        pytest.fail(f"{HELIKON} is missing: pip install -e '.[cli]'")
    return subprocess.run(
        [str(HELIKON), *args],
        cwd=cwd,
        env={**env(cwd), **extra},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


#: A sidecar with a tool, a handoff and scripted models.
AGENTS = """
[agents.triage]
description  = "Routes personal-finance questions"
instructions = "Classify the question and route it to the right specialist."
model        = { provider = "mock", replies = [
    { call = [ { name = "lookup_spending", arguments = { month = "2026-11" } } ] },
    { call = [ { name = "transfer_to_budgeting" } ] },
] }
tools        = ["lookup_spending"]
handoffs     = ["budgeting"]

[agents.budgeting]
description  = "Answers budgeting questions"
instructions = "Answer budgeting questions."
model        = { provider = "mock", replies = [ { say = "You spent $412 in November." } ] }

[tools.lookup_spending]
description = "Look up spending for a month"
params      = { type = "object", properties = { month = { type = "string" } }, required = ["month"] }
script      = "tools/lookup_spending.star"
"""

SPENDING = """
def run(args):
    return {"month": args["month"], "total": 412}
"""


def project(directory: Path) -> Path:
    """The standard sidecar and its tool script in ``directory``; returns the sidecar."""
    write(directory, "tools/lookup_spending.star", SPENDING)
    return write(directory, "agents.toml", AGENTS)


__all__ = ["AGENTS", "GOLDEN", "HELIKON", "SPENDING", "env", "helikon", "project", "write"]
