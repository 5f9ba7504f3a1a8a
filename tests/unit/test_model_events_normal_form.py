"""Issue 26: values a model streams enter the core in normal form, or fail
the model call by name — the same under every interpreter.

A text chunk with a lone surrogate (no UTF-8 form) used to enter the
conversation and the event stream as is, and to break far from its cause:
encoding the next request, an SSE frame, a trace. Now the machine folds such
an answer as the call's failure (``ModelFailed(OtherModelFailure)`` naming
the event and field), the bad chunk streams no delta, and the live
interpreter (trio and asyncio), the scripted one and the step API agree.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from helikon import LlmAgent, RunContext, RunFailed, tool
from helikon.effects import Terminate
from helikon.errors import ModelFailed, OtherModelFailure
from helikon.events import AgentEvent, RunCompleted, TokenDelta
from helikon.interpreters import TestInterpreter
from helikon.model import Finish, FinishReason, TextChunk, ToolCallChunk
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, say

BACKENDS = ["trio", "asyncio"]
LONE = "\ud800"


@tool
def ping(text: str) -> str:
    """Echo."""
    return text


CASES: dict[str, list[Any]] = {
    "text": [TextChunk("fine "), TextChunk(f"bad {LONE}"), Finish(FinishReason.STOP)],
    "arguments": [
        ToolCallChunk(0, "c1", "ping", '{"text": "' + LONE + '"}'),
        Finish(FinishReason.TOOL_CALLS),
    ],
    "tool name": [ToolCallChunk(0, "c1", "pi" + LONE, "{}"), Finish(FinishReason.TOOL_CALLS)],
}
WHERE = {"text": "$.events[1].text", "arguments": "$.events[0].arguments", "tool name": "$.events[0].name"}


def agent(script: list[Any]) -> LlmAgent[Any]:
    return LlmAgent(name="m", model=MockModel([script, *[say("done")] * 2]), tools=[ping])


def live(script: list[Any], backend: str) -> list[AgentEvent]:
    async def main() -> list[AgentEvent]:
        return [e async for e in agent(script).run(RunContext.ephemeral(None), "go", run_id="nf")]

    return anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_model_answer_not_in_normal_form_fails_the_call_by_name(case: str, backend: str) -> None:
    events = live(CASES[case], backend)  # the bad value entered the run before

    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, ModelFailed)
    failure = last.error.failure
    assert isinstance(failure, OtherModelFailure) and WHERE[case] in failure.message
    assert "lone surrogate" in failure.message
    assert not [e for e in events if isinstance(e, TokenDelta) and LONE in e.text]
    msgspec.json.encode([msgspec.to_builtins(e) for e in events])  # every event is encodable

    scripted = TestInterpreter([CASES[case]], tools={"ping": lambda args: "x"}).run(
        prepare(agent(CASES[case])).spec, "go", "nf"
    )
    assert list(scripted.events) == events

    async def stepped() -> list[AgentEvent]:
        a, ctx = agent(CASES[case]), RunContext.ephemeral(None)
        out = start(a, "go", run_id="nf", ctx=ctx)
        got = list(out.events)
        while type(out.effect) is not Terminate:
            streamed, result = await perform(a, out.effect, ctx, run_id="nf")
            got.extend(streamed)
            out = advance(a, out.state, result, ctx=ctx)
            got.extend(out.events)
        return got

    assert anyio.run(stepped, backend=backend) == events


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arguments", ['{"text": "\\ud800"}', '{"text": 1e400}', '{"text": NaN}'])
def test_arguments_with_no_canonical_json_are_invalid_arguments_alike(arguments: str, backend: str) -> None:
    # JSON text with a lone-surrogate escape, a number out of range or NaN
    # has no normal form once parsed: the loop treats it as invalid
    # arguments (the model is told and may correct itself), never a crash,
    # the same under every interpreter.
    script = [ToolCallChunk(0, "c1", "ping", arguments), Finish(FinishReason.TOOL_CALLS)]
    events = live(script, backend)

    assert isinstance(events[-1], RunCompleted)
    msgspec.json.encode([msgspec.to_builtins(e) for e in events])
    scripted = TestInterpreter([script, say("done")], tools={"ping": lambda args: "x"}).run(
        prepare(agent(script)).spec, "go", "nf"
    )
    assert list(scripted.events) == events
