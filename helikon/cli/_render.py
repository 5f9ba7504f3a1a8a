"""How the CLI shows a run's events: streamed text for people, JSON lines for programs."""

from __future__ import annotations

import sys
from typing import IO

import attrs
import msgspec
from rich.console import Console
from rich.markup import escape

from helikon import codec
from helikon.errors import Cancelled, describe
from helikon.events import (
    AgentEvent,
    GuardrailTriggered,
    HandoffItem,
    PermissionDenied,
    ReasoningDelta,
    RunCompleted,
    RunFailed,
    TokenDelta,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.model import Usage
from helikon.pricing import money

_PREVIEW = 200


def preview(text: str, limit: int = _PREVIEW) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def event_json(event: AgentEvent) -> str:
    """One event as a JSON object (``{"type": "TokenDelta", ...}``), on one line."""
    return msgspec.json.encode(codec.unstructure(event, AgentEvent)).decode()


def console(file: IO[str] | None = None) -> Console:
    """A rich console that never reinterprets the model's text."""
    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True)


@attrs.define
class EventPrinter:
    """Prints events as they come: the answer streamed, tool calls and handoffs on their own lines."""

    out: Console
    err: Console
    json: bool = False
    at_line_start: bool = True
    failed: bool = False
    #: Leave a cancelled run's failure unsaid (the REPL says ``turn cancelled`` itself).
    quiet_cancel: bool = False

    def newline(self) -> None:
        if not self.at_line_start:
            self.out.print()
            self.at_line_start = True

    def line(self, markup: str) -> None:
        self.newline()
        self.out.print(markup)

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, RunFailed):
            self.failed = True
        if self.json:
            self.out.file.write(event_json(event) + "\n")
            self.out.file.flush()
            return
        match event:
            case TokenDelta(text=text):
                self.out.print(text, end="", markup=False)
                self.out.file.flush()
                self.at_line_start = text.endswith("\n")
            case ReasoningDelta(text=text):
                self.out.print(f"[dim]{escape(text)}[/dim]", end="")
                self.at_line_start = False
            case ToolCallItem(item=call):
                self.line(f"[cyan]→ {escape(call.name)}({escape(preview(call.arguments))})[/cyan]")
            case ToolOutputItem(item=result):
                style = "red" if result.is_error else "green"
                self.line(f"[{style}]← {escape(result.name)}: {escape(preview(result.content))}[/{style}]")
            case HandoffItem(from_agent=source, to_agent=target):
                self.line(f"[magenta]⇢ handoff: {escape(source)} -> {escape(target)}[/magenta]")
            case PermissionDenied(tool=tool, reason=reason):
                self.line(f"[red]denied: {escape(tool)}: {escape(reason)}[/red]")
            case GuardrailTriggered(kind=kind, info=info):
                self.line(f"[red]guardrail {escape(kind)}: {escape(info)}[/red]")
            case RunFailed(error=error):
                self.newline()
                if not (self.quiet_cancel and isinstance(error, Cancelled)):
                    self.err.print(f"[red]run failed: {escape(describe(error))}[/red]")
            case RunCompleted(usage=usage):
                self.newline()
                self.err.print(f"[dim]done: {spending(usage)}[/dim]")
            case _:
                pass


def spending(usage: Usage) -> str:
    """What a run spent, in one line.

    >>> from decimal import Decimal
    >>> spending(Usage(12, 3, requests=2, cost=Decimal("0.0001")))
    '12 tokens in, 3 out, 2 request(s), cost $0.0001'
    """
    text = f"{usage.input_tokens} tokens in, {usage.output_tokens} out, {usage.requests} request(s)"
    return text + ("" if usage.cost is None else f", cost {money(usage.cost)}")


__all__ = ["EventPrinter", "console", "event_json", "preview", "spending"]
