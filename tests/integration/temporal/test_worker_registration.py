"""What registration accepts, and refuses at once.

Every helikon agent registers: an LlmAgent with hooks, guardrails and
handoffs, the workflow agents and swarms (they run durably as agent trees).
An agent of one's own (``run`` but no ``make_env``) is refused at the root:
it is not a machine the workflow can drive. Per-tool attempt limits name a
tool of any agent the run can reach. The Temporal extra is optional: the
core never imports ``temporalio``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from helikon import (
    AgentAsTool,
    ConfigError,
    Handoff,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
    SwarmAgent,
    tool,
)
from helikon.testing import MockModel, say

pytestmark = pytest.mark.integration


def agent(name: str = "a", **kw: Any) -> LlmAgent[Any]:
    return LlmAgent(name=name, model=MockModel([say("hi")]), **kw)


@tool
async def ping() -> str:
    """Answer pong."""
    return "pong"


def worker() -> Any:
    pytest.importorskip("temporalio", reason="the temporal extra is not installed")
    from helikon.temporal import TemporalAgentWorker

    # Registration needs no server: the client is only used when the worker starts.
    return TemporalAgentWorker(object(), task_queue="q")  # type: ignore[arg-type]


def test_handoffs_hooks_guardrails_and_workflow_agents_register() -> None:
    def hook(ctx: Any, event: Any) -> None:
        return None

    def guardrail(ctx: Any, text: Any) -> None:
        return None

    billing = agent("billing", tools=[ping])
    pipeline = SequentialAgent("pipeline", "Two steps.").then(agent("one")).then(agent("two"))
    fan = ParallelAgent("fan", "Both.").add(agent("left")).add(agent("right"))
    swarm = SwarmAgent.builder().name("swarm").member(agent("x")).member(agent("y")).build()
    w = worker()
    w.register(agent("triage", handoffs=[Handoff.to(billing)], hooks=[hook], input_guardrails=[guardrail]))
    w.register(agent("o", output_guardrails=[guardrail]))
    w.register(pipeline).register(fan).register(swarm)
    w.register(LoopAgent("loop", "Again.", 2, children=(("a", agent("a")),)))

    assert w.agents == ("fan", "loop", "o", "pipeline", "swarm", "triage")


def test_an_agent_of_ones_own_is_refused_at_the_root() -> None:
    class Mine:
        name = "mine"
        description = ""

        def run(self, ctx: Any, input: Any) -> Any:
            raise NotImplementedError

    with pytest.raises(ConfigError, match="cannot run durably: register a helikon agent"):
        worker().register(Mine())
    # As a workflow child it is fine: it runs whole inside one run_agent activity.
    assert worker().register(SequentialAgent("p", "").then(Mine())).agents == ("p",)


def test_attempt_overrides_name_a_tool_of_any_agent_of_the_tree() -> None:
    billing = agent("billing", tools=[ping])
    w = worker().register(agent("triage", handoffs=[Handoff.to(billing)]), tool_max_attempts={"ping": 1})
    assert w.agents == ("triage",)
    with pytest.raises(ConfigError, match="has no tool 'pong'"):
        w.register(SequentialAgent("p", "").then(billing), tool_max_attempts={"pong": 1})


def test_agent_as_tool_is_accepted() -> None:
    nested = AgentAsTool(agent("helper"))
    w = worker().register(agent("boss", tools=[nested, ping]))
    assert w.agents == ("boss",)


def test_names_and_attempt_overrides_are_checked() -> None:
    w = worker().register(agent("a", tools=[ping]), tool_max_attempts={"ping": 1})
    with pytest.raises(ConfigError, match="already registered"):
        w.register(agent("a"))
    with pytest.raises(ConfigError, match="has no tool 'pong'"):
        w.register(agent("b", tools=[ping]), tool_max_attempts={"pong": 1})
    with pytest.raises(ConfigError, match=">= 1"):
        w.register(agent("c", tools=[ping]), tool_max_attempts={"ping": 0})


def test_a_worker_with_no_agents_does_not_start() -> None:
    with pytest.raises(ConfigError, match="at least one agent"):
        worker().build()


_WITHOUT_TEMPORALIO = """
import sys

class NoTemporal:
    def find_spec(self, name, path=None, target=None):
        if name == "temporalio" or name.startswith("temporalio."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoTemporal())
import helikon, helikon.interpreters, helikon.agents, helikon.governance, helikon.testing
from helikon.testing import MockModel, say
print(helikon.run_sync(helikon.LlmAgent(name="a", model=MockModel([say("ok")])), "hi").final_output)
assert not [m for m in sys.modules if m.startswith("temporalio")]
try:
    import helikon.temporal
except ImportError as exc:
    print("ImportError:", exc)
"""


def test_the_core_installs_and_runs_without_temporalio() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TEMPORALIO], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ok"
    assert lines[1].startswith("ImportError:") and "paigasus-helikon[temporal]" in lines[1]
