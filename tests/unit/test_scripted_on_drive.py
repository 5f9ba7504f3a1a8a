"""Issue 26: the scripted interpreter runs through ``drive`` and the shared
performer, so it runs what the live one runs and gives the same events.

Before, :class:`TestInterpreter` kept a loop of its own that could not
perform a child that is not a helikon machine (``RunAgents`` was a
``StepError``), so "same events under the test interpreter" could not even
be checked for such agents.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from helikon import LlmAgent, RunContext, SequentialAgent
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, RunStarted
from helikon.governance import OutputPolicy, Pass, Tripwire
from helikon.interpreters import TestInterpreter
from helikon.items import AgentInput, AssistantMessage, TextPart, text_of
from helikon.model import Usage
from helikon.steps import prepare
from helikon.testing import MockModel, say

BACKENDS = ["trio", "asyncio"]


class Echo:
    """A user-defined agent: no model, no machine, an async generator."""

    name = "echo"
    description = "Repeats what it was told."

    async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
        last = input.items[-1]
        text = text_of(last.content) if hasattr(last, "content") else ""  # type: ignore[arg-type]
        yield RunStarted(self.name, "own-run")  # type: ignore[arg-type]
        yield MessageOutput(AssistantMessage((TextPart(f"echo: {text}"),), self.name))
        yield RunCompleted(Usage(2, 1))


def strict(ctx: Any, output: Any) -> object:
    return Tripwire(OutputPolicy(), "no") if "forbidden" in str(output) else Pass()


def pipeline(answer: str) -> Any:
    writer: LlmAgent[Any] = LlmAgent(
        name="writer", model=MockModel([say(answer)]), output_guardrails=[strict]
    )
    return SequentialAgent("p", "").then(writer).then(Echo())


def live(answer: str, backend: str) -> list[AgentEvent]:
    async def main() -> list[AgentEvent]:
        return [e async for e in pipeline(answer).run(RunContext.ephemeral(None), "go", run_id="p-run")]

    return anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("answer", ["all fine", "forbidden words"])
def test_the_scripted_interpreter_runs_opaque_children_and_guardrails(answer: str, backend: str) -> None:
    events = live(answer, backend)
    tree = prepare(pipeline(answer), run_id="p-run").machine.spec
    writer = TestInterpreter([say(answer)], output_guardrails=[strict])

    scripted = TestInterpreter(agents={"writer": writer, "echo": Echo()}).run(tree, "go", "p-run")

    assert list(scripted.events) == events
    if answer == "all fine":
        assert isinstance(events[-1], RunCompleted)
        assert any(isinstance(e, MessageOutput) and "echo: " in str(e) for e in events)
    else:
        assert isinstance(events[-1], RunFailed)
