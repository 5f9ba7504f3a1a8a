"""``helikon eval run``: the report and its exit codes (0 pass, 1 fail or under --fail-under, 2 bad input)."""

from __future__ import annotations

import json
import re
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


WRONG = {
    "id": "wrong",
    "input": "Hi",
    "expected": "Hello! I am the order assistant and I can look up any order you placed with us.",
}


def links(page: Path) -> list[str]:
    """The relative links (href) of an HTML page."""
    found = re.findall(r'href="([^"#][^"]*)"', page.read_text())
    return [link for link in found if "://" not in link]


def test_html_writes_every_page_it_links(tmp_path: Path) -> None:
    setup(tmp_path, [*PASSING, WRONG])
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--html", "out/run.html", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = tmp_path / "out" / "run.html"
    linked = links(report)
    assert "traces/0001-where-is-a1.html" in linked and "traces/0003-wrong.jsonl" in linked
    for link in linked:
        target = report.parent / link
        assert target.is_file(), f"{report.name} links {link}, which was not written"
        if target.suffix == ".html":
            for back in links(target):
                assert (target.parent / back).resolve() == report.resolve(), back
    trace = (report.parent / "traces" / "0001-where-is-a1.jsonl").read_text()
    assert '"agent":"support"' in trace.splitlines()[0]
    # The trace page: each event under its own step, the tool's result as JSON (not a Python repr).
    page = (report.parent / "traces" / "0001-where-is-a1.html").read_text()
    rows = page.split("<tr><td")[1:]
    step0 = next(row for row in rows if "CallModel turn 1" in row)
    assert "ToolCallItem lookup_order" in step0
    tools = next(row for row in rows if "ToolsExecuted" in row)
    assert "{&quot;order&quot;:&quot;A1&quot;,&quot;status&quot;:&quot;shipped&quot;}" in tools
    assert "&#x27;order&#x27;" not in page


def test_fail_under_is_a_threshold_on_the_mean_and_max_failures_counts_cases(tmp_path: Path) -> None:
    setup(tmp_path, [*PASSING, WRONG])  # one failed case; mean (2 + 2 + 0) / 5 = 0.8
    base = ("eval", "run", "cases.jsonl", "--agent", "support")
    assert helikon(*base, cwd=tmp_path).returncode == 1  # no threshold: any failure fails
    met = helikon(*base, "--fail-under", "0.5", cwd=tmp_path)
    assert met.returncode == 0, met.stderr
    assert "eval passed" in met.stderr
    missed = helikon(*base, "--fail-under", "0.9", cwd=tmp_path)
    assert missed.returncode == 1
    assert "mean score 0.800 is below --fail-under 0.9" in missed.stderr
    assert helikon(*base, "--max-failures", "1", cwd=tmp_path).returncode == 0
    over = helikon(*base, "--max-failures", "0", cwd=tmp_path)
    assert over.returncode == 1
    assert "1 case(s) failed, errored or diverged: more than --max-failures 0" in over.stderr
    both = helikon(*base, "--fail-under", "0.5", "--max-failures", "0", cwd=tmp_path)
    assert both.returncode == 1


def test_the_table_shows_expected_and_actual_for_failures_in_full(tmp_path: Path) -> None:
    setup(tmp_path, [*PASSING, WRONG])
    done = helikon("eval", "run", "cases.jsonl", "--agent", "support", cwd=tmp_path)
    lines = done.stdout.splitlines()
    at = lines.index("  wrong: exact_match: the answer differs from the expected text")
    assert lines[at + 1] == "      expected: " + str(WRONG["expected"])
    assert lines[at + 2] == "      actual:   Sorry, I can only help with orders."
    assert "..." not in done.stdout


def test_save_then_rescore_and_replay_a_run(tmp_path: Path) -> None:
    setup(tmp_path, [*PASSING, WRONG])
    saved = helikon("eval", "run", "cases.jsonl", "--agent", "support", "--save", "runs/one", cwd=tmp_path)
    assert saved.returncode == 1
    root = tmp_path / "runs" / "one"
    assert (root / "report.json").is_file() and (root / "report.html").is_file()
    assert sorted(p.name for p in (root / "traces").iterdir())[:2] == [
        "0001-where-is-a1.html",
        "0001-where-is-a1.jsonl",
    ]
    # Rescore with other evaluators: no agent runs (the model has no replies left), the traces are scored.
    write(tmp_path, "scripts.json", json.dumps({"default": []}))
    sidecar = tmp_path / "agents.toml"
    sidecar.write_text(
        sidecar.read_text().replace('["exact_match", "tool_trajectory"]', '["tool_trajectory"]')
    )
    rescored = helikon("eval", "rescore", "runs/one", "--json", cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    report = json.loads(rescored.stdout)
    assert report["mode"] == "rescore" and report["evaluators"] == ["tool_trajectory"]
    assert [case["status"] for case in report["cases"]] == ["passed", "passed", "skipped"]
    # Replay against the agent: offline, the same agent matches its recording ...
    same = helikon("eval", "replay", "runs/one", "--agent", "support", "--json", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["summary"]["diverged_cases"] == 0
    # ... and a changed agent diverges, which fails the run.
    sidecar.write_text(sidecar.read_text().replace("Use lookup_order, then answer.", "Be brief."))
    changed = helikon("eval", "replay", "runs/one", "--agent", "support", cwd=tmp_path)
    assert changed.returncode == 1
    assert "diverged at step 0: the agent's definition differs from the recording" in changed.stdout
