"""The scenarios behind the committed golden traces.

Each scenario builds an agent (with a scripted model, so recording needs no
credentials), its input and its run context. ``pytest --helikon-record``
re-records every trace through the live interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from helikon import AgentInput, LlmAgent, RunConfig, RunContext, ToolContext, ToolEffect, Usage, tool
from helikon.errors import ModelError
from helikon.model import Finish, FinishReason, ReasoningChunk, TextChunk
from helikon.testing import MockModel, call_tools, say
from helikon.workflows import GraphAgent, Handoff, ParallelAgent, SequentialAgent, SwarmAgent

Scenario = tuple[LlmAgent[Any], AgentInput | str, RunContext[Any] | None]


@tool(effect=ToolEffect.READ_ONLY)
async def lookup_spending(category: str, month: str) -> dict[str, float]:
    """Look up total spending for a category in a month.

    Args:
        category: Spending category, e.g. "Dining".
        month: Month in YYYY-MM form.
    """
    ledger = {"dining": 312.40, "groceries": 540.10}
    return {"total": ledger.get(category.lower(), 0.0)}


@tool(effect=ToolEffect.READ_ONLY)
async def budget_status(category: str) -> dict[str, float]:
    """Look up the monthly budget for a category.

    Args:
        category: Spending category, e.g. "Dining".
    """
    return {"budget": 250.0 if category.lower() == "dining" else 600.0}


@tool
async def cancel_run(ctx: ToolContext[None]) -> str:
    """Stop everything (cancels the run from inside a tool)."""
    ctx.cancel.cancel()
    return "cancelled"


@attrs.frozen
class Verdict:
    on_track: bool
    advice: str


def _agent(model: MockModel, **kw: Any) -> LlmAgent[Any]:
    kw.setdefault("tools", [lookup_spending, budget_status])
    return LlmAgent(name="budget-assistant", model=model, instructions="You are a budgeting assistant.", **kw)


def plain_answer() -> Scenario:
    return _agent(MockModel([say("Hello! Ask me about your budget.", usage=Usage(20, 8))])), "hi", None


def single_tool() -> Scenario:
    model = MockModel(
        [
            call_tools(("call_1", "budget_status", {"category": "Dining"}), usage=Usage(40, 12)),
            say("Your dining budget is $250.", usage=Usage(60, 9)),
        ]
    )
    return _agent(model), "What is my dining budget?", None


def parallel_tools() -> Scenario:
    model = MockModel(
        [
            call_tools(
                ("lookup_spending", {"category": "Dining", "month": "2026-12"}),
                ("budget_status", {"category": "Dining"}),
                text="Let me check both.",
            ),
            say("You spent $312.40 of $250: $62.40 over."),
        ]
    )
    return _agent(model), "How am I doing on dining?", None


def invalid_args_repaired() -> Scenario:
    model = MockModel(
        [
            call_tools(("budget_status", {"cat": "Dining"})),
            call_tools(("budget_status", {"category": "Dining"})),
            say("Your dining budget is $250."),
        ]
    )
    return _agent(model), "Dining budget?", None


def unknown_tool() -> Scenario:
    model = MockModel([call_tools(("transfer_money", {"amount": 100})), say("I cannot move money.")])
    return _agent(model), "Move $100 to savings.", None


def structured_output_repair() -> Scenario:
    model = MockModel(
        [
            call_tools(("budget_status", {"category": "Dining"})),
            say("You are over budget."),
            say('{"on_track": "no"}'),
            say('{"on_track": false, "advice": "Cook at home this week."}'),
        ]
    )
    return _agent(model, output_type=Verdict), "Am I on track with dining?", None


def max_turns_exceeded() -> Scenario:
    model = MockModel([call_tools(("budget_status", {"category": "Dining"})) for _ in range(3)])
    return _agent(model, config=RunConfig(max_turns=2)), "Loop forever.", None


def model_error() -> Scenario:
    model = MockModel([[TextChunk("Let me "), ModelError.rate_limited("429 Too Many Requests", 1500)]])
    return _agent(model), "hi", None


def cancelled_run() -> Scenario:
    model = MockModel([call_tools(("cancel_run", {})), say("never said")])
    return _agent(model, tools=[cancel_run]), "Stop.", RunContext.ephemeral(None)


def reasoning_deltas() -> Scenario:
    model = MockModel(
        [
            [
                ReasoningChunk("The user asks about dining. "),
                ReasoningChunk("I should check the budget.", signature="sig-1"),
                *call_tools(("budget_status", {"category": "Dining"})),
            ],
            [
                ReasoningChunk("Budget is 250."),
                TextChunk("Your dining budget "),
                TextChunk("is $250."),
                Usage(50, 10, reasoning_tokens=6),
                Finish(FinishReason.STOP),
            ],
        ]
    )
    return _agent(model), "Dining budget?", None


#: Instructions to give a specialist by name (tests change one child of a tree with it).
TWEAKS: dict[str, str] = {}


def _specialist(name: str, answer: str) -> LlmAgent[Any]:
    return LlmAgent(
        name=name,
        model=MockModel([say(answer)]),
        description=f"Answers {name} questions.",
        instructions=TWEAKS.get(name),
        tools=[],
    )


def handoff() -> Scenario:
    investing = _specialist("investing specialist", "Start with a broad index fund.")
    budgeting = _specialist("budgeting specialist", "Cook at home.")
    triage = LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_investing_specialist", {}), usage=Usage(30, 5))]),
        instructions="Route the question; never answer yourself.",
        handoffs=[Handoff.to(budgeting), Handoff.to(investing)],
    )
    return triage, "How should I start investing $5,000?", None


def parallel_fan_out() -> Scenario:
    fan = (
        ParallelAgent("three-lenses", "Three independent takes.")
        .branch("optimist", _specialist("optimist", "It will go up."))
        .branch("pessimist", _specialist("pessimist", "It will go down."))
        .branch("realist", _specialist("realist", "It will wobble."))
    )
    return fan, "What will the market do?", None  # type: ignore[return-value]


def graph_report() -> Scenario:
    graph = (
        GraphAgent.builder()
        .name("finance_report")
        .description("Spending and income into one summary.")
        .node("spending", _specialist("spending", "Spent $2,100."))
        .node("income", _specialist("income", "Earned $3,000."))
        .node("summary", _specialist("summary", "Saved $900 this month."))
        .edge("spending", "summary")
        .edge("income", "summary")
        .build()
    )
    return graph, "Report on December.", None  # type: ignore[return-value]


def sequential_pipeline() -> Scenario:
    """A researcher with a tool, then a writer: each child's steps at its path."""
    researcher = LlmAgent(
        name="researcher",
        model=MockModel(
            [
                call_tools(("lookup_spending", {"category": "dining", "month": "2026-11"})),
                say("Dining: $412."),
            ]
        ),
        instructions="Find the numbers.",
        tools=[lookup_spending],
    )
    writer = _specialist("writer", "You spent $412 on dining in November.")
    pipeline = SequentialAgent("report-pipeline", "Research, then write.").then(researcher).then(writer)
    return pipeline, "Dining in November?", None  # type: ignore[return-value]


def swarm_handoffs() -> Scenario:
    """A swarm: the entry hands off to a peer, which answers."""
    greeter = LlmAgent(
        name="greeter",
        description="Greets and routes.",
        model=MockModel([call_tools(("transfer_to_saver", {}))]),
        instructions="Route savings questions to the saver.",
    )
    saver = _specialist("saver", "Put 10% aside each month.")
    swarm = (
        SwarmAgent.builder()
        .name("money-swarm")
        .description("Greeter and saver.")
        .member(greeter)
        .member(saver)
        .entry("greeter")
        .max_handoffs(2)
        .build()
    )
    return swarm, "How do I save?", None  # type: ignore[return-value]


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    f.__name__: f
    for f in (
        plain_answer,
        single_tool,
        parallel_tools,
        invalid_args_repaired,
        unknown_tool,
        structured_output_repair,
        max_turns_exceeded,
        model_error,
        cancelled_run,
        reasoning_deltas,
        handoff,
        parallel_fan_out,
        graph_report,
        sequential_pipeline,
        swarm_handoffs,
    )
}
