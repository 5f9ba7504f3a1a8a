"""The agents.toml sidecar: loading, validation errors that name the place, building agents."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import trio

from helikon import RunError, collect
from helikon.cli import SidecarError, load_sidecar
from helikon.evals import ExactMatch, JsonSchemaEvaluator, ToolUseTrajectory

MOCK = 'model = { provider = "mock", replies = [ { say = "ok" } ] }'


def write(tmp_path: Path, text: str, name: str = "agents.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SidecarError) as caught:
        load_sidecar(write(tmp_path, text))
    return str(caught.value)


def test_the_books_example_loads_and_runs(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "lookup_spending.star").write_text(
        'def run(args):\n    return {"month": args["month"], "total": 412.5}\n'
    )
    (tmp_path / "triage.md").write_text("Classify the question and route it.")
    (tmp_path / "budgeting.json").write_text(
        '{"default": [{"call": [{"name": "lookup_spending", "arguments": {"month": "2026-11"}}]},'
        ' {"say": "You spent $412.50."}]}'
    )
    path = write(
        tmp_path,
        """
        [agents.triage]
        description  = "Routes personal-finance questions"
        instructions = { file = "triage.md" }
        model        = { provider = "mock", replies = [ { call = [ { name = "transfer_to_budgeting" } ] } ] }
        tools        = ["lookup_spending"]
        handoffs     = ["budgeting"]

        [agents.budgeting]
        description  = "Answers budgeting questions"
        instructions = "Answer using the spending lookup tool."
        model        = { provider = "mock", script = "budgeting.json" }
        tools        = ["lookup_spending"]

        [tools.lookup_spending]
        description = "Look up spending for a month"
        params      = { type = "object", properties = { month = { type = "string" } }, required = ["month"] }
        script      = "tools/lookup_spending.star"

        [eval]
        evaluators = ["exact_match", "tool_trajectory"]
        """,
    )
    sidecar = load_sidecar(path)
    assert sidecar.agent_names == ("budgeting", "triage")
    assert sidecar.default_agent == "budgeting"  # alphabetically first, not first in the file
    assert sidecar.agents["triage"].instructions == "Classify the question and route it."
    assert {p.name for p in sidecar.files} == {
        "agents.toml",
        "triage.md",
        "budgeting.json",
        "lookup_spending.star",
    }
    result = trio.run(collect, sidecar.build("triage").run(None, "How much did I spend?"))
    assert result.final_output == "You spent $412.50."
    outputs = [e.item.content for e in result.events if type(e).__name__ == "ToolOutputItem"]
    assert '{"month":"2026-11","total":412.5}' in outputs
    # A fresh build plays the mock script from the start again.
    again = trio.run(collect, sidecar.build("budgeting").run(None, "Again?"))
    assert again.final_output == "You spent $412.50."
    evaluators = sidecar.eval.build()
    assert isinstance(evaluators[0], ExactMatch) and isinstance(evaluators[1], ToolUseTrajectory)


def test_a_handoff_cycle_is_rejected_with_its_path(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        f"""
        [agents.a]
        {MOCK}
        handoffs = ["b"]
        [agents.b]
        {MOCK}
        handoffs = ["c"]
        [agents.c]
        {MOCK}
        handoffs = ["a"]
        """,
    )
    assert "handoff cycle detected: a -> b -> c -> a" in message
    assert "declare one-way handoff chains" in message
    assert "agents.toml" in message


def test_a_self_handoff_is_a_cycle(tmp_path: Path) -> None:
    assert "handoff cycle detected: solo -> solo" in error_of(
        tmp_path, f'[agents.solo]\n{MOCK}\nhandoffs = ["solo"]\n'
    )


def test_a_diamond_is_not_a_cycle(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        [agents.a]
        {MOCK}
        handoffs = ["b", "c"]
        [agents.b]
        {MOCK}
        handoffs = ["d"]
        [agents.c]
        {MOCK}
        handoffs = ["d"]
        [agents.d]
        {MOCK}
        """,
    )
    assert load_sidecar(path).build("a").name == "a"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            f'[agents.a]\n{MOCK}\ntools = ["nope"]\n',
            "[agents.a] tools: names 'nope', but there is no [tools.nope]",
        ),
        (
            f'[agents.a]\n{MOCK}\nhandoffs = ["ghost"]\n',
            "[agents.a] handoffs: names 'ghost', but there is no [agents.ghost]",
        ),
        (f"[agents.a]\n{MOCK}\ncolour = 1\n", "[agents.a] colour: unknown key"),
        ("[agents.a]\ndescription = 'x'\n", "[agents.a] model: is missing"),
        (
            '[agents.a]\nmodel = { provider = "acme", id = "x" }\n',
            "[agents.a] model.provider: must be one of",
        ),
        (
            '[agents.a]\nmodel = { provider = "mock" }\n',
            "[agents.a] model: a mock model takes exactly one of",
        ),
        ('[agents.a]\nmodel = { provider = "mock", replies = [ { sai = "x" } ] }\n', "[agents.a] model:"),
        (
            f'[agents.a]\n{MOCK}\ninstructions = {{ file = "missing.md" }}\n',
            "[agents.a] instructions.file: no such file",
        ),
        (f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\n", "[tools.t]: give exactly one of script"),
        (
            f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\ninline = 'x'\nscript = 'x.star'\n",
            "[tools.t]: give exactly one of script",
        ),
        (f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\ninline = 'x = 1'\n", "defines no run(args)"),
        (
            f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\ninline = 'def run(:'\n",
            "[tools.t] inline: error",
        ),
        (
            f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\nscript = 'gone.star'\n",
            "[tools.t] script: no such file",
        ),
        (
            f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\ninline = 'x'\nmemory_mb = 1\n",
            "memory_mb: must",
        ),
        (
            f"[agents.a]\n{MOCK}\n[tools.t]\ndescription = 'd'\ninline = 'x'\nmax_steps = 0\n",
            "max_steps: must",
        ),
        (
            f"[agents.a]\n{MOCK}\n[eval]\nevaluators = ['vibes']\n",
            "[eval] evaluators: unknown evaluator 'vibes'",
        ),
        (
            f"[agents.a]\n{MOCK}\n[eval]\nevaluators = ['json_schema']\n",
            "[eval.json_schema]: must be a table",
        ),
        (f"[agents.a]\n{MOCK}\n[eval]\nevaluators = ['llm_judge']\n", "[eval.llm_judge]: must be a table"),
        (
            f'[agents.a]\n{MOCK}\nmcp_servers = ["nope"]\n',
            "[agents.a] mcp_servers: names 'nope', but there is no [mcp_servers.nope]",
        ),
        (f"[agents.a]\n{MOCK}\n[mcp_servers.m]\ntool_prefix = 'x'\n", "[mcp_servers.m]: give exactly one"),
        (
            f"[agents.a]\n{MOCK}\n[mcp_servers.m]\nurl = 'ftp://x'\n",
            "[mcp_servers.m] url: must be an http:// or https:// URL",
        ),
        (f"[agents.a]\n{MOCK}\n[permissions]\nmode = 'yolo'\n", "[permissions] mode: must be one of"),
        (
            f"[agents.a]\n{MOCK}\n[permissions]\ndeny = [ {{ tol = 'x' }} ]\n",
            "[permissions] deny[0]: must be one of { tool = ... | bash = ...",
        ),
        (
            f"[agents.a]\n{MOCK}\noutput = {{ schema = {{ type = 'string' }} }}\n",
            "[agents.a] output.schema: must be a JSON Schema object schema",
        ),
        (
            f"[agents.a]\n{MOCK}\n[workflows.w]\nkind = 'swarm'\nsteps = ['a']\n",
            "[workflows.w] kind: must be one of sequential, parallel, loop",
        ),
        (
            f"[agents.a]\n{MOCK}\n[workflows.w]\nkind = 'loop'\nsteps = ['b']\n",
            "[workflows.w] steps: names 'b', but there is no such agent or workflow",
        ),
        (
            f"[agents.a]\n{MOCK}\n[workflows.w]\nkind = 'loop'\nsteps = ['v']\n"
            "[workflows.v]\nkind = 'sequential'\nsteps = ['w']\n",
            "a workflow cannot contain itself: v -> w -> v",
        ),
        (
            f"[agents.a]\n{MOCK}\n[workflows.a]\nkind = 'loop'\nsteps = ['a']\n",
            "[workflows.a]: [agents.a] has the same name",
        ),
        (
            f"[agents.a]\n{MOCK}\n[workflows.w]\nkind = 'parallel'\nsteps = ['a']\nmax_iterations = 2\n",
            '[workflows.w] max_iterations: is for kind = "loop" only',
        ),
        ("[agents]\n", "[agents]: must hold at least one"),
        ("[agents.a\n", "not valid TOML"),
    ],
)
def test_invalid_sidecars_name_the_file_table_and_key(tmp_path: Path, body: str, expected: str) -> None:
    message = error_of(tmp_path, body)
    assert expected in message
    assert str(tmp_path / "agents.toml") in message


def test_a_missing_api_key_fails_fast_with_the_variable_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = write(
        tmp_path,
        """
        [agents.live]
        model = { provider = "openai", id = "gpt-5-mini" }
        [agents.claude]
        model = { provider = "anthropic", id = "claude-sonnet-4-5" }
        [agents.gem]
        model = { provider = "gemini", id = "gemini-2.5-flash" }
        [agents.front]
        model = { provider = "mock", replies = [] }
        handoffs = ["live"]
        """,
    )
    sidecar = load_sidecar(path)  # loading needs no key; building the agent does
    for agent, variable in [
        ("live", "OPENAI_API_KEY"),
        ("claude", "ANTHROPIC_API_KEY"),
        ("gem", "GEMINI_API_KEY"),
    ]:
        with pytest.raises(SidecarError, match=f"\\[agents.{agent}\\] model: .*set {variable}"):
            sidecar.build(agent)
    with pytest.raises(SidecarError, match="OPENAI_API_KEY"):  # a handoff target's key too
        sidecar.build("front")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert sidecar.build("live").model.model_id == "gpt-5-mini"


def test_eval_section_with_json_schema_and_judge(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text('{"type": "object", "required": ["total"]}')
    path = write(
        tmp_path,
        f"""
        [agents.a]
        {MOCK}
        [eval]
        evaluators = ["json_schema", "llm_judge"]
        json_schema = {{ schema = "answer.json" }}
        llm_judge = {{ model = {{ provider = "mock", replies = [] }}, rubric = "Polite.", threshold = 0.7 }}
        """,
    )
    sidecar = load_sidecar(path)
    assert sidecar.eval.json_schema == {"type": "object", "required": ["total"]}
    assert sidecar.eval.judge_rubric == "Polite." and sidecar.eval.judge_threshold == 0.7
    schema, judge = sidecar.eval.build()
    assert isinstance(schema, JsonSchemaEvaluator) and judge.name


def test_an_unknown_agent_lists_the_known_ones(tmp_path: Path) -> None:
    sidecar = load_sidecar(write(tmp_path, f"[agents.zeta]\n{MOCK}\n[agents.alpha]\n{MOCK}\n"))
    with pytest.raises(SidecarError, match="no agent 'beta' \\(agents: alpha, zeta\\)"):
        sidecar.build("beta")


def test_a_mock_that_runs_out_of_replies_fails_the_run(tmp_path: Path) -> None:
    sidecar = load_sidecar(write(tmp_path, '[agents.a]\nmodel = { provider = "mock", replies = [] }\n'))
    with pytest.raises(RunError):
        trio.run(collect, sidecar.build("a").run(None, "hi"))
