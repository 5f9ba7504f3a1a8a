"""Every event says which path emitted it (issue 27, Deliver 1).

``event.path`` is the path of the tree member that emitted it, as
``AtPath`` and ``ApprovalRequest`` name members: ``()`` for the run's own
agent. Old traces (no ``path``) still load; a trace and the server's frames
write it only when it is not empty.
"""

from __future__ import annotations

import trio

from helikon import LlmAgent, ParallelAgent, RunContext, SequentialAgent, collect
from helikon.codec import from_json, to_json
from helikon.events import AgentEvent, MessageOutput, RunStarted, TokenDelta, TurnStarted, emitted_at
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.items import AssistantMessage, TextPart
from helikon.server._runs import event_frame
from helikon.testing import MockModel, call_tools, say
from helikon.workflows import Handoff


def _events(agent: object) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        result = await collect(agent.run(RunContext.ephemeral(None), "go"))  # type: ignore[attr-defined]
        return list(result.events)

    return trio.run(go)


def test_a_handoff_targets_events_carry_its_path_and_the_roots_none() -> None:
    target = LlmAgent(name="billing", model=MockModel([say("refunded")]))
    triage = LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_billing", {}))]),
        handoffs=[Handoff.to(target)],
    )
    events = _events(triage)
    assert events[0].path == () and isinstance(events[0], RunStarted)
    said = [e for e in events if isinstance(e, MessageOutput)]
    assert said[-1].item.agent == "billing" and said[-1].path == ("billing",)
    deltas = {e.path for e in events if isinstance(e, TokenDelta)}
    assert deltas == {("billing",)}  # the target's live deltas, marked by the interpreter
    assert events[-1].path == ()


def test_nested_workflow_children_carry_the_whole_path() -> None:
    inner = ParallelAgent("fan", "").add(LlmAgent(name="a", model=MockModel([say("one")])))
    flow = SequentialAgent("flow", children=(("first", inner),))
    turns = {e.path for e in _events(flow) if isinstance(e, TurnStarted)}
    assert turns == {("first", "a")}


def test_a_path_is_written_only_when_not_empty_and_old_events_load() -> None:
    assert to_json(TokenDelta("x"), AgentEvent) == b'{"text":"x","type":"TokenDelta"}'
    marked = emitted_at(("desk", "writer"), TokenDelta("x"))
    assert to_json(marked, AgentEvent) == b'{"path":["desk","writer"],"text":"x","type":"TokenDelta"}'
    assert from_json(to_json(marked, AgentEvent), AgentEvent) == marked
    assert from_json(b'{"text":"x","type":"TokenDelta"}', AgentEvent) == TokenDelta("x")


def test_the_servers_frames_and_the_trace_show_the_path() -> None:
    message = MessageOutput(AssistantMessage((TextPart("hi"),), agent="a"), path=("fan", "a"))
    assert event_frame(message)["path"] == ["fan", "a"]
    assert "path" not in event_frame(TokenDelta("x"))

    flow = ParallelAgent("fan", "").add(LlmAgent(name="a", model=MockModel([say("one")])))
    recorder = RecordingInterpreter(LiveInterpreter("r"))

    async def go() -> None:
        await collect(flow.run(None, "go", interpreter=recorder))

    trio.run(go)
    assert b'"path":["a"]' in recorder.trace.to_bytes()
