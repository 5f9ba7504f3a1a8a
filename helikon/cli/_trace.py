"""``helikon trace show`` and ``trace diff``: a trace as a timeline, two traces compared.

Both work on loaded :class:`~helikon.trace.Trace` objects (never on the
file's JSON), so they follow the trace format wherever it goes. The diff is
the structural, path-by-path :func:`helikon.diff.diff` that
:class:`~helikon.interpreters.ReplayDivergence` reports with.
"""

from __future__ import annotations

from typing import Any

from helikon import codec
from helikon.cli._render import preview
from helikon.diff import diff
from helikon.effects import AtPath, CallModel, Effect, EffectResult, ExecuteTools, InvokeTool, PerformAll
from helikon.errors import describe
from helikon.events import (
    AgentEvent,
    AgentUpdated,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    RunCompleted,
    RunFailed,
    RunStarted,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.items import AssistantMessage, Item, ToolResult, UserMessage
from helikon.trace import Trace, TraceStep


def _text(item: Item) -> str:
    match item:
        case UserMessage() | AssistantMessage():
            return "".join(getattr(part, "text", "") for part in item.content)
        case ToolResult(content=content):
            return content
        case _:
            return type(item).__name__


def effect_label(effect: Effect) -> str:
    """A one-line name for an effect: its kind and what it is about."""
    match effect:
        case CallModel(turn=turn):
            return f"CallModel turn {turn}"
        case ExecuteTools(steps=steps):
            tools = [step.tool for step in steps if isinstance(step, InvokeTool)]
            return "ExecuteTools " + (", ".join(tools) if tools else f"({len(steps)} steps)")
        case PerformAll(effects=effects):
            return "PerformAll [" + "; ".join(_at(at) for at in effects) + "]"
        case _:
            return type(effect).__name__


def _at(at: AtPath) -> str:
    return f"{'/'.join(map(str, at.path)) or '.'}: {effect_label(at.effect)}"


def event_line(event: AgentEvent) -> str | None:
    """A timeline line for a semantic event (``None`` for deltas and bookkeeping)."""
    match event:
        case RunStarted(agent=agent, run_id=run_id):
            return f"run started: {agent} ({run_id})"
        case ToolCallItem(item=call):
            return f"→ {call.name}({preview(call.arguments, 100)})"
        case ToolOutputItem(item=result):
            mark = "✗" if result.is_error else "←"
            return f"{mark} {result.name}: {preview(result.content, 100)}"
        case MessageOutput(item=message):
            return f"{message.agent or 'assistant'}: {preview(_text(message))}"
        case HandoffItem(from_agent=source, to_agent=target):
            return f"⇢ handoff: {source} -> {target}"
        case AgentUpdated(agent=agent):
            return f"agent now: {agent}"
        case PermissionDenied(tool=tool, reason=reason):
            return f"denied: {tool}: {reason}"
        case RunCompleted(usage=usage):
            return f"run completed ({usage.input_tokens} tokens in, {usage.output_tokens} out)"
        case RunFailed(error=error):
            return f"run failed: {describe(error)}"
        case _:
            return None


def timeline(trace: Trace) -> list[str]:
    """The trace as readable lines: header, then each step with its events."""
    head = trace.header
    lines = [
        f"agent {head.agent}, run {head.run_id}, {len(trace.steps)} steps, {head.fingerprint}",
        *(f"  input: {preview(_text(item))}" for item in head.input),
    ]
    for step in trace.steps:
        where = f" @{'/'.join(map(str, step.path))}" if step.path else ""
        lines.append(f"#{step.index}{where} {effect_label(step.effect)} -> {type(step.result).__name__}")
        lines.extend(f"    {line}" for e in step.events if (line := event_line(e)) is not None)
    lines.append("end")
    lines.extend(f"    {line}" for e in trace.final_events if (line := event_line(e)) is not None)
    return lines


def _step_data(step: TraceStep) -> dict[str, Any]:
    return {
        "path": list(step.path),
        "effect": codec.unstructure(step.effect, Effect),
        "result": codec.unstructure(step.result, EffectResult),
        "events": [codec.unstructure(e, AgentEvent) for e in step.events],
    }


def trace_diff(expected: Trace, actual: Trace) -> list[str]:
    """The differences between two traces, by section and field path; empty when they agree."""
    lines: list[str] = []
    header = diff(
        {"agent": expected.header.agent, "definition": expected.header.definition},
        {"agent": actual.header.agent, "definition": actual.header.definition},
    )
    if header:
        lines.append("header:")
        lines.extend(f"  {line}" for line in header)
    if len(expected.steps) != len(actual.steps):
        lines.append(f"steps: expected {len(expected.steps)}, got {len(actual.steps)}")
    for index in range(max(len(expected.steps), len(actual.steps))):
        if index >= len(actual.steps):
            lines.append(f"step {index}: missing (expected {effect_label(expected.steps[index].effect)})")
            continue
        if index >= len(expected.steps):
            lines.append(f"step {index}: unexpected {effect_label(actual.steps[index].effect)}")
            continue
        differences = diff(_step_data(expected.steps[index]), _step_data(actual.steps[index]))
        if differences:
            lines.append(f"step {index} ({effect_label(expected.steps[index].effect)}):")
            lines.extend(f"  {line}" for line in differences)
    end = diff(
        [codec.unstructure(e, AgentEvent) for e in expected.final_events],
        [codec.unstructure(e, AgentEvent) for e in actual.final_events],
        "events",
    )
    if end:
        lines.append("end:")
        lines.extend(f"  {line}" for line in end)
    return lines


__all__ = ["effect_label", "event_line", "timeline", "trace_diff"]
