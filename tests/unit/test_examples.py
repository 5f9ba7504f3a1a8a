"""Every script in ``examples/`` runs, as a user would run it, and says what it should.

Each example runs in its own subprocess (``sys.executable``), from a fresh
temporary directory and without provider API keys, so the scripted models
are used and nothing is written into the checkout. ``suspend_resume.py`` runs
twice in the same directory: the first run saves ``run.state``, the second
(``--resume``) finishes the run from it. The scripts start all at once, so
the whole file takes about as long as the slowest example.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(path.name for path in EXAMPLES.glob("*.py"))

#: A phrase each run's output must contain (examples not listed here must just succeed).
PHRASES: dict[str, tuple[str, ...]] = {
    "budget_assistant.py": ("[done:",),
    "agent_server.py": (
        "without the token: 401",
        "streamed: [tool call latest_bill] Done: City Power",
        "session ada: You said 'again'; this session has 2 message(s).",
        "approval requested: pay_bill(",
        "after approval: Done: paid 184.20 USD to City Power.",
    ),
    "agent_protocols.py": (
        "without the token: 401",
        "TOOL_CALL_RESULT TEXT_MESSAGE_START",
        "front-end tool: The tool said: Lyon",
        "approval event: helikon.approval_requested",
        "after approval: The tool said: paid 42 USD",
        "A2A task: TASK_STATE_INPUT_REQUIRED",
        "A2A answered: TASK_STATE_COMPLETED The tool said: paid 7 USD",
        "replayed with the server gone, same events: True",
    ),
    "agentcore_server.py": (
        "ping: Healthy",
        "JSON answer: You spent $412",
        "SSE events: RunStarted",
        "RunCompleted",
        "same session: This is question 3 of our conversation; the first was 'How much did I spend",
        "MCP tool budget_assistant: You spent $180",
    ),
    "mcp_agent_server.py": ("HTTP answer: You spent $412", "stdio answer: You spent $412"),
    "coding_agent.py": ("FAILED (failures=1)", "OK\n", "denied: ../../etc/passwd", "Both tests pass now."),
    "custom_interpreter.py": ("2 + 3 = 5",),
    "job_queue.py": (
        "queue output: Report: Bees dance to share where food is.",
        "same output as agent.run: True",
        "same events as agent.run: True",
    ),
    "cli_tour.py": (
        "⇢ handoff: triage -> budgeting",
        "#1 ExecuteTools lookup_spending -> ToolsExecuted",
        "replay matches the recording (4 steps)",
        "mean 1.00; 0 skipped score(s): PASSED",
    ),
    "observability.py": (
        "invoke_agent triage  [in=425 out=55]",
        "    invoke_agent investing specialist  [in=330 out=43]",
        "        execute_tool fund_costs",
        "gen_ai.client.token.usage chat input: 425",
    ),
    "structured_output.py": ("category='Entertainment'",),
    "testing_models.py": (
        "same events as one process: True",
        "FunctionModel: You spent $312.40 on dining: over your $250 budget.",
    ),
    "suspend_resume.py": ("suspended before running pay_invoice", "Invoice INV-7 is paid."),
    "triage_handoff.py": ("handoff: triage -> investing specialist", "broad index fund"),
    "swarm_finance.py": ("handoff: budgeting -> investing", "automatic plan"),
    "graph_report.py": ("'[income]\\nEarned $3,000 in salary.'", "state['summary'] = 'You saved $900"),
    "persistent_chat.py": ("I remember 1 earlier message(s): ['My name is Ada.']",),
    "offline_eval.py": (
        "unknown-order          FAILED  0.00 x",
        "passed: False",
        "re-scored offline: mean",
        "refund-b2: step 3: expected effect ExecuteTools, got CallModel",
    ),
    "research_pipeline.py": ("- rates: Mortgage rates eased to 6.1%", '"jobs":"Local unemployment'),
    "temporal_agent.py": (
        "approval requested: pay_bill(",
        "-- the worker is gone; the run waits in Temporal for a human",
        "pay_bill -> paid 184.20 USD to City Power for Okafor",
    ),
    "research_agent.py": (
        "# Mortgage rates ease to 6.1%",
        "denied: host 169.254.169.254 is not on the allow list",
        "denied: refusing to connect to loopback address 127.0.0.1",
    ),
}

#: Extra runs after the first, in the same directory.
FOLLOW_UPS: dict[str, tuple[str, ...]] = {
    "suspend_resume.py": ("--resume",),
    "persistent_chat.py": ("What is my name?",),
}


@attrs.frozen
class Ran:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _env() -> dict[str, str]:
    """The environment without provider credentials, so examples use their scripted models."""
    return {k: v for k, v in os.environ.items() if "API_KEY" not in k and not k.startswith("AWS_")}


def _launch(script: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str], *args: str) -> Ran:
    stdout, stderr = process.communicate(timeout=120)
    return Ran(args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Ran]]:
    """Every example's runs, started concurrently."""
    dirs = {script: tmp_path_factory.mktemp(script.removesuffix(".py")) for script in SCRIPTS}
    started = {script: _launch(script, dirs[script]) for script in SCRIPTS}
    results: dict[str, list[Ran]] = {}
    for script, process in started.items():
        results[script] = [_finish(process)]
        for arg in FOLLOW_UPS.get(script, ()):
            results[script].append(_finish(_launch(script, dirs[script], arg), arg))
    return results


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_example_runs_and_says_what_it_should(script: str, runs: dict[str, list[Ran]]) -> None:
    output = ""
    for ran in runs[script]:
        assert ran.returncode == 0, f"{script} {' '.join(ran.args)} failed:\n{ran.stdout}\n{ran.stderr}"
        output += ran.stdout
    for phrase in PHRASES.get(script, ()):
        assert phrase in output, f"{script} did not print {phrase!r}:\n{output}"


def test_the_multi_agent_examples_exist() -> None:
    assert {"triage_handoff.py", "swarm_finance.py", "graph_report.py", "research_pipeline.py"} <= set(
        SCRIPTS
    )


def test_suspend_resume_saved_its_state_between_the_two_runs(runs: dict[str, list[Ran]]) -> None:
    first, second = runs["suspend_resume.py"]
    assert "state saved to run.state" in first.stdout
    assert second.args == ("--resume",) and "resuming run run-42" in second.stdout


def test_the_multi_agent_guide_snippets_run() -> None:
    """docs/multi-agent.md's ``python`` blocks, run in order in one namespace (they assert their results)."""
    guide = (EXAMPLES.parent / "docs" / "multi-agent.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL)
    assert len(blocks) >= 9
    namespace: dict[str, object] = {"__name__": "multi_agent_guide"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/multi-agent.md block {number}", "exec"), namespace)
