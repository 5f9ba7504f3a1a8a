"""The ``helikon`` command tree (click), and :func:`main`, its entry point.

Exit codes: 0 success; 1 the thing checked said no (a failed run, an eval
that did not pass or missed ``--fail-under``, a replay that diverged, traces
that differ); 2 bad usage or bad input (a sidecar, dataset or trace that is
not valid, a missing API key); 130 interrupted. Errors are one line on
stderr; ``--debug`` (or ``HELIKON_DEBUG=1``) shows the traceback too.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import click
import trio
from rich.console import Console
from rich.markup import escape

from helikon.cli._options import AGENTS_OPTION, Failed, agent_name_of
from helikon.cli._render import EventPrinter, console
from helikon.cli._repl import Repl
from helikon.cli._sidecar import load_sidecar
from helikon.cli._trace import timeline, trace_diff
from helikon.errors import HelikonError
from helikon.evals import EvalDataset, EvalReport, EvalRun, SqliteTraceSink
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayDivergence, ReplayInterpreter
from helikon.items import AgentInput
from helikon.providers.prices import default_prices
from helikon.trace import Trace

_DEBUG = {"on": False}


def _any(value: object) -> Any:
    """``EvalRun``'s ``converter=tuple`` fields read as ``Iterable[_T_co]`` to mypy's attrs plugin."""
    return value


class _Lazy(click.Group):
    """A group whose ``mcp`` and ``serve`` subcommands are imported only when used: the
    MCP SDK and the server's Starlette take longer to import than everything else."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "mcp": ("helikon.cli._mcp", "mcp_group"),
        "serve": ("helikon.cli._serve", "serve_command"),
        "studio": ("helikon.cli._studio", "studio_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            module, attribute = self.LAZY[name]
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)


@click.group(cls=_Lazy, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(package_name="paigasus-helikon", prog_name="helikon")
def app(debug: bool) -> None:
    """Run, chat with, evaluate and serve the agents an agents.toml sidecar declares."""
    _DEBUG["on"] = _DEBUG["on"] or debug


@app.command()
@AGENTS_OPTION
@click.option("--agent", "agent_name", help="The agent to run (default: the alphabetically first).")
@click.option("--json", "as_json", is_flag=True, help="Print the event stream as JSON lines.")
@click.option(
    "--record", type=click.Path(dir_okay=False, path_type=Path), help="Record the run as a trace file."
)
@click.option("--run-id", help="The run's id (default: a fresh random one).")
@click.argument("prompt")
def run(
    agents_file: Path,
    agent_name: str | None,
    as_json: bool,
    record: Path | None,
    run_id: str | None,
    prompt: str,
) -> None:
    """Run one agent once on PROMPT, streaming what it does.

    Text streams as it comes; tool calls, their outputs and handoffs are shown
    as they happen. Exit code 1 when the run fails.
    """
    sidecar = load_sidecar(agents_file)
    agent = sidecar.build(agent_name_of(sidecar, agent_name))
    printer = EventPrinter(console(), console(sys.stderr), json=as_json)
    if run_id is not None and not run_id.strip():
        raise click.BadParameter("must not be empty", param_hint="--run-id")
    live = LiveInterpreter(run_id=run_id)
    recorder = RecordingInterpreter(live) if record is not None else None

    async def go() -> None:
        # Priced from genai-prices when it is installed (the ``prices`` extra).
        ctx = sidecar.context().with_prices(default_prices())
        async for event in agent.run(ctx, prompt, interpreter=recorder or live):
            printer(event)

    trio.run(go)
    if recorder is not None and record is not None:
        recorder.trace.dump(record)
        printer.err.print(f"[dim]recorded {escape(str(record))}[/dim]")
    if printer.failed:
        raise Failed("")  # the printer said why, in one line


@app.command()
@AGENTS_OPTION
@click.option("--agent", "agent_name", help="The agent to start with (default: the alphabetically first).")
def repl(agents_file: Path, agent_name: str | None) -> None:
    """Chat with the sidecar's agents; saving the sidecar reloads it.

    Slash commands: /agent NAME, /agents, /reload, /reset, /help, /quit.
    Ctrl-C cancels the turn in flight (not the session); Ctrl-D quits.
    """
    sidecar = load_sidecar(agents_file)
    name = agent_name_of(sidecar, agent_name)
    sidecar.build(name)  # fail fast: a missing API key before the first prompt
    Repl(agents_file, sidecar, name).loop()


@app.group(name="eval")
def eval_group() -> None:
    """Evaluate a sidecar agent on a dataset."""


def _report_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every ``eval`` command shares: how the report is shown, kept and judged."""
    options = (
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table."),
        click.option(
            "--fail-under",
            type=click.FloatRange(0, 1),
            help="Pass when the mean score is at least this (failed cases alone do not fail the run).",
        ),
        click.option(
            "--max-failures",
            type=click.IntRange(0),
            help="Pass with up to N failed, errored or diverged cases.",
        ),
        click.option("--trace", "trace_target", metavar="sqlite:PATH", help="Record the run in SQLite."),
        click.option(
            "--html",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Write the HTML report here (its trace pages go to traces/ beside it).",
        ),
        click.option(
            "--save",
            type=click.Path(file_okay=False, path_type=Path),
            help="Save the run (report.json, report.html, traces/) for eval rescore / replay.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def _sinks(trace_target: str | None) -> list[SqliteTraceSink]:
    if trace_target is None:
        return []
    kind, _, target = trace_target.partition(":")
    if kind != "sqlite" or not target:
        raise click.BadParameter("must be sqlite:PATH", param_hint="--trace")
    return [SqliteTraceSink(target)]


def _finish(
    report: EvalReport,
    *,
    as_json: bool,
    fail_under: float | None,
    max_failures: int | None,
    html: Path | None,
    save: Path | None,
) -> None:
    """Show, write and judge a report: exit 1 when it misses the bar."""
    out = console()
    if as_json:
        out.file.write(report.to_json() + "\n")
    else:
        out.print(report.render_table(), markup=False)
    if html is not None:
        report.write_html(html)
    if save is not None:
        report.save(save)
    failures = len(report.failures())
    if max_failures is not None and failures > max_failures:
        raise Failed(
            f"{failures} case(s) failed, errored or diverged: more than --max-failures {max_failures}"
        )
    if fail_under is not None:
        if report.mean is None:
            raise Failed(f"no case was scored, so there is no mean to hold to --fail-under {fail_under:g}")
        if report.mean < fail_under:
            raise Failed(f"mean score {report.mean:.3f} is below --fail-under {fail_under:g}")
    elif max_failures is None and failures:
        raise Failed(f"the eval did not pass: {failures} case(s) failed, errored or diverged")
    console(sys.stderr).print("[green]eval passed[/green]")


@eval_group.command(name="run")
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@AGENTS_OPTION
@click.option("--agent", "agent_name", required=True, help="The agent to evaluate.")
@_report_options
@click.option("--concurrency", type=click.IntRange(1), default=1, show_default=True, help="Cases at once.")
def eval_run(
    dataset: Path,
    agents_file: Path,
    agent_name: str,
    as_json: bool,
    fail_under: float | None,
    max_failures: int | None,
    trace_target: str | None,
    html: Path | None,
    save: Path | None,
    concurrency: int,
) -> None:
    """Run DATASET (JSON Lines) against one agent and score it with [eval]'s evaluators.

    Each case gets a freshly built agent (a mock model plays that case's
    scripts). Exit code 1 when any case failed or errored; with --fail-under,
    when the mean score is below it instead; with --max-failures N, when more
    than N cases failed. 2 on bad input.
    """
    sidecar = load_sidecar(agents_file)
    name = agent_name_of(sidecar, agent_name)
    sidecar.build(name)  # fail fast: a missing API key before any case runs
    sinks = _sinks(trace_target)
    cases = EvalDataset.from_jsonl_path(dataset)
    evaluation = EvalRun(
        dataset=cases,
        agent_factory=lambda case: sidecar.build(name, case.id),
        ctx_factory=lambda case: sidecar.context(),
        evaluators=_any(tuple(sidecar.eval.build())),
        concurrency=concurrency,
        sinks=_any(tuple(sinks)),
        name=f"{name} on {dataset.name}",
        progress=not as_json,
    )
    report = evaluation.run_sync()
    _finish(report, as_json=as_json, fail_under=fail_under, max_failures=max_failures, html=html, save=save)


def _saved(run: Path, dataset: Path | None) -> tuple[EvalReport, EvalDataset]:
    """A saved run and the dataset to score it on (by default the cases it saved)."""
    report = EvalReport.load(run)
    if dataset is not None:
        return report, EvalDataset.from_jsonl_path(dataset)
    return report, EvalDataset(_any(tuple(case.case for case in report.cases)))


@eval_group.command(name="rescore")
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, path_type=Path))
@AGENTS_OPTION
@click.option(
    "--dataset",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Score against this dataset (default: the cases the run saved).",
)
@_report_options
def eval_rescore(
    run_dir: Path,
    agents_file: Path,
    dataset: Path | None,
    as_json: bool,
    fail_under: float | None,
    max_failures: int | None,
    trace_target: str | None,
    html: Path | None,
    save: Path | None,
) -> None:
    """Score a saved run (a directory --save wrote) again with [eval]'s evaluators.

    No agent and no model run: each case's outcome comes from its saved
    trace. Exit codes as for eval run.
    """
    sidecar = load_sidecar(agents_file)
    saved, cases = _saved(run_dir, dataset)
    evaluation = EvalRun(
        dataset=cases,
        evaluators=_any(tuple(sidecar.eval.build())),
        sinks=_any(tuple(_sinks(trace_target))),
        name=f"rescore of {saved.run_id}",
        progress=not as_json,
    )
    report = evaluation.rescore_sync(saved)
    _finish(report, as_json=as_json, fail_under=fail_under, max_failures=max_failures, html=html, save=save)


@eval_group.command(name="replay")
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, path_type=Path))
@AGENTS_OPTION
@click.option("--agent", "agent_name", required=True, help="The agent to replay the traces against.")
@click.option(
    "--dataset",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Score against this dataset (default: the cases the run saved).",
)
@click.option("--loose", is_flag=True, help="Compare only effect kinds, turns and tool calls.")
@_report_options
def eval_replay(
    run_dir: Path,
    agents_file: Path,
    agent_name: str,
    dataset: Path | None,
    loose: bool,
    as_json: bool,
    fail_under: float | None,
    max_failures: int | None,
    trace_target: str | None,
    html: Path | None,
    save: Path | None,
) -> None:
    """Replay a saved run's traces against a sidecar agent, offline, and score them.

    A case whose agent no longer does what was recorded is reported as
    diverged (and fails the run). Exit codes as for eval run.
    """
    sidecar = load_sidecar(agents_file)
    name = agent_name_of(sidecar, agent_name)
    saved, cases = _saved(run_dir, dataset)
    evaluation = EvalRun(
        dataset=cases,
        agent_factory=lambda case: sidecar.build(name, case.id),
        ctx_factory=lambda case: sidecar.context(),
        evaluators=_any(tuple(sidecar.eval.build())),
        sinks=_any(tuple(_sinks(trace_target))),
        name=f"{name}: replay of {saved.run_id}",
        progress=not as_json,
    )
    report = evaluation.replay_sync(saved, strict=not loose)
    _finish(report, as_json=as_json, fail_under=fail_under, max_failures=max_failures, html=html, save=save)


@app.group(name="trace")
def trace_group() -> None:
    """Look at recorded traces."""


@trace_group.command(name="show")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def trace_show(file: Path) -> None:
    """Print FILE as a readable timeline: each effect, its result and the events it brought."""
    out = console()
    for line in timeline(Trace.load(file)):
        out.print(line, markup=False)


@trace_group.command(name="diff")
@click.argument("expected", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("actual", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--exact", is_flag=True, help="Compare every byte: run ids, call ids and timestamps too.")
def trace_diff_command(expected: Path, actual: Path, exact: bool) -> None:
    """Compare two traces field by field (the diff replay divergences use). Exit 1 when they differ.

    Compares behaviour: run ids, the call ids derived from them, provider
    response ids and timestamps are normalised first (--exact compares them too).
    """
    lines = trace_diff(Trace.load(expected), Trace.load(actual), exact=exact)
    out = console()
    if not lines:
        out.print("the traces agree")
        return
    out.print(f"differences (expected = {escape(str(expected))}, got = {escape(str(actual))}):")
    for line in lines:
        out.print(line, markup=False)
    raise Failed(f"{len(lines)} difference line(s)")


@app.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@AGENTS_OPTION
@click.option("--agent", "agent_name", help="The agent to replay (default: the one the trace recorded).")
@click.option("--loose", is_flag=True, help="Compare only effect kinds, turns and tool calls.")
@click.option(
    "--live-tools",
    is_flag=True,
    help="Run the tools and dynamic instructions for real (the model is still replayed).",
)
def replay(file: Path, agents_file: Path, agent_name: str | None, loose: bool, live_tools: bool) -> None:
    """Replay the trace FILE against a sidecar agent, offline (no model; no tools
    unless --live-tools).

    Exit code 1, with the divergence, when the agent no longer does what was recorded.
    """
    trace = Trace.load(file)
    sidecar = load_sidecar(agents_file)
    agent = sidecar.build(agent_name or trace.header.agent)
    out = console()
    interpreter = ReplayInterpreter(trace, strict=not loose, live_tools=live_tools)

    async def go() -> None:
        async for _ in agent.run(sidecar.context(), AgentInput(trace.header.input), interpreter=interpreter):
            pass

    try:
        trio.run(go)
    except ReplayDivergence as exc:
        console(sys.stderr).print(str(exc), markup=False)
        raise Failed("the replay diverged from the recording") from None
    out.print(f"replay matches the recording ({len(trace.steps)} steps)")


def _warning_printer(err: Console) -> Callable[..., None]:
    """Warnings as one line each (``warning: ...``), not Python's category and source path."""

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        if _DEBUG["on"]:
            err.print(f"[dim]({escape(category.__name__)})[/dim]", end=" ")
        err.print(f"[yellow]warning:[/yellow] {escape(str(message))}")

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """The ``helikon`` console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _DEBUG["on"] = os.environ.get("HELIKON_DEBUG", "") not in ("", "0") or "--debug" in args
    err = console(sys.stderr)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _warning_printer(err)
            result = app.main(args, prog_name="helikon", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Abort:
        err.print("aborted")
        return 130
    except click.ClickException as exc:
        if isinstance(exc, Failed):
            if exc.format_message():
                err.print(f"[red]{escape(exc.format_message())}[/red]")
        else:
            exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except (HelikonError, OSError, ValueError) as exc:
        if _DEBUG["on"]:
            err.print_exception()
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except Exception as exc:
        if _DEBUG["on"]:
            raise
        err.print(
            f"[red]internal error:[/red] {escape(type(exc).__name__)}: {escape(str(exc))}"
            " (--debug shows where)"
        )
        return 2


__all__ = ["app", "main"]
