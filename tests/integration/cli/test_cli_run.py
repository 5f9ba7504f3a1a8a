"""``helikon run``, ``trace show/diff``, ``replay``, ``--help`` and errors, through the real executable."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_support import GOLDEN, HELIKON, helikon, project, write

pytestmark = pytest.mark.integration


def test_run_streams_tool_calls_handoffs_and_the_answer(tmp_path: Path) -> None:
    project(tmp_path)
    done = helikon("run", "--agent", "triage", "How much did I spend in November?", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        '→ lookup_spending({"month":"2026-11"})',
        '← lookup_spending: {"month":"2026-11","total":412}',
        "→ transfer_to_budgeting({})",
        "← transfer_to_budgeting: Transferred to budgeting.",
        "⇢ handoff: triage -> budgeting",
        "You spent $412 in November.",
    ]
    assert "Traceback" not in done.stderr


def test_run_json_is_the_event_stream(tmp_path: Path) -> None:
    project(tmp_path)
    done = helikon("run", "--agent", "triage", "--json", "How much?", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert kinds.count("ToolCallItem") == 2 and "HandoffItem" in kinds
    handoff = next(e for e in events if e["type"] == "HandoffItem")
    assert (handoff["from_agent"], handoff["to_agent"]) == ("triage", "budgeting")
    assert "".join(e["text"] for e in events if e["type"] == "TokenDelta") == "You spent $412 in November."


def test_a_mock_model_reports_plausible_token_usage(tmp_path: Path) -> None:
    project(tmp_path)
    done = helikon("run", "--agent", "budgeting", "Hi", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # One token per four characters: "Answer budgeting questions." + "Hi" in, the answer out.
    assert done.stderr.strip() == "done: 8 tokens in, 7 out, 1 request(s)"


def test_the_default_agent_is_the_alphabetically_first(tmp_path: Path) -> None:
    project(tmp_path)
    done = helikon("run", "Hi", cwd=tmp_path)  # ./agents.toml, agent "budgeting"
    assert done.returncode == 0 and done.stdout.strip() == "You spent $412 in November."


def test_a_failed_run_exits_1_with_the_reason(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", '[agents.a]\nmodel = { provider = "mock", replies = [] }\n')
    done = helikon("run", "Hi", cwd=tmp_path)
    assert done.returncode == 1
    # One sentence, the describe() text evals use: not the failure's Python repr.
    assert done.stderr.strip() == "run failed: model call failed: MockModel has no script left for call 1"


def test_a_starlark_tool_that_loops_forever_is_a_tool_error_the_model_sees(tmp_path: Path) -> None:
    write(
        tmp_path,
        "agents.toml",
        """
        [agents.a]
        model = { provider = "mock", replies = [ { call = [ { name = "spin" } ] }, { say = "It failed." } ] }
        tools = ["spin"]
        [tools.spin]
        description = "Spins"
        max_steps = 500
        inline = '''
        def run(args):
            for i in range(1000000000):
                for j in range(1000000000):
                    pass
        '''
        """,
    )
    done = helikon("run", "Spin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "← spin: tool 'spin': the script exceeded its step cap of 500 steps" in done.stdout
    assert done.stdout.rstrip().endswith("It failed.")


def test_the_step_cap_is_exact_through_the_cli(tmp_path: Path) -> None:
    # run(args) is one step, each iteration one more: 999 iterations are exactly max_steps = 1000.
    write(
        tmp_path,
        "agents.toml",
        """
        [agents.a]
        model = { provider = "mock", replies = [
            { call = [ { name = "count", arguments = { n = 999 } } ] },
            { call = [ { name = "count", arguments = { n = 1000 } } ] },
            { say = "done" },
        ] }
        tools = ["count"]
        [tools.count]
        description = "Counts"
        max_steps = 1000
        params = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
        inline = '''
        def run(args):
            for i in range(args["n"]):
                pass
            return args["n"]
        '''
        """,
    )
    done = helikon("run", "Count", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "← count: 999" in done.stdout
    assert "← count: tool 'count': the script exceeded its step cap of 1000 steps" in done.stdout


def test_a_missing_api_key_fails_fast(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", '[agents.a]\nmodel = { provider = "openai", id = "gpt-5-mini" }\n')
    done = helikon("run", "Hi", cwd=tmp_path)
    assert done.returncode == 2
    assert "needs an API key: set OPENAI_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr
    for command in (
        ("repl",),
        ("mcp", "serve", "--agent", "a"),
        ("eval", "run", "agents.toml", "--agent", "a"),
    ):
        early = helikon(*command, cwd=tmp_path)
        assert early.returncode == 2, command
        assert "set OPENAI_API_KEY" in early.stderr and "Traceback" not in early.stderr


def test_sidecar_errors_are_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    write(
        tmp_path, "agents.toml", '[agents.a]\nmodel = { provider = "mock", replies = [] }\nhandoffs = ["a"]\n'
    )
    done = helikon("run", "Hi", cwd=tmp_path)
    assert done.returncode == 2
    assert "handoff cycle detected: a -> a" in done.stderr and "Traceback" not in done.stderr
    debug = helikon("--debug", "run", "Hi", cwd=tmp_path)
    assert debug.returncode == 2 and "Traceback" in debug.stderr and "SidecarError" in debug.stderr
    missing = helikon("run", "--agents", "nope.toml", "Hi", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.toml: cannot read the sidecar" in missing.stderr


COMMANDS = [
    (),
    ("run",),
    ("repl",),
    ("eval",),
    ("eval", "run"),
    ("mcp",),
    ("mcp", "serve"),
    ("serve",),
    ("eval", "rescore"),
    ("eval", "replay"),
    ("trace",),
    ("trace", "show"),
    ("trace", "diff"),
    ("replay",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "helikon")
def test_every_command_has_help(tmp_path: Path, command: tuple[str, ...]) -> None:
    done = helikon(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: helikon")
    assert "--help" in done.stdout


def test_the_paigasus_helikon_alias_is_the_same_command(tmp_path: Path) -> None:
    alias = HELIKON.with_name("paigasus-helikon")
    done = subprocess.run([str(alias), "--help"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and "mcp" in done.stdout and "replay" in done.stdout


def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path) -> None:
    for args in (("frobnicate",), ("run",), ("trace", "show", "missing.jsonl")):
        done = helikon(*args, cwd=tmp_path)
        assert done.returncode == 2, args
        assert "Error:" in done.stderr and "Traceback" not in done.stderr


def test_trace_show_is_a_timeline_of_a_golden(tmp_path: Path) -> None:
    done = helikon("trace", "show", str(GOLDEN / "handoff.jsonl"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("agent triage, run golden-handoff, 2 steps, sha256:")
    assert "  input: How should I start investing $5,000?" in lines
    assert "#0 CallModel turn 1 -> ModelResponded" in lines
    assert "    ⇢ handoff: triage -> investing specialist" in lines
    assert "    investing specialist: Start with a broad index fund." in lines


@pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN.glob("*.jsonl")))
def test_trace_show_reads_every_golden(tmp_path: Path, golden: str) -> None:
    done = helikon("trace", "show", str(GOLDEN / golden), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].strip().startswith(("run completed", "run failed"))


def test_trace_show_lists_each_event_under_its_own_step_with_json_results(tmp_path: Path) -> None:
    project(tmp_path)
    args = ("run", "--agent", "triage", "--run-id", "r0", "--record", "t.jsonl", "How much?")
    done = helikon(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = helikon("trace", "show", "t.jsonl", cwd=tmp_path).stdout.splitlines()
    at = lines.index("#0 CallModel turn 1 -> ModelResponded")
    # The model's reply of step 0 asked for the tool: its call is listed under step 0 ...
    assert lines[at + 1] == '    → lookup_spending({"month":"2026-11"})'
    # ... and step 1 (the tool ran) shows its result as JSON, then the tool's output event.
    assert lines[at + 2] == "#1 ExecuteTools lookup_spending -> ToolsExecuted"
    assert lines[at + 3] == '    = ToolReturned call_r0_1_0: {"output":{"month":"2026-11","total":412}}'
    assert lines[at + 4] == '    ← lookup_spending: {"month":"2026-11","total":412}'
    assert "{'month'" not in "\n".join(lines)


def test_trace_diff_of_a_golden_with_itself_agrees(tmp_path: Path) -> None:
    done = helikon(
        "trace", "diff", str(GOLDEN / "single_tool.jsonl"), str(GOLDEN / "single_tool.jsonl"), cwd=tmp_path
    )
    assert (done.returncode, done.stdout.strip()) == (0, "the traces agree")


def test_trace_diff_names_the_differing_fields(tmp_path: Path) -> None:
    done = helikon(
        "trace", "diff", str(GOLDEN / "single_tool.jsonl"), str(GOLDEN / "parallel_tools.jsonl"), cwd=tmp_path
    )
    assert done.returncode == 1
    assert "step 0 (CallModel turn 1):" in done.stdout
    assert "  effect.request.messages[0].content[0].text: expected " in done.stdout


def test_trace_diff_of_two_recordings_names_the_changed_reply(tmp_path: Path) -> None:
    sidecar = project(tmp_path)
    first = helikon("run", "--agent", "budgeting", "--record", "a.jsonl", "How much?", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    sidecar.write_text(sidecar.read_text().replace("$412 in November", "$413 in November"))
    second = helikon("run", "--agent", "budgeting", "--record", "b.jsonl", "How much?", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    done = helikon("trace", "diff", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert done.returncode == 1
    assert "step 0 (CallModel turn 1):" in done.stdout
    assert "result.events[2].text: expected '$412 ', got '$413 '" in done.stdout
    assert "header:" not in done.stdout  # the definition (instructions, tools) did not change


def test_trace_diff_compares_behaviour_not_run_ids_and_exact_compares_bytes(tmp_path: Path) -> None:
    project(tmp_path)
    for name in ("a.jsonl", "b.jsonl"):  # two runs, two random run ids (and derived call ids)
        done = helikon("run", "--agent", "triage", "--record", name, "How much?", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    same = helikon("trace", "diff", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert (same.returncode, same.stdout.strip()) == (0, "the traces agree"), same.stdout
    exact = helikon("trace", "diff", "--exact", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert exact.returncode == 1
    assert "  events[0].run_id: expected '" in exact.stdout
    assert "effect.steps[0].call_id: expected 'call_" in exact.stdout


def test_run_id_makes_a_recording_reproducible_byte_for_byte(tmp_path: Path) -> None:
    project(tmp_path)
    for name in ("a.jsonl", "b.jsonl"):
        args = ("run", "--agent", "triage", "--run-id", "run-7", "--record", name, "How much?")
        done = helikon(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert "call_run-7_1_0" in (tmp_path / "a.jsonl").read_text()
    exact = helikon("trace", "diff", "--exact", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert (exact.returncode, exact.stdout.strip()) == (0, "the traces agree")
    shown = helikon("trace", "show", "a.jsonl", cwd=tmp_path)
    assert shown.stdout.startswith("agent triage, run run-7, 4 steps, ")


def test_a_truncated_trace_is_a_clear_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join((GOLDEN / "single_tool.jsonl").read_text().splitlines(keepends=True)[:2]))
    done = helikon("trace", "show", str(cut), cwd=tmp_path)
    assert done.returncode == 2 and "truncated" in done.stderr and "Traceback" not in done.stderr


def test_record_then_replay_and_a_changed_sidecar_diverges(tmp_path: Path) -> None:
    sidecar = project(tmp_path)
    recorded = helikon("run", "--agent", "triage", "--record", "runs/triage.jsonl", "How much?", cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    trace = tmp_path / "runs" / "triage.jsonl"
    shown = helikon("trace", "show", str(trace), cwd=tmp_path)
    assert "⇢ handoff: triage -> budgeting" in shown.stdout

    same = helikon("replay", str(trace), "--agent", "triage", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert same.stdout.strip() == "replay matches the recording (4 steps)"

    # Replay is offline: the tool script is not run (deleting it changes nothing).
    shutil.copy(tmp_path / "tools" / "lookup_spending.star", tmp_path / "spare.star")
    (tmp_path / "tools" / "lookup_spending.star").write_text("def run(args):\n    return 0\n")
    assert helikon("replay", str(trace), cwd=tmp_path).returncode == 0
    # ... but a live-tools replay runs it, and the changed result diverges.
    live = helikon("replay", str(trace), "--live-tools", cwd=tmp_path)
    assert live.returncode == 1, live.stdout
    assert "run live gave another result from lookup_spending(" in live.stderr

    sidecar.write_text(sidecar.read_text().replace("route it to the right specialist", "route it"))
    changed = helikon("replay", str(trace), "--agent", "triage", cwd=tmp_path)
    assert changed.returncode == 1
    assert "replay diverged at step 0" in changed.stderr
    assert (
        "definition.instructions: expected 'Classify the question and route it to the right specialist.'"
        in (changed.stderr)
    )
    assert "Traceback" not in changed.stderr


def test_a_loose_replay_warns_in_one_line_not_a_python_warning(tmp_path: Path) -> None:
    sidecar = project(tmp_path)
    recorded = helikon("run", "--agent", "budgeting", "--record", "t.jsonl", "How much?", cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    sidecar.write_text(sidecar.read_text().replace("Answer budgeting questions.", "Answer briefly."))
    done = helikon("replay", "t.jsonl", "--loose", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: replaying a trace of a different agent definition: "
        "definition.instructions: expected 'Answer budgeting questions.', got 'Answer briefly.'"
    ]


def test_trace_show_describes_a_failure_in_words(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", '[agents.a]\nmodel = { provider = "mock", replies = [] }\n')
    assert helikon("run", "--record", "t.jsonl", "Hi", cwd=tmp_path).returncode == 1
    done = helikon("trace", "show", "t.jsonl", cwd=tmp_path)
    assert done.stdout.splitlines()[-1] == (
        "    run failed: model call failed: MockModel has no script left for call 1"
    )


def test_replay_of_a_golden_against_an_unrelated_agent_diverges(tmp_path: Path) -> None:
    project(tmp_path)
    done = helikon("replay", str(GOLDEN / "single_tool.jsonl"), "--agent", "budgeting", cwd=tmp_path)
    assert done.returncode == 1
    assert (
        "replay diverged" in done.stderr
        and "definition.name: expected 'budget-assistant', got 'budgeting'" in (done.stderr)
    )


def test_a_priced_model_shows_what_the_run_cost(tmp_path: Path) -> None:
    pytest.importorskip("genai_prices")
    from helikon import Trace
    from helikon.cli._render import spending
    from helikon.events import RunCompleted
    from helikon.providers.prices import GenaiPrices

    project(tmp_path)
    toml = (tmp_path / "agents.toml").read_text()
    priced = 'model        = { provider = "mock", id = "gpt-4o-mini", replies = [ { say = "You spent'
    (tmp_path / "agents.toml").write_text(
        toml.replace('model        = { provider = "mock", replies = [ { say = "You spent', priced)
    )
    record = tmp_path / "run.jsonl"
    done = helikon("run", "--agent", "budgeting", "--record", str(record), "Hi", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (completed,) = [e for e in Trace.load(record).events if isinstance(e, RunCompleted)]
    assert completed.usage.cost is not None
    assert GenaiPrices().price("openai", "gpt-4o-mini") is not None
    assert f"done: {spending(completed.usage)}" in done.stderr
    assert "cost $" in done.stderr
    shown = helikon("trace", "show", str(record), cwd=tmp_path)
    assert f"run completed ({spending(completed.usage)})" in shown.stdout
