"""A tour of the ``helikon`` command line on ``examples/cli/agents.toml`` (no network, no API key).

It runs the real console script (installed next to this Python by
``pip install 'paigasus-helikon[cli]'``) the way you would in a shell:

    helikon run --agents examples/cli/agents.toml --agent triage "How much did I spend on dining?"
    helikon run ... --record triage.jsonl "..."     # the run, recorded as a trace
    helikon trace show triage.jsonl                  # the trace as a timeline
    helikon replay triage.jsonl --agents examples/cli/agents.toml   # offline; exit 1 on a change
    helikon eval run examples/cli/cases.jsonl --agents examples/cli/agents.toml --agent budgeting

``helikon repl --agents examples/cli/agents.toml`` is the interactive version
(edit agents.toml while it runs: it reloads). ``docs/cli.md`` is the guide.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HELIKON = Path(sys.executable).parent / "helikon"
SIDECAR = Path(__file__).resolve().parent / "cli" / "agents.toml"


def helikon(*args: str) -> int:
    print(f"$ helikon {' '.join(args)}", flush=True)
    done = subprocess.run([str(HELIKON), *args], capture_output=True, text=True)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    print(f"(exit code {done.returncode})\n", flush=True)
    return done.returncode


def main() -> None:
    sidecar = str(SIDECAR)
    question = "How much did I spend on dining in November?"
    assert helikon("run", "--agents", sidecar, "--agent", "triage", "--record", "triage.jsonl", question) == 0
    assert helikon("trace", "show", "triage.jsonl") == 0
    assert helikon("replay", "triage.jsonl", "--agents", sidecar) == 0
    cases = str(SIDECAR.parent / "cases.jsonl")
    eval_args = ("eval", "run", cases, "--agents", sidecar, "--agent", "budgeting", "--fail-under", "0.9")
    assert helikon(*eval_args) == 0


if __name__ == "__main__":
    main()
