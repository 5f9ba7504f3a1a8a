"""``RemoteA2AAgent`` against an A2A agent built on the a2a-sdk alone, over
real loopback HTTP: as a workflow child, a handoff target and an
``AgentAsTool``; a recorded run replays with the server gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from protocol_support import assistant, free_port, serving
from sdk_server import ShoutingExecutor, shouter_app

from helikon import AgentAsTool, Handoff, LlmAgent, RunContext, SequentialAgent, collect
from helikon.errors import RunError
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, TokenDelta
from helikon.interpreters import RecordingInterpreter, ReplayInterpreter
from helikon.items import text_of
from helikon.protocols.a2a import RemoteA2AAgent
from helikon.testing import MockModel, call_tools, say
from helikon.trace import Trace

pytestmark = pytest.mark.integration


@pytest.fixture
def shouter() -> Iterator[tuple[str, ShoutingExecutor]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    executor = ShoutingExecutor()
    with serving(shouter_app(url, executor), port=port):
        yield url, executor


def events_of(agent: Any, text: str, interpreter: Any = None) -> list[AgentEvent]:
    async def main() -> list[AgentEvent]:
        ctx = RunContext.ephemeral(None)
        return [e async for e in agent.run(ctx, text, interpreter=interpreter)]

    return anyio.run(main)


@pytest.mark.parametrize("streaming", [True, False])
def test_a_remote_agent_runs_alone(shouter: tuple[str, ShoutingExecutor], streaming: bool) -> None:
    url, executor = shouter
    remote = RemoteA2AAgent(url, name="shouter", streaming=streaming)
    events = anyio.run(lambda: _drain(remote.run(None, "hello there")))
    assert isinstance(events[-1], RunCompleted)
    (output,) = [e for e in events if isinstance(e, MessageOutput)]
    assert text_of(output.item.content) == "SHOUT: HELLO THERE"
    if streaming:
        assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "SHOUT: HELLO THERE"
    assert executor.requests == ["hello there"]


async def _drain(stream: Any) -> list[AgentEvent]:
    return [e async for e in stream]


def test_from_card_takes_the_cards_name_and_description(shouter: tuple[str, ShoutingExecutor]) -> None:
    url, _ = shouter
    remote = anyio.run(RemoteA2AAgent.from_card, url)
    assert (remote.name, remote.description) == ("shouter", "Repeats what it is told, in capitals.")


def test_a_failed_remote_task_fails_the_child(shouter: tuple[str, ShoutingExecutor]) -> None:
    url, _ = shouter
    events = anyio.run(lambda: _drain(RemoteA2AAgent(url, name="shouter").run(None, "fail")))
    assert isinstance(events[-1], RunFailed)
    assert "lost its voice" in str(events[-1].error)


def test_an_unreachable_agent_is_a_failed_child() -> None:
    remote = RemoteA2AAgent(f"http://127.0.0.1:{free_port()}", name="nobody", timeout=2)
    events = anyio.run(lambda: _drain(remote.run(None, "hi")))
    assert isinstance(events[-1], RunFailed)


def test_a_workflow_child_is_recorded_and_replays_offline(
    shouter: tuple[str, ShoutingExecutor],
) -> None:
    url, executor = shouter
    flow = SequentialAgent("flow").then(assistant("local")).then(RemoteA2AAgent(url, name="shouter"))
    recorder = RecordingInterpreter()
    recorded = events_of(flow, "hello", recorder)
    assert isinstance(recorded[-1], RunCompleted)
    outputs = [text_of(e.item.content) for e in recorded if isinstance(e, MessageOutput)]
    assert outputs[-1] == "SHOUT: HELLO"
    trace = Trace.from_bytes(recorder.trace.to_bytes())
    calls = len(executor.requests)
    replayed = events_of(flow, "hello", ReplayInterpreter(trace))
    assert replayed == recorded
    assert len(executor.requests) == calls  # the replay asked the remote agent nothing


def test_replay_needs_no_server() -> None:
    """The same, with the server stopped before the replay."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flow = SequentialAgent("flow").then(RemoteA2AAgent(url, name="shouter"))
    recorder = RecordingInterpreter()
    with serving(shouter_app(url, ShoutingExecutor()), port=port):
        recorded = events_of(flow, "offline", recorder)
    assert isinstance(recorded[-1], RunCompleted)
    replayed = events_of(flow, "offline", ReplayInterpreter(Trace.from_bytes(recorder.trace.to_bytes())))
    assert replayed == recorded
    assert [text_of(e.item.content) for e in replayed if isinstance(e, MessageOutput)][-1] == "SHOUT: OFFLINE"


def test_a_handoff_target(shouter: tuple[str, ShoutingExecutor]) -> None:
    url, executor = shouter
    remote = RemoteA2AAgent(url, name="shouter", description="Shouts.")
    front = LlmAgent(
        name="front",
        model=MockModel([call_tools(("transfer_to_shouter", {}))]),
        handoffs=[Handoff.to(remote)],
    )
    result = anyio.run(collect, front.run(RunContext.ephemeral(None), "make it loud"))
    assert result.final_output == "SHOUT: MAKE IT LOUD"
    assert executor.requests == ["make it loud"]


def test_an_agent_as_tool(shouter: tuple[str, ShoutingExecutor]) -> None:
    url, executor = shouter
    tool = AgentAsTool(RemoteA2AAgent(url, name="shouter", description="Shouts."))
    caller = LlmAgent(
        name="caller",
        model=MockModel([call_tools(("shouter", {"input": "quiet please"})), say("done")]),
        tools=[tool],
    )
    result = anyio.run(collect, caller.run(RunContext.ephemeral(None), "go"))
    assert result.final_output == "done"
    assert executor.requests == ["quiet please"]
    outputs = [e.item.content for e in result.events if type(e).__name__ == "ToolOutputItem"]
    assert outputs == ["SHOUT: QUIET PLEASE"]


def test_a_failing_child_fails_the_workflow(shouter: tuple[str, ShoutingExecutor]) -> None:
    url, _ = shouter
    flow = SequentialAgent("flow").then(RemoteA2AAgent(url, name="shouter"))
    with pytest.raises(RunError):
        anyio.run(collect, flow.run(RunContext.ephemeral(None), "fail"))
