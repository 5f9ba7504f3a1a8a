"""Strategies and helpers shared by the property tests.

The reusable strategies live in :mod:`helikon.testing.strategies` (users
import them too); this module re-exports them and adds what only helikon's
own tests need: whole scripted runs, the phase and result types, and a way to
scale a test's example count to the loaded profile.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, Final

from hypothesis import settings
from hypothesis import strategies as st

from helikon.effects import (
    AgentsRan,
    EffectResult,
    HandoffCompleted,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    ToolsExecuted,
)
from helikon.errors import Cancelled, ModelError, Unavailable
from helikon.loop import AgentSpec, LoopState
from helikon.model import ModelEvent, TextChunk, Usage
from helikon.testing.strategies import (
    CallKind,
    PlannedCall,
    ScriptedTool,
    TurnPlan,
    agent_inputs,
    agent_specs,
    arg_schemas,
    carriers,
    final_answers,
    handoff_lists,
    handoff_specs,
    interruptions,
    malformed_json,
    matching_args,
    model_errors,
    model_failures,
    model_turns,
    non_matching_args,
    output_schemas,
    run_configs,
    run_ids,
    tool_def_lists,
    tool_defs,
    tool_fns,
    tool_outcomes,
    turn_plans,
    usages,
)

#: Every phase of the loop, in the book's order.
PHASES: Final[tuple[type, ...]] = typing.get_args(LoopState)

#: Every result an interpreter can feed back.
RESULTS: Final[tuple[type, ...]] = typing.get_args(EffectResult)

#: One result of every type, for checking that terminal states refuse them all.
ONE_OF_EACH_RESULT: Final[tuple[EffectResult, ...]] = (
    InstructionsRendered("be brief"),
    ModelResponded((TextChunk("hello"),)),
    ModelCallFailed(Unavailable("down")),
    ToolsExecuted(()),
    HandoffCompleted("done", Usage()),
    AgentsRan(()),
    RunInterrupted(Cancelled()),
)


def scaled(fraction: float, **overrides: Any) -> settings:
    """Settings running ``fraction`` of the loaded profile's examples (at least 5).

    For tests parametrized many ways, so the whole suite keeps its budget.
    """
    loaded = settings.default
    assert loaded is not None
    return settings(max_examples=max(5, int(loaded.max_examples * fraction)), **overrides)


def usage_of(events: Iterable[ModelEvent]) -> Usage:
    """The sum of the usage events among ``events``."""
    total = Usage()
    for event in events:
        if isinstance(event, Usage):
            total = total + event
    return total


def fed_usage(result: EffectResult) -> Usage:
    """The usage a result reports (model calls and handoffs)."""
    if isinstance(result, ModelResponded | ModelCallFailed):
        return usage_of(result.events)
    if isinstance(result, HandoffCompleted):
        return result.usage
    return Usage()


@st.composite
def scripts(draw: st.DrawFn, spec: AgentSpec, max_turns: int | None = None) -> list[list[object]]:
    """Model scripts for a whole run of ``spec``: turns with and without tool
    calls, final answers when it has an output schema, now and then a model
    error part-way through a turn."""
    count = max_turns if max_turns is not None else spec.config.max_turns + 2
    turn = turn_plans(spec.tools).map(lambda plan: list(plan.events))
    kinds = [turn, turn_plans(spec.tools, max_calls=0).map(lambda plan: list(plan.events))]
    if spec.output is not None:
        kinds.append(
            turn_plans(text=final_answers(spec.output.schema), max_calls=0).map(lambda p: list(p.events))
        )
    result: list[list[object]] = []
    for _ in range(draw(st.integers(1, count))):
        events: list[object] = list(draw(st.one_of(kinds)))
        if draw(st.integers(0, 9)) == 0:
            events.insert(draw(st.integers(0, len(events))), draw(model_errors()))
        result.append(events)
    return result


def tools_for(spec: AgentSpec, raises: bool = True) -> st.SearchStrategy[dict[str, ScriptedTool]]:
    """A scripted function for every tool of ``spec``."""
    return st.fixed_dictionaries({t.name: tool_fns(raises) for t in spec.tools})


def instructions_fn(turn: int) -> str:
    """Dynamic instructions that differ per turn."""
    return f"You are on turn {turn}."


__all__ = [
    "ONE_OF_EACH_RESULT",
    "PHASES",
    "RESULTS",
    "CallKind",
    "ModelError",
    "PlannedCall",
    "ScriptedTool",
    "TurnPlan",
    "agent_inputs",
    "agent_specs",
    "arg_schemas",
    "carriers",
    "fed_usage",
    "final_answers",
    "handoff_lists",
    "handoff_specs",
    "instructions_fn",
    "interruptions",
    "malformed_json",
    "matching_args",
    "model_errors",
    "model_failures",
    "model_turns",
    "non_matching_args",
    "output_schemas",
    "run_configs",
    "run_ids",
    "scaled",
    "scripts",
    "tool_def_lists",
    "tool_defs",
    "tool_fns",
    "tool_outcomes",
    "tools_for",
    "turn_plans",
    "usage_of",
    "usages",
]
