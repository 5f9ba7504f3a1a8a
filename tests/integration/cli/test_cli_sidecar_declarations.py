"""The sidecar's MCP servers, permissions, output schemas and workflow agents, through ``helikon run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import HELIKON, helikon, write

pytestmark = pytest.mark.integration


def test_an_agent_uses_the_tools_of_a_declared_mcp_server(tmp_path: Path) -> None:
    # The MCP server is helikon itself: `helikon mcp serve` over stdio, serving another sidecar's agent.
    write(
        tmp_path,
        "books.toml",
        """
        [agents.books]
        description = "Knows the books"
        model = { provider = "mock", replies = [ { say = "You spent $412." } ] }
        """,
    )
    write(
        tmp_path,
        "agents.toml",
        f"""
        [mcp_servers.ledger]
        command = "{HELIKON}"
        args = ["mcp", "serve", "--agents", "books.toml", "--agent", "books"]
        tool_prefix = "ask_"

        [agents.asker]
        model = {{ provider = "mock", replies = [
            {{ call = [ {{ name = "ask_books", arguments = {{ input = "How much?" }} }} ] }},
            {{ say = "Done." }},
        ] }}
        mcp_servers = ["ledger"]
        """,
    )
    done = helikon("run", "--agent", "asker", "Hi", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        '→ ask_books({"input":"How much?"})',
        "← ask_books: You spent $412.",
        "Done.",
    ]


SPENDER = """
[agents.spender]
model = { provider = "mock", replies = [
    { call = [ { name = "lookup", arguments = { month = "2026-11" } } ] },
    { say = "ok" },
] }
tools = ["lookup"]

[tools.lookup]
description = "Look up spending"
inline = '''
def run(args):
    return 412
'''
"""


def test_permissions_deny_and_allow_rules_and_the_mode(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", SPENDER + '[permissions]\ndeny = [ { tool = "lookup" } ]\n')
    denied = helikon("run", "Hi", cwd=tmp_path)
    assert denied.returncode == 0, denied.stderr
    assert "denied: lookup: denied by deny rule: tool 'lookup'" in denied.stdout
    assert "← lookup: 412" not in denied.stdout
    # dont_ask denies what no allow rule permits ...
    write(tmp_path, "agents.toml", SPENDER + '[permissions]\nmode = "dont_ask"\n')
    assert "denied: lookup:" in helikon("run", "Hi", cwd=tmp_path).stdout
    # ... and an allow rule lets it through.
    write(
        tmp_path,
        "agents.toml",
        SPENDER + '[permissions]\nmode = "dont_ask"\nallow = [ { tool = "lookup" } ]\n',
    )
    allowed = helikon("run", "Hi", cwd=tmp_path)
    assert "← lookup: 412" in allowed.stdout and "denied" not in allowed.stdout


def test_an_output_json_schema_is_enforced(tmp_path: Path) -> None:
    write(
        tmp_path,
        "answer.json",
        json.dumps(
            {
                "type": "object",
                "properties": {"total": {"type": "number"}},
                "required": ["total"],
                "title": "Spending",
            }
        ),
    )
    sidecar = """
    [agents.typed]
    model = {{ provider = "mock", replies = [ {{ say = '{reply}' }} ] }}
    output = {{ schema = "answer.json" }}
    """
    write(tmp_path, "agents.toml", sidecar.format(reply='{"total": 412}'))
    good = helikon("run", "--json", "Hi", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    started = json.loads(good.stdout.splitlines()[0])
    assert started["type"] == "RunStarted"
    write(tmp_path, "agents.toml", sidecar.format(reply='{"total": "lots"}'))
    bad = helikon("run", "--json", "Hi", cwd=tmp_path)
    kinds = [json.loads(line)["type"] for line in bad.stdout.splitlines()]
    assert "RepairStarted" in kinds  # the answer did not match the schema: the model is asked again
    assert bad.returncode == 1


WORKFLOWS = """
[agents.first]
model = { provider = "mock", replies = [ { say = "one" }, { say = "uno" } ] }
[agents.second]
model = { provider = "mock", replies = [ { say = "two" } ] }

[workflows.pipeline]
kind = "sequential"
description = "first, then second"
steps = ["first", "second"]

[workflows.fanout]
kind = "parallel"
steps = ["first", "second"]

[workflows.twice]
kind = "loop"
steps = ["first"]
max_iterations = 2
"""


def final_text(events: list[dict[str, object]]) -> str:
    """The text of the run's last message."""
    message = [e for e in events if e["type"] == "MessageOutput"][-1]["item"]
    assert isinstance(message, dict)
    return "".join(part.get("text", "") for part in message["content"])


@pytest.mark.parametrize(
    ("workflow", "output"),
    [("pipeline", "two"), ("fanout", '{"first":"one","second":"two"}')],
)
def test_sequential_and_parallel_workflows_run_like_agents(
    tmp_path: Path, workflow: str, output: str
) -> None:
    write(tmp_path, "agents.toml", WORKFLOWS)
    done = helikon("run", "--agent", workflow, "--json", "Go", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "RunStarted" and events[0]["agent"] == workflow
    assert events[-1]["type"] == "RunCompleted"
    assert final_text(events) == output


def test_a_loop_workflow_runs_its_steps_up_to_max_iterations(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", WORKFLOWS)
    done = helikon("run", "--agent", "twice", "Go", cwd=tmp_path)
    # Two passes of `first` (its two replies); with no step escalating, the loop ends at its cap.
    assert done.stdout.count("one") == 1 and done.stdout.count("uno") == 1, done.stdout
    assert done.returncode == 1
    assert done.stderr.strip() == "run failed: maximum iterations exceeded (2)"
