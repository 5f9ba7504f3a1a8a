"""Multi-agent runs: handoff targets, workflow children and agents run by
tools nest under their parent's spans."""

from __future__ import annotations

from typing import Any

import pytest
from otel_support import Pipeline, agent, attributes, label, named, one, run, shape

from helikon import AgentAsTool, Handoff, ParallelAgent, RunContext, SequentialAgent, collect, tool
from helikon.context import TracerHandle
from helikon.errors import ModelError, RunError
from helikon.events import RunStarted
from helikon.model import Usage
from helikon.observability import Telemetry
from helikon.testing import call_tools, say


@tool
async def market_data(symbol: str) -> str:
    """Look up a market price.

    Args:
        symbol: the ticker.
    """
    return f"{symbol}: 101.5"


def triage_with_specialist() -> Any:
    specialist = agent(
        "investing",
        call_tools(("market_data", {"symbol": "VTI"}), usage=Usage(7, 3)),
        say("Start with a broad index fund.", usage=Usage(9, 5)),
        tools=[market_data],
    )
    return agent(
        "triage",
        call_tools(("transfer_to_investing", {}), usage=Usage(4, 1)),
        handoffs=[Handoff.to(specialist)],
    )


def test_a_handoff_target_runs_under_the_turn_that_handed_off(otel: Pipeline) -> None:
    triage = triage_with_specialist()

    result = run(lambda: collect(triage.run(None, "How should I invest?", interpreter=otel.observer())))

    spans = otel.finished()
    assert shape(spans) == (
        (
            "invoke_agent triage",
            (
                (
                    "agent.turn",
                    (
                        ("chat triage-model", ()),
                        (
                            "invoke_agent investing",
                            (
                                (
                                    "agent.turn",
                                    (("chat investing-model", ()), ("execute_tool market_data", ())),
                                ),
                                ("agent.turn", (("chat investing-model", ()),)),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    (run_id,) = [e.run_id for e in result.events if isinstance(e, RunStarted)]
    child = one(spans, "invoke_agent investing")
    assert attributes(child) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "investing",
        "gen_ai.agent.description": "The investing agent.",
        "gen_ai.provider.name": "mock",
        "gen_ai.request.model": "investing-model",
        "helikon.run.id": f"{run_id}/investing",
        "gen_ai.usage.input_tokens": 16,
        "gen_ai.usage.output_tokens": 8,
    }
    root = one(spans, "invoke_agent triage")
    assert (
        attributes(root)["gen_ai.usage.input_tokens"],
        attributes(root)["gen_ai.usage.output_tokens"],
    ) == (20, 9)
    # The handoff's transfer call runs no tool: no execute_tool span for it.
    assert not named(spans, "execute_tool transfer_to_investing")
    market = one(spans, "execute_tool market_data")
    assert str(attributes(market)["gen_ai.tool.call.id"]).endswith("/investing_1_0")
    assert child.start_time <= market.start_time <= market.end_time <= child.end_time <= root.end_time  # type: ignore[operator]
    assert all(s.status.status_code.name == "UNSET" for s in spans)


def test_a_failed_handoff_target_fails_its_span_and_its_parent(otel: Pipeline) -> None:
    broken = agent("investing", [ModelError.unavailable("down for maintenance")])
    triage = agent("triage", call_tools(("transfer_to_investing", {})), handoffs=[Handoff.to(broken)])

    with pytest.raises(RunError):
        run(lambda: collect(triage.run(None, "Invest?", interpreter=otel.observer())))

    spans = otel.finished()
    child = one(spans, "invoke_agent investing")
    assert (child.status.status_code.name, attributes(child)["error.type"]) == ("ERROR", "model_failed")
    assert "down for maintenance" in (child.status.description or "")
    root = one(spans, "invoke_agent triage")
    assert root.status.status_code.name == "ERROR"


def branch(name: str, *scripts: Any, **kw: Any) -> Any:
    return agent(name, *scripts, **kw)


def test_a_parallel_workflow_holds_one_agent_span_per_branch(otel: Pipeline) -> None:
    research = (
        ParallelAgent("research")
        .add(branch("news", say("Markets are calm.", usage=Usage(3, 4))))
        .add(
            branch(
                "prices",
                call_tools(("market_data", {"symbol": "VTI"}), usage=Usage(2, 1)),
                say("VTI is at 101.5.", usage=Usage(5, 2)),
                tools=[market_data],
            )
        )
    )

    run(lambda: collect(research.run(None, "Brief me.", interpreter=otel.observer())))

    spans = otel.finished()
    assert shape(spans) == (
        (
            "invoke_agent research",
            (
                ("invoke_agent news", (("agent.turn", (("chat news-model", ()),)),)),
                (
                    "invoke_agent prices",
                    (
                        ("agent.turn", (("chat prices-model", ()), ("execute_tool market_data", ()))),
                        ("agent.turn", (("chat prices-model", ()),)),
                    ),
                ),
            ),
        ),
    )
    news, prices = one(spans, "invoke_agent news"), one(spans, "invoke_agent prices")
    assert (
        attributes(news)["gen_ai.usage.input_tokens"],
        attributes(prices)["gen_ai.usage.input_tokens"],
    ) == (3, 7)
    workflow = one(spans, "invoke_agent research")
    assert "gen_ai.provider.name" not in attributes(workflow)  # a workflow calls no model
    assert attributes(workflow)["gen_ai.usage.output_tokens"] == 7
    # Both branches start when the wave starts, whichever order they ran in.
    assert news.start_time == prices.start_time
    durations = {
        (label(p, "gen_ai.operation.name"), label(p, "gen_ai.request.model"))
        for p in otel.metric_points("gen_ai.client.operation.duration")
    }
    assert {("invoke_agent", m) for m in (None, "news-model", "prices-model")} <= durations


def test_a_failing_branch_fails_its_span_and_the_workflow(otel: Pipeline) -> None:
    research = (
        ParallelAgent("research")
        .add(branch("news", say("Markets are calm.")))
        .add(branch("prices", [ModelError.rate_limited("slow down")]))
    )

    with pytest.raises(RunError):
        run(lambda: collect(research.run(None, "Brief me.", interpreter=otel.observer())))

    spans = otel.finished()
    statuses = {s.name: (s.status.status_code.name, attributes(s).get("error.type")) for s in spans}
    assert statuses["invoke_agent news"] == ("UNSET", None)
    assert statuses["invoke_agent prices"] == ("ERROR", "model_failed")
    assert statuses["invoke_agent research"] == ("ERROR", "children_failed")


def test_a_sequence_of_a_parallel_wave_and_an_agent_that_hands_off_nests_every_run(otel: Pipeline) -> None:
    specialist = agent("spec", say("Invest broadly."))
    triage = agent("tri", call_tools(("transfer_to_spec", {})), handoffs=[Handoff.to(specialist)])
    pipeline = (
        SequentialAgent("pipeline")
        .then(ParallelAgent("fan").add(agent("a", say("A"))).add(agent("b", say("B"))))
        .then(triage)
    )

    run(lambda: collect(pipeline.run(None, "go", interpreter=otel.observer())))

    def leaf(name: str) -> Any:
        return (f"invoke_agent {name}", (("agent.turn", ((f"chat {name}-model", ()),)),))

    assert shape(otel.finished()) == (
        (
            "invoke_agent pipeline",
            (
                ("invoke_agent fan", (leaf("a"), leaf("b"))),
                ("invoke_agent tri", (("agent.turn", (("chat tri-model", ()), leaf("spec"))),)),
            ),
        ),
    )


def caller_with_summarizer() -> Any:
    summarizer = agent("summarizer", say("- a\n- b", usage=Usage(6, 2)))
    return agent(
        "writer",
        call_tools(("summarizer", {"input": "A long text."})),
        say("Here is the digest."),
        tools=[AgentAsTool(summarizer)],
    )


AGENT_AS_TOOL_TREE = (
    (
        "invoke_agent writer",
        (
            (
                "agent.turn",
                (
                    ("chat writer-model", ()),
                    (
                        "execute_tool summarizer",
                        (("invoke_agent summarizer", (("agent.turn", (("chat summarizer-model", ()),)),)),),
                    ),
                ),
            ),
            ("agent.turn", (("chat writer-model", ()),)),
        ),
    ),
)


def test_an_agent_run_by_a_tool_runs_under_that_tool_call(otel: Pipeline) -> None:
    writer = caller_with_summarizer()

    run(lambda: collect(writer.run(None, "Digest this.", interpreter=otel.observer())))

    spans = otel.finished()
    assert shape(spans) == AGENT_AS_TOOL_TREE
    sub = one(spans, "chat summarizer-model")
    assert attributes(sub)["gen_ai.usage.input_tokens"] == 6


def test_an_agent_run_by_a_tool_is_observed_through_the_context_too(otel: Pipeline) -> None:
    handle = TracerHandle(Telemetry(otel.tracer_provider, otel.meter_provider), session_id="s-9")
    writer = caller_with_summarizer()

    run(lambda: collect(writer.run(RunContext.ephemeral(None).with_tracer(handle), "Digest this.")))

    spans = otel.finished()
    assert shape(spans) == AGENT_AS_TOOL_TREE
    # The sub-run inherits the handle: its spans carry the same session.
    assert attributes(one(spans, "invoke_agent summarizer"))["session.id"] == "s-9"
