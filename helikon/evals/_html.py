"""The HTML report: one self-contained page a person reads instead of JSON.

:func:`render_report` writes the verdict and counts, three inline-SVG charts
(the score distribution, each evaluator's passed/failed/skipped, each
evaluator's mean), the per-evaluator table, and the per-case table: one row
per case with its scores and links to its trace, and under it the case's
details (input, expected and actual answers, each failure's reason with an
inline diff of expected against actual, the error or the replay's
divergence, and the conversation). Failing cases open their details.

Rules: no external asset (no CDN, font, image or script URL), every text
escaped, and the only script is the failures/all filter. The charts are
drawn here, in Python, so the page is the same bytes for the same report.
:func:`render_trace_page` renders one case's trace as a table of steps.
"""

from __future__ import annotations

import datetime
import difflib
import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from helikon import codec
from helikon.effects import Effect, EffectResult
from helikon.evals._evaluators import pretty_json
from helikon.evals._results import FAILING, CaseResult
from helikon.evals._scores import ScoreOutcome
from helikon.events import AgentEvent, MessageOutput, ToolCallItem, ToolOutputItem
from helikon.items import AssistantMessage, SystemMessage, UserMessage, text_of
from helikon.sessions import (
    AssistantMessageEvent,
    Compacted,
    HandoffOccurred,
    SessionEvent,
    ToolCallRecorded,
    ToolResultRecorded,
    UserMessageEvent,
)
from helikon.trace import Trace

if TYPE_CHECKING:
    from helikon.evals._report import EvalReport

_GREEN, _RED, _GREY, _AMBER, _BLUE = "#2e7d32", "#c62828", "#9e9e9e", "#ef6c00", "#1565c0"

_STYLE = """
:root { --fg:#1d2330; --muted:#5f6b7a; --line:#dde3ea; --bg:#f6f8fa; --pass:#2e7d32; --fail:#c62828;
  --skip:#757575; --err:#ef6c00; --div:#6a1b9a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  margin: 0; padding: 24px 32px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 10px; }
.meta { color: var(--muted); margin: 0 0 16px; }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
  white-space: pre-wrap; word-break: break-word; margin: 4px 0 10px; max-height: 360px; overflow: auto; }
.verdict { display: inline-block; padding: 4px 12px; border-radius: 999px; color: #fff; font-weight: 600; }
.verdict.ok { background: var(--pass); } .verdict.bad { background: var(--fail); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 20px; } .card span { color: var(--muted); font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
figcaption { font-weight: 600; margin-bottom: 6px; }
svg text { font: 11px system-ui, sans-serif; fill: #37474f; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--bg); font-weight: 600; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: 600; text-transform: uppercase; font-size: 12px; }
.passed { color: var(--pass); } .failed { color: var(--fail); } .skipped { color: var(--skip); }
.error { color: var(--err); } .diverged { color: var(--div); }
td.score.passed { background: #e8f5e9; } td.score.failed { background: #ffebee; }
td.score.skipped { background: #f5f5f5; }
tr.detail > td { background: #fcfcfd; padding: 0 8px 8px 36px; }
details summary { cursor: pointer; color: var(--muted); padding: 4px 0; }
.diff del { background: #ffcdd2; color: #8e0000; text-decoration: line-through; }
.diff ins { background: #c8e6c9; color: #1b5e20; text-decoration: none; }
.legend { color: var(--muted); font-size: 12px; }
.reason { margin: 6px 0 2px; } .label { color: var(--muted); font-size: 12px; margin-top: 8px; }
.filters button { border: 1px solid var(--line); background: #fff; border-radius: 6px; padding: 4px 10px;
  cursor: pointer; margin-right: 6px; } .filters button.on { background: var(--fg); color: #fff; }
ol.conversation { padding-left: 20px; margin: 4px 0; } ol.conversation li { margin: 2px 0; }
.who { font-weight: 600; }
"""

_SCRIPT = """
document.querySelectorAll('.filters button').forEach(function (button) {
  button.addEventListener('click', function () {
    var failuresOnly = button.dataset.filter === 'failures';
    document.querySelectorAll('.filters button').forEach(function (b) {
      b.classList.toggle('on', b === button);
    });
    document.querySelectorAll('#cases tbody tr').forEach(function (row) {
      row.hidden = failuresOnly && row.dataset.failing !== '1';
    });
  });
});
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# -- charts ------------------------------------------------------------------


def _empty_chart(width: int, height: int, text: str) -> str:
    return (
        f'<svg role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fafafa"/>'
        f'<text x="{width // 2}" y="{height // 2}" text-anchor="middle">{_e(text)}</text></svg>'
    )


def histogram(values: Sequence[float], bins: int = 10) -> list[int]:
    """How many ``values`` fall in each of ``bins`` equal bins of [0, 1] (1.0 in the last).

    >>> histogram([0.0, 0.05, 0.5, 1.0], bins=4)
    [2, 0, 1, 1]
    """
    counts = [0] * bins
    for value in values:
        counts[min(int(value * bins), bins - 1)] += 1
    return counts


def _bin_colour(index: int, bins: int) -> str:
    """Red for low scores through amber to green for high ones.

    >>> _bin_colour(0, 10), _bin_colour(9, 10)
    ('hsl(0, 62%, 45%)', 'hsl(120, 62%, 33%)')
    """
    t = index / max(bins - 1, 1)
    return f"hsl({round(120 * t)}, 62%, {round(45 - 12 * t)}%)"


def distribution_chart(values: Sequence[float]) -> str:
    """An SVG histogram of the scores in ten bins."""
    width, height, left, bottom, top = 420, 200, 34, 28, 12
    if not values:
        return _empty_chart(width, height, "no scores (every evaluator skipped or no case ran)")
    counts = histogram(values)
    peak = max(counts)
    plot_w, plot_h = width - left - 8, height - bottom - top
    bar_w = plot_w / len(counts)
    parts = [
        f'<svg role="img" aria-label="score distribution" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 8}" y2="{top + plot_h}" stroke="#90a4ae"/>'
    )
    for tick in sorted({0, peak // 2, peak}):
        y = top + plot_h - plot_h * tick / peak
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    for i, count in enumerate(counts):
        h = plot_h * count / peak
        x = left + i * bar_w
        low, high = i / len(counts), (i + 1) / len(counts)
        parts.append(
            f'<rect class="bar" x="{x + 2:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 4:.1f}" '
            f'height="{h:.1f}" fill="{_bin_colour(i, len(counts))}"><title>{low:.1f}-{high:.1f}: '
            f"{count} score(s)</title></rect>"
        )
        if i % 2 == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{low:.1f}</text>')
    parts.append(f'<text x="{width - 8}" y="{height - 10}" text-anchor="end">1.0</text></svg>')
    return "".join(parts)


def outcomes_chart(report: EvalReport) -> str:
    """An SVG of stacked bars: each evaluator's passed, failed and skipped counts."""
    stats = report.stats()
    row, label_w, width = 26, 150, 460
    if not stats:
        return _empty_chart(width, 80, "no evaluators")
    height = row * len(stats) + 30
    most = max(max(s.passed + s.failed + s.skipped for s in stats), 1)
    parts = [
        f'<svg role="img" aria-label="outcomes per evaluator" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for n, s in enumerate(stats):
        y = n * row + 4
        parts.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{_e(s.evaluator[:22])}</text>')
        x = float(label_w)
        for count, colour, what in (
            (s.passed, _GREEN, "passed"),
            (s.failed, _RED, "failed"),
            (s.skipped, _GREY, "skipped"),
        ):
            w = (width - label_w - 40) * count / most
            if count:
                parts.append(
                    f'<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="18" fill="{colour}">'
                    f"<title>{_e(s.evaluator)}: {count} {what}</title></rect>"
                )
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 14}">{s.passed}/{s.passed + s.failed}</text>')
    legend_y = height - 8
    for i, (colour, what) in enumerate(((_GREEN, "passed"), (_RED, "failed"), (_GREY, "skipped"))):
        parts.append(
            f'<rect x="{label_w + i * 80}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{label_w + i * 80 + 14}" y="{legend_y}">{what}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def means_chart(report: EvalReport) -> str:
    """An SVG of bars: each evaluator's mean score on a 0-1 axis."""
    stats = report.stats()
    row, label_w, width = 26, 150, 460
    if not stats:
        return _empty_chart(width, 80, "no evaluators")
    height = row * len(stats) + 8
    plot_w = width - label_w - 50
    parts = [
        f'<svg role="img" aria-label="mean score per evaluator" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for n, s in enumerate(stats):
        y = n * row + 4
        parts.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{_e(s.evaluator[:22])}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="18" fill="#eceff1"/>')
        if s.mean is not None:
            colour = _bin_colour(min(int(s.mean * 10), 9), 10)
            parts.append(
                f'<rect class="bar" x="{label_w}" y="{y}" width="{plot_w * s.mean:.1f}" height="18" '
                f'fill="{colour}"><title>{_e(s.evaluator)}: mean {s.mean:.3f}</title></rect>'
            )
        parts.append(f'<text x="{label_w + plot_w + 6}" y="{y + 14}">{_number(s.mean)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- diffs -------------------------------------------------------------------

_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


def render_diff(expected: str, actual: str) -> str:
    """An inline word diff: what only ``expected`` has in ``<del>``, what only ``actual`` has in ``<ins>``.

    Whitespace alone between two changes joins them, so a changed phrase reads as one change.

    >>> render_diff("pay 5 dollars", "pay 7 dollars")
    '<span>pay </span><del>5</del><ins>7</ins><span> dollars</span>'
    >>> render_diff("has shipped.", "is still here.")
    '<del>has shipped</del><ins>is still here</ins><span>.</span>'
    """
    a, b = _TOKENS.findall(expected), _TOKENS.findall(actual)
    segments: list[tuple[bool, str, str]] = []  # (same, expected text, actual text)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        segments.append((op == "equal", "".join(a[i1:i2]), "".join(b[j1:j2])))
    merged: list[tuple[bool, str, str]] = []
    for n, (same, old, new) in enumerate(segments):
        between_changes = 0 < n < len(segments) - 1 and not segments[n - 1][0] and not segments[n + 1][0]
        if same and between_changes and not old.strip():
            same = False
        if merged and not same and not merged[-1][0]:
            _, old_before, new_before = merged.pop()
            old, new = old_before + old, new_before + new
        merged.append((same, old, new))
    out: list[str] = []
    for same, old, new in merged:
        if same:
            out.append(f"<span>{_e(old)}</span>")
            continue
        if old:
            out.append(f"<del>{_e(old)}</del>")
        if new:
            out.append(f"<ins>{_e(new)}</ins>")
    return "".join(out)


# -- the page ----------------------------------------------------------------


def _score_cell(case: CaseResult, evaluator: str) -> str:
    score = case.score(evaluator)
    if score is None:
        return '<td class="score">-</td>'
    shown = "skip" if score.outcome is ScoreOutcome.SKIPPED else f"{score.value:.2f}"
    return f'<td class="score num {score.outcome.value}" title="{_e(score.reason)}">{shown}</td>'


def _conversation(events: Iterable[SessionEvent]) -> str:
    items: list[str] = []
    for event in events:
        match event:
            case UserMessageEvent(content=content):
                items.append(f'<li><span class="who">user:</span> {_e(text_of(content))}</li>')
            case AssistantMessageEvent(content=content, agent=agent):
                items.append(
                    f'<li><span class="who">{_e(agent or "assistant")}:</span> {_e(text_of(content))}</li>'
                )
            case ToolCallRecorded(name=name, arguments=arguments):
                items.append(
                    f'<li><span class="who">tool call:</span> <code>{_e(name)}({_e(arguments)})</code></li>'
                )
            case ToolResultRecorded(name=name, content=content, is_error=is_error):
                label = "tool error" if is_error else "tool result"
                items.append(
                    f'<li><span class="who">{label}</span> <code>{_e(name)}</code>: {_e(content[:500])}</li>'
                )
            case HandoffOccurred(from_agent=src, to_agent=dst):
                items.append(f'<li><span class="who">handoff:</span> {_e(src)} &rarr; {_e(dst)}</li>')
            case Compacted(summary=summary):
                items.append(f'<li><span class="who">compacted:</span> {_e(summary)}</li>')
    return f'<ol class="conversation">{"".join(items)}</ol>' if items else "<p>(no conversation recorded)</p>"


def _details(case: CaseResult) -> str:
    c = case.case
    parts = [f'<div class="label">input</div><pre>{_e(c.input)}</pre>']
    if c.expected is not None:
        expected = c.expected if isinstance(c.expected, str) else pretty_json(c.expected)
        parts.append(f'<div class="label">expected</div><pre>{_e(expected)}</pre>')
    parts.append(f'<div class="label">final output</div><pre>{_e(case.final_output) or "(none)"}</pre>')
    tools = ", ".join(case.tool_calls) or "(none)"
    wanted = (
        ""
        if c.expected_tools is None
        else f" &mdash; expected: {_e(', '.join(c.expected_tools) or '(none)')}"
    )
    parts.append(f'<div class="label">tool calls</div><p>{_e(tools)}{wanted}</p>')
    if case.divergence is not None:
        d = case.divergence
        parts.append('<div class="label">divergence</div>')
        parts.append(f'<p class="reason diverged">step {d.step}: {_e(d.headline)}</p>')
        if d.differences:
            parts.append("<pre>" + _e("\n".join(d.differences)) + "</pre>")
    if case.error is not None:
        parts.append(f'<div class="label">error</div><p class="reason error">{_e(case.error)}</p>')
    for scored in case.scores:
        score = scored.score
        parts.append(
            f'<p class="reason {score.outcome.value}"><b>{_e(scored.evaluator)}</b> '
            f"({score.outcome.value}, {score.value:.2f}): {_e(score.reason)}</p>"
        )
        if score.outcome is ScoreOutcome.FAILED and score.expected is not None and score.actual is not None:
            parts.append(
                '<div class="legend diff">diff: <del>expected</del> <ins>actual</ins></div>'
                f'<pre class="diff">{render_diff(score.expected, score.actual)}</pre>'
            )
        elif score.outcome is ScoreOutcome.FAILED and score.actual is not None:
            parts.append(f'<div class="label">actual</div><pre>{_e(score.actual)}</pre>')
    parts.append(f'<div class="label">conversation</div>{_conversation(case.events)}')
    return "".join(parts)


def _case_rows(case: CaseResult, evaluators: Sequence[str]) -> str:
    failing = case.status in FAILING
    trace = (
        f'<a href="traces/{_e(case.trace_name)}.html">trace</a> '
        f'<a href="traces/{_e(case.trace_name)}.jsonl">jsonl</a>'
        if case.trace is not None
        else "-"
    )
    status = case.status.value
    row = (
        f'<tr class="case" data-failing="{int(failing)}" id="case-{case.index + 1}">'
        f'<td class="num">{case.index + 1}</td><td><code>{_e(case.case.id)}</code></td>'
        f'<td class="status {status}">{status}</td>'
        + "".join(_score_cell(case, e) for e in evaluators)
        + f'<td class="num">{case.duration_ms:.0f}</td><td>{trace}</td></tr>'
    )
    open_attr = " open" if failing else ""
    span = len(evaluators) + 5
    detail = (
        f'<tr class="detail" data-failing="{int(failing)}"><td colspan="{span}"><details{open_attr}>'
        f"<summary>details</summary>{_details(case)}</details></td></tr>"
    )
    return row + detail


def render_report(report: EvalReport) -> str:
    """``report`` as one self-contained HTML page."""
    counts = report.counts
    ok = report.passed()
    title = f"Eval {report.mode} {report.run_id}"
    values = [
        s.score.value for c in report.cases for s in c.scores if s.score.outcome is not ScoreOutcome.SKIPPED
    ]
    cards = [
        (counts.total, "cases"),
        (counts.passed, "passed"),
        (counts.failed, "failed"),
        (counts.errors, "errors"),
        (counts.diverged, "diverged"),
        (counts.skipped, "all skipped"),
        (_number(report.mean), "mean score"),
        (report.skipped_scores, "skipped scores"),
    ]
    stats_rows = "".join(
        f"<tr><td><code>{_e(s.evaluator)}</code></td><td class='num passed'>{s.passed}</td>"
        f"<td class='num failed'>{s.failed}</td><td class='num skipped'>{s.skipped}</td>"
        f"<td class='num'>{_number(s.mean)}</td><td class='num'>{_number(s.minimum)}</td>"
        f"<td class='num'>{_number(s.maximum)}</td><td class='num'>{_number(s.pass_rate)}</td></tr>"
        for s in report.stats()
    )
    head = "".join(f"<th>{_e(e)}</th>" for e in report.evaluators)
    rows = "".join(_case_rows(c, report.evaluators) for c in report.cases)
    source = f" of <code>{_e(report.source_run)}</code>" if report.source_run else ""
    name = f" &mdash; {_e(report.name)}" if report.name else ""
    summary = "".join(f'<div class="card"><b>{_e(v)}</b><span>{k}</span></div>' for v, k in cards)
    distribution = distribution_chart(values)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_STYLE}</style></head>
<body>
<header><h1>{_e(title)}{name}</h1>
<p class="meta">{_e(report.mode)}{source} &middot; started {_when(report.started_at)} &middot;
{report.duration_ms / 1000:.2f} s &middot; {len(report.evaluators)} evaluator(s)</p>
<span class="verdict {"ok" if ok else "bad"}" id="verdict">{"PASSED" if ok else "FAILED"}</span></header>
<section class="cards" id="summary">{summary}</section>
<section class="charts" id="charts">
<figure id="chart-distribution"><figcaption>Score distribution</figcaption>{distribution}</figure>
<figure id="chart-outcomes"><figcaption>Outcomes per evaluator</figcaption>{outcomes_chart(report)}</figure>
<figure id="chart-means"><figcaption>Mean score per evaluator</figcaption>{means_chart(report)}</figure>
</section>
<h2>Evaluators</h2>
<table id="stats"><thead><tr><th>evaluator</th><th>passed</th><th>failed</th><th>skipped</th><th>mean</th>
<th>min</th><th>max</th><th>pass rate</th></tr></thead><tbody>{stats_rows}</tbody></table>
<h2>Cases</h2>
<p class="filters"><button type="button" data-filter="all" class="on">all cases</button><button type="button"
data-filter="failures">failures only ({len(report.failures())})</button></p>
<table id="cases"><thead><tr><th>#</th><th>case</th><th>status</th>{head}<th>ms</th><th>trace</th></tr>
</thead>
<tbody>{rows}</tbody></table>
<script>{_SCRIPT}</script>
</body></html>
"""


# -- a trace, readable ---------------------------------------------------------


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _summary(value: dict[str, Any]) -> str:
    """One line about an unstructured effect or result."""
    kind = value.get("type", "?")
    if kind == "ModelResponded":
        chunks = value.get("events", [])
        text = "".join(c.get("text", "") for c in chunks if c.get("type") == "TextChunk")
        calls = [c.get("name") for c in chunks if c.get("type") == "ToolCallChunk" and c.get("name")]
        said = f" \u201c{_short(text, 120)}\u201d" if text else ""
        return f"{kind}{said}" + (f" calls {', '.join(calls)}" if calls else "")
    if kind == "CallModel":
        request = value.get("request", {})
        return (
            f"CallModel turn {value.get('turn')}: {len(request.get('messages', []))} message(s), "
            f"{len(request.get('tools', []))} tool(s)"
        )
    if kind in ("ExecuteTools", "ToolsExecuted"):
        entries = value.get("steps", value.get("results", []))
        labels = [
            f"{e.get('type')}:{e.get('tool', e.get('call_id', ''))}"
            + (f" \u2192 {_short(_compact_json(e['output']), 80)}" if "output" in e else "")
            for e in entries
        ]
        return f"{kind}: " + "; ".join(labels)
    fields = {k: v for k, v in value.items() if k != "type"}
    return f"{kind} {_short(pretty_json(fields).replace(chr(10), ' '), 120)}" if fields else kind


def _compact_json(value: Any) -> str:
    """A value as compact JSON (what a tool returned reads as JSON, not as a Python repr)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _event_line(event: AgentEvent) -> str:
    match event:
        case MessageOutput(item=item):
            return f"MessageOutput \u201c{_short(text_of(item.content), 100)}\u201d"
        case ToolCallItem(item=call):
            return f"ToolCallItem {call.name}({_short(call.arguments, 80)})"
        case ToolOutputItem(item=result):
            return f"ToolOutputItem {result.name}: {_short(result.content, 80)}"
        case _:
            return type(event).__name__


def _input_text(trace: Trace) -> str:
    lines = []
    for item in trace.header.input:
        match item:
            case (
                UserMessage(content=content)
                | AssistantMessage(content=content)
                | SystemMessage(content=content)
            ):
                lines.append(text_of(content))
            case _:
                lines.append(type(item).__name__)
    return "\n".join(lines)


def render_trace_page(trace: Trace, *, title: str, report: str = "report.html") -> str:
    """One trace as an HTML page: the header, then a row per step (effect, result, events);
    ``report`` is the report page's file name (the page links back to ``../<report>``)."""
    header = trace.header
    rows: list[str] = []
    start, per_step, end = trace.events_by_step()

    def shown(events: Iterable[AgentEvent]) -> str:
        return ", ".join(
            _event_line(e) for e in events if type(e).__name__ not in ("TokenDelta", "ToolCallDelta")
        )

    if start:
        rows.append(
            f'<tr><td class="num">-</td><td>-</td><td>start</td><td>-</td><td>{_e(shown(start))}</td></tr>'
        )
    for step, own in zip(trace.steps, per_step, strict=True):
        effect = codec.unstructure(step.effect, Effect)
        result = codec.unstructure(step.result, EffectResult)
        events = shown(own)
        rows.append(
            f'<tr><td class="num">{step.index}</td>'
            f"<td><code>{_e('/'.join(map(str, step.path)) or '-')}</code></td>"
            f"<td>{_e(_summary(effect))}<details><summary>effect</summary><pre>{_e(pretty_json(effect))}</pre>"
            f"</details></td><td>{_e(_summary(result))}<details><summary>result</summary>"
            f"<pre>{_e(pretty_json(result))}</pre></details></td><td>{_e(events)}</td></tr>"
        )
    final = ", ".join(_event_line(e) for e in end)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Trace {_e(title)}</title><style>{_STYLE}</style></head>
<body><p><a href="../{_e(report)}">&larr; report</a></p><h1>Trace {_e(title)}</h1>
<p class="meta">agent <code>{_e(header.agent)}</code> &middot; run <code>{_e(header.run_id)}</code> &middot;
{_e(header.fingerprint)} &middot; format {_e(header.format)} v{header.version} &middot;
{len(trace.steps)} step(s)</p>
<div class="label">input</div><pre>{_e(_input_text(trace))}</pre>
<table id="steps"><thead><tr><th>#</th><th>path</th><th>effect</th><th>result</th><th>events</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<h2>Final events</h2><p>{_e(final) or "-"}</p>
</body></html>
"""


__all__ = [
    "distribution_chart",
    "histogram",
    "means_chart",
    "outcomes_chart",
    "render_diff",
    "render_report",
    "render_trace_page",
]
