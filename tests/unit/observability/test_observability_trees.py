"""An agent tree seen by the observer: sub-runs read off the waves of
addressed effects (``PerformAll`` of ``AtPath``), their turns, their
governance events, their failures and where their tools run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry import trace
from otel_support import Pipeline, agent, attributes, drain, label, named, one, run, shape

from helikon import (
    AgentAsTool,
    Handoff,
    HookRegistry,
    ParallelAgent,
    RunContext,
    SequentialAgent,
    collect,
    tool,
)
from helikon.errors import ModelError, RunError, RunSuspended
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunStarted
from helikon.governance import Allow, AskUser, Deny
from helikon.items import AgentInput, AssistantMessage, TextPart
from helikon.model import Usage
from helikon.testing import call_tools, say
from helikon.workflows import GraphAgent, LoopAgent

tool_spans: list[int] = []


@tool
async def market_data(symbol: str) -> str:
    """Look up a market price.

    Args:
        symbol: the ticker.
    """
    tool_spans.append(trace.get_current_span().get_span_context().span_id)
    return f"{symbol}: 101.5"


@tool
async def drop_table(name: str) -> str:
    """Drop a table.

    Args:
        name: the table.
    """
    return "dropped"


def statuses(otel: Pipeline) -> dict[str, tuple[str, object]]:
    return {s.name: (s.status.status_code.name, attributes(s).get("error.type")) for s in otel.finished()}


def test_a_tool_of_a_sub_run_runs_under_its_own_execute_tool_span(otel: Pipeline) -> None:
    tool_spans.clear()
    research = (
        ParallelAgent("research")
        .add(agent("news", say("Calm.")))
        .add(agent("prices", call_tools(("market_data", {"symbol": "VTI"})), say("Up."), tools=[market_data]))
    )

    run(lambda: collect(research.run(None, "Brief me.", interpreter=otel.observer())))

    call = one(otel.finished(), "execute_tool market_data")
    assert tool_spans == [call.context.span_id]  # type: ignore[union-attr]
    # A wave of several effects is answered at once: its model calls share its timing.
    news, prices = (
        named(otel.finished(), "chat news-model")[0],
        named(otel.finished(), "chat prices-model")[0],
    )
    assert (news.start_time, news.end_time) == (prices.start_time, prices.end_time)


def test_an_agent_used_as_a_tool_that_fails_fails_its_tool_call_and_its_own_run(otel: Pipeline) -> None:
    inner = agent("inner", [ModelError.unavailable("inner is down")])
    writer = agent(
        "writer",
        call_tools(("inner", {"input": "Summarize."}), ("market_data", {"symbol": "VTI"})),
        say("I could not summarize."),
        tools=[AgentAsTool(inner), market_data],
    )

    result = run(lambda: collect(writer.run(None, "Go.", interpreter=otel.observer(capture_content=True))))

    assert result.final_output == "I could not summarize."
    found = statuses(otel)
    assert found["execute_tool inner"] == ("ERROR", "tool_crashed")
    assert found["invoke_agent inner"] == ("ERROR", "model_failed")
    assert found["invoke_agent writer"] == ("UNSET", None)
    assert found["execute_tool market_data"] == ("UNSET", None)
    call = one(otel.finished(), "execute_tool inner")
    assert "inner is down" in (call.status.description or "")
    assert attributes(call)["gen_ai.tool.call.arguments"] == '{"input":"Summarize."}'
    assert one(otel.finished(), "invoke_agent inner").parent.span_id == call.context.span_id  # type: ignore[union-attr]
    counted = {
        (label(p, "gen_ai.tool.name"), label(p, "error.type"))
        for p in otel.metric_points("helikon.tool.calls")
    }
    assert counted == {("inner", "tool_crashed"), ("market_data", None)}


def test_a_governance_event_of_a_parallel_branch_lands_on_that_branchs_turn(otel: Pipeline) -> None:
    fan = (
        ParallelAgent("fan")
        .add(
            agent("cleaner", call_tools(("drop_table", {"name": "t"})), say("Could not."), tools=[drop_table])
        )
        .add(agent("pricer", call_tools(("market_data", {"symbol": "V"})), say("Up."), tools=[market_data]))
    )
    ctx = RunContext.ephemeral(None).with_permission_policy(
        lambda ctx, tool, args: Deny("no drops") if tool == "drop_table" else Allow()
    )

    run(lambda: collect(fan.run(ctx, "Go.", interpreter=otel.observer())))

    spans = otel.finished()
    denied = [(s.parent, e.name) for s in named(spans, "agent.turn") for e in s.events]
    cleaner = one(spans, "invoke_agent cleaner")
    assert [(p.span_id, n) for p, n in denied] == [  # type: ignore[union-attr]
        (cleaner.context.span_id, "helikon.permission_denied")  # type: ignore[union-attr]
    ]
    assert not named(spans, "execute_tool drop_table")


def test_a_loop_workflow_runs_a_child_again_as_a_new_span_each_pass(otel: Pipeline) -> None:
    loop = LoopAgent("refine", max_iterations=2).then(agent("draft", say("v1"), say("v2")))

    with pytest.raises(RunError):
        run(lambda: collect(loop.run(None, "Go.", interpreter=otel.observer())))

    drafts = named(otel.finished(), "invoke_agent draft")
    assert len(drafts) == 2 and drafts[0].end_time <= drafts[1].start_time  # type: ignore[operator]
    assert {attributes(d)["helikon.run.id"] for d in drafts} == {f"{attributes(drafts[0])['helikon.run.id']}"}
    assert [d.status.status_code.name for d in drafts] == ["UNSET", "UNSET"]
    assert statuses(otel)["invoke_agent refine"] == ("ERROR", "max_iterations_exceeded")


def test_a_handoff_that_fails_inside_a_graph_fails_its_chain_while_the_graph_goes_on(otel: Pipeline) -> None:
    target = agent("target", [ModelError.refused("not today")])
    source = agent("source", call_tools(("transfer_to_target", {})), handoffs=[Handoff.to(target)])
    graph = (
        GraphAgent.builder()
        .name("plan")
        .node("source", source)
        .node("ok", agent("ok", say("Fine.")))
        .node("after", agent("after", say("After.")))
        .edge("ok", "after")
        .build()
    )

    with pytest.raises(RunError):
        run(lambda: collect(graph.run(None, "Go.", interpreter=otel.observer())))

    found = statuses(otel)
    assert found["invoke_agent target"] == ("ERROR", "model_failed")
    assert found["invoke_agent source"] == ("ERROR", "model_failed")
    assert found["invoke_agent ok"] == found["invoke_agent after"] == ("UNSET", None)
    assert found["invoke_agent plan"] == ("ERROR", "children_failed")
    spans = otel.finished()
    assert shape(spans)[0][0] == "invoke_agent plan" and len(named(spans, "invoke_agent plan")) == 1


def test_a_run_with_hooks_is_a_tree_of_one_and_still_one_span_tree(otel: Pipeline) -> None:
    heard: list[str] = []
    hooks = HookRegistry().with_hook(lambda ctx, event: heard.append(type(event).__name__))
    specialist = agent("specialist", say("Done.", usage=Usage(2, 2)))
    triage = agent("triage", call_tools(("transfer_to_specialist", {})), handoffs=[Handoff.to(specialist)])

    run(
        lambda: collect(
            triage.run(RunContext.ephemeral(None).with_hooks(hooks), "Go.", interpreter=otel.observer())
        )
    )

    assert {"OnHandoff", "OnRunComplete"} <= set(heard)
    assert shape(otel.finished()) == (
        (
            "invoke_agent triage",
            (
                (
                    "agent.turn",
                    (
                        ("chat triage-model", ()),
                        ("invoke_agent specialist", (("agent.turn", (("chat specialist-model", ()),)),)),
                    ),
                ),
            ),
        ),
    )


def test_a_handoff_target_waiting_for_approval_is_suspended_with_its_caller(otel: Pipeline) -> None:
    specialist = agent("specialist", call_tools(("market_data", {"symbol": "V"})), tools=[market_data])
    triage = agent("triage", call_tools(("transfer_to_specialist", {})), handoffs=[Handoff.to(specialist)])
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_policy(lambda ctx, tool, args: AskUser("May I?"))
        .with_suspend_on_approval()
    )

    with pytest.raises(RunSuspended):
        drain(triage.run(ctx, "Go.", interpreter=otel.observer()))

    spans = otel.finished()
    for name in ("invoke_agent triage", "invoke_agent specialist"):
        assert attributes(one(spans, name))["helikon.run.suspended"] is True
        assert one(spans, name).status.status_code.name == "UNSET"
    # The question is the specialist's: it is an event of the specialist's turn.
    (asking,) = [s for s in named(spans, "agent.turn") if s.events]
    assert [e.name for e in asking.events] == ["helikon.approval_requested"]
    specialist_run = one(spans, "invoke_agent specialist")
    assert asking.parent.span_id == specialist_run.context.span_id  # type: ignore[union-attr]


class Echo:
    """An agent that is not a helikon machine: run whole, as one effect."""

    name = "echo"
    description = "Repeats what it was told."

    async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
        yield RunStarted(self.name, "own-run")  # type: ignore[arg-type]
        yield MessageOutput(AssistantMessage((TextPart("echo"),), self.name))
        yield RunCompleted(Usage(2, 1))


def test_an_agent_that_is_not_a_helikon_machine_is_one_span_with_its_result(otel: Pipeline) -> None:
    pipeline = SequentialAgent("pipe").then(Echo()).then(agent("after", say("Done.")))

    result = run(lambda: collect(pipeline.run(None, "Go.", interpreter=otel.observer())))

    assert result.final_output == "Done."
    spans = otel.finished()
    assert shape(spans) == (
        (
            "invoke_agent pipe",
            (
                ("invoke_agent echo", ()),
                ("invoke_agent after", (("agent.turn", (("chat after-model", ()),)),)),
            ),
        ),
    )
    echo = one(spans, "invoke_agent echo")
    assert (
        attributes(echo)["gen_ai.usage.input_tokens"],
        attributes(echo)["gen_ai.usage.output_tokens"],
    ) == (2, 1)


def test_a_cancel_ends_the_sub_runs_still_running_as_cancelled(otel: Pipeline) -> None:
    from helikon.context import ToolContext

    @tool
    async def cancel_all(ctx: ToolContext[Any], why: str) -> str:
        """Cancel the run.

        Args:
            why: the reason.
        """
        ctx.cancel.cancel()
        return "cancelled"

    fan = (
        ParallelAgent("fan")
        .add(agent("quick", say("Done.")))
        .add(
            agent("stopper", call_tools(("cancel_all", {"why": "enough"})), say("never"), tools=[cancel_all])
        )
        .add(agent("slow", call_tools(("market_data", {"symbol": "V"})), say("never"), tools=[market_data]))
    )

    with contextlib.suppress(RunError):
        run(lambda: collect(fan.run(None, "Go.", interpreter=otel.observer())))

    found = statuses(otel)
    assert found["invoke_agent stopper"] == ("ERROR", "cancelled")
    assert found["invoke_agent fan"][0] == "ERROR"
    assert found["invoke_agent slow"] == ("ERROR", "cancelled")
    assert found["invoke_agent quick"] == ("UNSET", None)  # it was over before the cancel
