"""``helikon eval run``: the report and its exit codes (0 pass, 1 fail or under --fail-under, 2 bad input)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_support import helikon, write

pytestmark = pytest.mark.integration

SIDECAR = """
[agents.support]
description = "Answers order questions"
instructions = "Use lookup_order, then answer."
model = { provider = "mock", script = "scripts.json" }
tools = ["lookup_order"]

[tools.lookup_order]
description = "Look up an order"
params = { type = "object", properties = { order = { type = "string" } }, required = ["order"] }
inline = '''
def run(args):
    return {"order": args["order"], "status": "shipped"}
'''

[eval]
evaluators = ["exact_match", "tool_trajectory"]
"""

SCRIPTS = {
    "default": [{"say": "Sorry, I can only help with orders."}],
    "cases": {
        "where-is-a1": [
            {"call": [{"name": "lookup_order", "arguments": {"order": "A1"}}]},
            {"say": "Your order A1 has shipped."},
        ],
    },
}

PASSING = [
    {
        "id": "where-is-a1",
        "input": "Where is A1?",
        "expected": "Your order A1 has shipped.",
        "expected_tools": ["lookup_order"],
    },
    {
        "id": "other",
        "input": "Weather?",
        "expected": "Sorry, I can only help with orders.",
        "expected_tools": [],
    },
]


def setup(tmp_path: Path, cases: list[dict[str, object]]) -> None:
    write(tmp_path, "agents.toml", SIDECAR)
    write(tmp_path, "scripts.json", json.dumps(SCRIPTS))
    write(tmp_path, "cases.jsonl", "".join(json.dumps(case) + "\n" for case in cases))


def test_a_passing_dataset_exits_0_and_prints_the_table(tmp_path: Path) -> None:
    setup(tmp_path, PASSING)
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "where-is-a1" in done.stdout and "other" in done.stdout
    assert "eval passed" in done.stderr


def test_a_failing_case_exits_1(tmp_path: Path) -> None:
    wrong = {"id": "wrong", "input": "Hi", "expected": "Hello!"}
    setup(tmp_path, [*PASSING, wrong])
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--json", cwd=tmp_path)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["format"] == "helikon-eval-report"
    statuses = {case["id"]: case["status"] for case in report["cases"]}
    assert statuses == {"where-is-a1": "passed", "other": "passed", "wrong": "failed"}
    assert "the eval did not pass" in done.stderr and "Traceback" not in done.stderr


def test_an_erroring_case_exits_1(tmp_path: Path) -> None:
    # The default script has one reply; a case whose run needs two fails (the mock runs out).
    scripts = {"default": [{"call": [{"name": "lookup_order", "arguments": {"order": "Z"}}]}]}
    setup(tmp_path, [{"id": "z", "input": "Where is Z?"}])
    write(tmp_path, "scripts.json", json.dumps(scripts))
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", cwd=tmp_path)
    assert done.returncode == 1, done.stdout


def test_fail_under_is_met_by_a_perfect_mean(tmp_path: Path) -> None:
    setup(tmp_path, PASSING)
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--fail-under", "1.0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_fail_under_with_a_passing_but_low_mean(tmp_path: Path) -> None:
    # A passing report with a mean below 1: a mock judge grading 0.6 at threshold 0.5.
    setup(tmp_path, [{"id": "other", "input": "Weather?"}])
    sidecar = (
        (tmp_path / "agents.toml")
        .read_text()
        .replace(
            'evaluators = ["exact_match", "tool_trajectory"]',
            'evaluators = ["llm_judge"]\n'
            "llm_judge = { model = { provider = 'mock',"
            ' replies = [ { say = \'{"score": 0.6, "reasoning": "ok"}\' } ] },'
            ' rubric = "Polite.", threshold = 0.5 }',
        )
    )
    (tmp_path / "agents.toml").write_text(sidecar)
    passing = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--fail-under", "0.5", cwd=tmp_path)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    under = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--fail-under", "0.7", cwd=tmp_path)
    assert under.returncode == 1
    assert "mean score 0.600 is below --fail-under 0.7" in under.stderr


def test_trace_sqlite_and_html(tmp_path: Path) -> None:
    setup(tmp_path, PASSING)
    done = helikon(
        "eval",
        "run",
        "cases.jsonl",
        "--agent",
        "support",
        "--trace",
        "sqlite:runs.db",
        "--html",
        "out/report.html",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "runs.db") as db:
        rows = db.execute("SELECT case_id, status FROM eval_cases ORDER BY case_index").fetchall()
    assert rows == [("where-is-a1", "passed"), ("other", "passed")]
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")
    assert "where-is-a1" in html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "nobody"), "no agent 'nobody' (agents: support)"),
        (("--agent", "support", "--trace", "postgres:x"), "must be sqlite:PATH"),
        (("--agent", "support", "--fail-under", "2"), "--fail-under"),
        ((), "Missing option '--agent'"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    setup(tmp_path, PASSING)
    done = helikon("eval", "run", "cases.jsonl", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_bad_dataset_line_exits_2_naming_it(tmp_path: Path) -> None:
    setup(tmp_path, PASSING)
    write(tmp_path, "cases.jsonl", '{"input": "ok"}\n{"inptu": "typo"}\n')
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", cwd=tmp_path)
    assert done.returncode == 2
    assert "cases.jsonl:2" in done.stderr and "Traceback" not in done.stderr
