"""``helikon trace show`` and ``trace diff``: a trace as a timeline, two traces compared.

Both work on loaded :class:`~helikon.trace.Trace` objects (never on the
file's JSON), so they follow the trace format wherever it goes. The diff is
the structural, path-by-path :func:`helikon.diff.diff` that
:class:`~helikon.interpreters.ReplayDivergence` reports with. By default it
compares behaviour: what differs between two runs of the same agent on the
same input by construction (run ids, the call ids derived from them, provider
response ids, timestamps) is normalised first; ``exact=True`` compares every byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from helikon import codec
from helikon.cli._render import preview, spending
from helikon.diff import diff
from helikon.effects import (
    AtPath,
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    InvokeTool,
    PerformAll,
    StepResult,
    ToolsExecuted,
)
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
            return f"run completed ({spending(usage)})"
        case RunFailed(error=error):
            return f"run failed: {describe(error)}"
        case _:
            return None


def result_line(result: EffectResult) -> str | None:
    """What a result brought, as JSON where it carries data (``None`` when the events say it all)."""
    match result:
        case ToolsExecuted(results=results):
            parts = []
            for outcome in results:
                data = codec.unstructure(outcome, StepResult)
                shown = {k: v for k, v in data.items() if k not in ("type", "call_id")}
                parts.append(f"{data['type']} {data['call_id']}: {_json(shown)}")
            return "; ".join(parts) or None
        case _:
            return None


def _json(value: object) -> str:
    return preview(json.dumps(value, ensure_ascii=False, separators=(",", ":")), 160)


def timeline(trace: Trace) -> list[str]:
    """The trace as readable lines: header, then each step with the events it brought."""
    head = trace.header
    start, per_step, end = trace.events_by_step()
    lines = [
        f"agent {head.agent}, run {head.run_id}, {len(trace.steps)} steps, {head.fingerprint}",
        *(f"  input: {preview(_text(item))}" for item in head.input),
    ]
    lines.extend(f"    {line}" for e in start if (line := event_line(e)) is not None)
    for step, events in zip(trace.steps, per_step, strict=True):
        where = f" @{'/'.join(map(str, step.path))}" if step.path else ""
        lines.append(f"#{step.index}{where} {effect_label(step.effect)} -> {type(step.result).__name__}")
        if (shown := result_line(step.result)) is not None:
            lines.append(f"    = {shown}")
        lines.extend(f"    {line}" for e in events if (line := event_line(e)) is not None)
    lines.append("end")
    lines.extend(f"    {line}" for e in end if (line := event_line(e)) is not None)
    return lines


def _step_data(step: TraceStep) -> dict[str, Any]:
    return {
        "path": list(step.path),
        "effect": codec.unstructure(step.effect, Effect),
        "result": codec.unstructure(step.result, EffectResult),
        "events": [codec.unstructure(e, AgentEvent) for e in step.events],
    }


#: ISO 8601 date-times (``2026-11-04T09:15:00Z``, with or without fractions and offsets).
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
#: Keys whose values are ids a provider or the clock hands out, different on every run.
_VOLATILE_KEYS = frozenset({"response_id", "previous_response_id", "timestamp", "created", "created_at"})


def _run_ids(data: Any) -> Iterator[str]:
    """Every run id in ``data`` (``run_id`` values), in order of appearance."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "run_id" and isinstance(value, str) and value:
                yield value
            else:
                yield from _run_ids(value)
    elif isinstance(data, list):
        for value in data:
            yield from _run_ids(value)


def _normalise(data: Any, names: dict[str, str]) -> Any:
    """``data`` with run ids (also inside derived call ids), volatile ids and timestamps replaced."""
    if isinstance(data, dict):
        return {
            key: ("<volatile>" if key in _VOLATILE_KEYS and value else _normalise(value, names))
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [_normalise(value, names) for value in data]
    if isinstance(data, str):
        for run_id, name in names.items():
            # Whole ids only (``call_<run>_1_0`` yes; a longer word that contains it, no).
            data = re.sub(rf"(?<![A-Za-z0-9]){re.escape(run_id)}(?![A-Za-z0-9])", name, data)
        return _TIMESTAMP.sub("<time>", data)
    return data


def _sections(trace: Trace, exact: bool) -> tuple[dict[str, Any], list[dict[str, Any]], list[Any]]:
    header = {"agent": trace.header.agent, "definition": trace.header.definition}
    steps = [_step_data(step) for step in trace.steps]
    end = [codec.unstructure(e, AgentEvent) for e in trace.final_events]
    if exact:
        return header, steps, end
    ordered = dict.fromkeys([trace.header.run_id, *_run_ids(steps), *_run_ids(end)])
    # Longest first, so an id that contains another is replaced whole.
    names = {
        run_id: f"<run {number}>"
        for number, run_id in sorted(
            ((n, r) for n, r in enumerate(ordered, 1) if r), key=lambda pair: -len(pair[1])
        )
    }
    return _normalise(header, names), _normalise(steps, names), _normalise(end, names)


def trace_diff(expected: Trace, actual: Trace, *, exact: bool = False) -> list[str]:
    """The differences between two traces, by section and field path; empty when they agree.

    By default run ids (and the call ids derived from them), provider response
    ids and timestamps are normalised, so two recordings of the same
    behaviour agree; ``exact=True`` compares them too.
    """
    lines: list[str] = []
    want_header, want_steps, want_end = _sections(expected, exact)
    got_header, got_steps, got_end = _sections(actual, exact)
    header = diff(want_header, got_header)
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
        differences = diff(want_steps[index], got_steps[index])
        if differences:
            lines.append(f"step {index} ({effect_label(expected.steps[index].effect)}):")
            lines.extend(f"  {line}" for line in differences)
    end = diff(want_end, got_end, "events")
    if end:
        lines.append("end:")
        lines.extend(f"  {line}" for line in end)
    return lines


__all__ = ["effect_label", "event_line", "timeline", "trace_diff"]
