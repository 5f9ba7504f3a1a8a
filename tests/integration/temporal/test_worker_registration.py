"""Registration enforces the v0 constraints of durable runs, at once.

Handoffs, hooks, guardrails and workflow agents are refused with a clear
error when the agent is registered, not when a run reaches them; agent-as-
tool is accepted (its nested run is non-durable, inside one tool activity).
The Temporal extra is optional: the core never imports ``temporalio``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from helikon import AgentAsTool, ConfigError, Handoff, LlmAgent, SequentialAgent, tool
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


def test_handoffs_are_refused_at_registration() -> None:
    with pytest.raises(ConfigError, match=r"handoffs \('billing'\).*not supported by the durable"):
        worker().register(agent(handoffs=[Handoff.to(agent("billing"))]))


def test_workflow_agents_are_refused_at_registration() -> None:
    pipeline = SequentialAgent("pipeline", "Two steps.").then(agent("one")).then(agent("two"))
    with pytest.raises(ConfigError, match="only LlmAgent runs under Temporal"):
        worker().register(pipeline)


def test_hooks_and_guardrails_are_refused_at_registration() -> None:
    def hook(ctx: Any, event: Any) -> None:
        return None

    def guardrail(ctx: Any, text: Any) -> None:
        return None

    with pytest.raises(ConfigError, match=r"has hooks: .*cannot be made deterministic"):
        worker().register(agent("h", hooks=[hook]))
    with pytest.raises(ConfigError, match="has input_guardrails"):
        worker().register(agent("i", input_guardrails=[guardrail]))
    with pytest.raises(ConfigError, match="has output_guardrails"):
        worker().register(agent("o", output_guardrails=[guardrail]))


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
