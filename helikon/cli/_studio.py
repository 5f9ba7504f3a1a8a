"""``helikon studio``: the local web UI (:mod:`helikon.studio`) on 127.0.0.1.

It lists the traces of ``--traces`` directories and the project's
``tests/golden`` traces, shows each run step by step, and chats with the
agents of ``--agents agents.toml`` or ``--app module:attr`` (every run recorded).
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
from pathlib import Path
from typing import Any

import click
import trio
from rich.markup import escape

from helikon.cli._render import console
from helikon.cli._sidecar import load_sidecar

#: Where a project keeps its golden traces (listed when the directory exists).
GOLDEN = Path("tests/golden")
#: Where else a project may keep them (the first that exists is listed).
GOLDEN_ALTERNATIVES = (GOLDEN, Path("tests/goldens"))


def load_app(spec: str) -> Any:
    """The object ``module:attr`` names (the current directory importable)."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise click.BadParameter("must be module:attr", param_hint="--app")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {spec}: {exc}", param_hint="--app") from None
    return value


@click.command(name="studio")
@click.option(
    "--agents",
    "agents_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An agents.toml sidecar whose agents to chat with.",
)
@click.option("--app", "app_spec", help="module:attr naming an AgentServer, an agent or a list of agents.")
@click.option(
    "--traces",
    "trace_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A directory of trace files (*.jsonl) to list (repeatable).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="The port.")
@click.option(
    "--evals",
    "eval_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A directory of saved eval runs (helikon eval run --save; repeatable).",
)
@click.option(
    "--sessions",
    "sessions_spec",
    help="The session backend to browse: sqlite:PATH (or a .db file), postgresql://..., redis://... "
    "(default: the studio's own chat sessions).",
)
def studio_command(
    agents_file: Path | None,
    app_spec: str | None,
    trace_dirs: tuple[Path, ...],
    port: int,
    eval_dirs: tuple[Path, ...] = (),
    sessions_spec: str | None = None,
) -> None:
    """Open runs step by step and chat with agents, in a web UI on 127.0.0.1.

    It listens on this machine only and refuses requests from other origins.
    Ctrl-C stops it.
    """
    try:
        from helikon.server import AgentServer
        from helikon.studio import Studio, agents_of
    except ImportError as exc:
        raise click.UsageError(f"{exc} (helikon studio needs it)") from None
    if agents_file is not None and app_spec is not None:
        raise click.UsageError("give --agents or --app, not both")
    agents: tuple[Any, ...] = ()
    context: Any = None
    loaded: Any = None
    title = "helikon studio"
    if agents_file is not None:
        sidecar = load_sidecar(agents_file)
        agents = tuple(sidecar.build(name) for name in sidecar.agent_names)
        context = sidecar.context()
        title = f"helikon studio: {agents_file.name}"
    elif app_spec is not None:
        try:
            loaded = load_app(app_spec)
            agents, context = agents_of(loaded)
        except TypeError as exc:
            raise click.BadParameter(str(exc), param_hint="--app") from None
    golden = next((d for d in GOLDEN_ALTERNATIVES if d.is_dir()), None)
    sessions: Any = None
    if sessions_spec is not None:
        from helikon.studio import browser_for

        try:
            sessions = browser_for(sessions_spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--sessions") from None
    studio = Studio(
        agents=agents,
        context=context,
        traces=trace_dirs,
        golden=golden,
        title=title,
        evals=eval_dirs,
        sessions=sessions,
        chat_sessions=loaded.sessions if isinstance(loaded, AgentServer) else None,
    )

    async def go() -> None:
        # Ctrl-C (and SIGTERM) stop the server through its cancel scope: a
        # KeyboardInterrupt raised inside a connection's task would fail it instead.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(studio.serve, port)
                console(sys.stderr).print(f"helikon studio at {escape(str(url))}/ (Ctrl-C stops it)")
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    with contextlib.suppress(KeyboardInterrupt):  # a Ctrl-C before the receiver was installed
        trio.run(go)
    console(sys.stderr).print("helikon studio stopped")


__all__ = ["load_app", "studio_command"]
