"""Replaying a recorded run under the observer gives the recorded run's span
tree: the same spans, nested the same way, with the same attributes and
statuses (the timings are the replay's own: a trace records no clock).

Every sub-run of an agent tree is replayed too — a handoff target, a
workflow's children, an agent used as a tool (``AgentAsTool``): their
effects are the tree's, answered wave by wave from the trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from otel_support import Pipeline, agent, flat, run, shape
from test_observability_children import caller_with_summarizer, market_data, triage_with_specialist
from test_observability_runs import budget_agent, flaky_lookup

from helikon import Handoff, ParallelAgent, SequentialAgent, collect
from helikon.errors import ModelError, RunError
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.model import Usage
from helikon.observability._semconv import OPERATION_DURATION, REPLAY, TOKEN_USAGE, TOOL_CALLS
from helikon.testing import call_tools, say
from helikon.trace import Trace


def parallel_research() -> Any:
    return (
        ParallelAgent("research")
        .add(agent("news", say("Markets are calm.", usage=Usage(3, 4))))
        .add(
            agent(
                "prices",
                call_tools(("market_data", {"symbol": "VTI"}), usage=Usage(2, 1)),
                say("VTI is at 101.5.", usage=Usage(5, 2)),
                tools=[market_data],
            )
        )
    )


def failing_run() -> Any:
    return agent(
        "budget",
        call_tools(("flaky_lookup", {"category": "food"})),
        [ModelError.refused("no")],
        tools=[flaky_lookup],
    )


def failing_branch() -> Any:
    return (
        ParallelAgent("research")
        .add(agent("news", say("Markets are calm.")))
        .add(agent("prices", [ModelError.rate_limited("slow down")]))
    )


def nested_pipeline() -> Any:
    specialist = agent("spec", say("Invest broadly.", usage=Usage(2, 2)))
    triage = agent(
        "tri", call_tools(("transfer_to_spec", {}), usage=Usage(1, 1)), handoffs=[Handoff.to(specialist)]
    )
    fan = ParallelAgent("fan").add(agent("a", say("A", usage=Usage(3, 1)))).add(agent("b", say("B")))
    return SequentialAgent("pipeline").then(fan).then(triage)


SCENARIOS: dict[str, Callable[[], Any]] = {
    "tool run": budget_agent,
    "handoff": triage_with_specialist,
    "parallel workflow": parallel_research,
    "failed run": failing_run,
    "failed branch": failing_branch,
    "nested pipeline": nested_pipeline,
    "agent as tool": caller_with_summarizer,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_replay_under_the_observer_gives_the_recorded_runs_span_tree(scenario: str) -> None:
    live, replay = Pipeline.new(), Pipeline.new()
    subject = SCENARIOS[scenario]()
    recorder = RecordingInterpreter(LiveInterpreter(run_id="golden-1"))

    with contextlib.suppress(RunError):
        run(lambda: collect(subject.run(None, "go", interpreter=live.observer(recorder))))
    # The trace survives its text form: what is replayed is what a file holds.
    trace = Trace.from_bytes(recorder.trace.to_bytes())
    with contextlib.suppress(RunError):
        run(lambda: collect(subject.run(None, "go", interpreter=replay.observer(ReplayInterpreter(trace)))))

    recorded, replayed = live.finished(), replay.finished()
    assert len(recorded) >= 3
    assert shape(replayed) == shape(recorded)
    # Every span of the replay says so (issue 36: a replay is no new work).
    assert all((s.attributes or {}).get(REPLAY) is True for s in replayed)
    assert not any(REPLAY in (s.attributes or {}) for s in recorded)
    assert unmarked(flat(replayed)) == flat(recorded)
    # ... and a replay records no metrics: no tokens spent, no tool called.
    assert live.metric_points(TOKEN_USAGE) and not replay.metric_points(TOKEN_USAGE)
    assert not replay.metric_points(OPERATION_DURATION) and not replay.metric_points(TOOL_CALLS)


def unmarked(spans: list[tuple[str, dict[str, object], str]]) -> list[tuple[str, dict[str, object], str]]:
    return [(path, {k: v for k, v in kept.items() if k != REPLAY}, status) for path, kept, status in spans]


def test_a_loose_replay_is_marked_and_counts_nothing_either() -> None:
    live, replay = Pipeline.new(), Pipeline.new()
    recorder = RecordingInterpreter(LiveInterpreter(run_id="loose-1"))
    run(lambda: collect(budget_agent().run(None, "go", interpreter=live.observer(recorder))))
    trace = Trace.from_bytes(recorder.trace.to_bytes())

    loose = ReplayInterpreter(trace, strict=False)
    run(lambda: collect(budget_agent().run(None, "go", interpreter=replay.observer(loose))))

    assert replay.finished() and all((s.attributes or {}).get(REPLAY) is True for s in replay.finished())
    assert live.metric_points(TOOL_CALLS) and not replay.metric_points(TOOL_CALLS)
    assert not replay.metric_points(TOKEN_USAGE)
