"""``helikon repl``: an interactive session against the sidecar, hot-reloading it.

A watcher thread polls the modification times of the sidecar and every file
it references; a change that then stays put for :data:`DEBOUNCE` seconds
reloads the definitions. A reload that fails (bad TOML, a dangling
reference, a handoff cycle, a script that does not parse) is reported and
the last good definitions stay. Each turn builds its agent from the
definitions current when it starts, so a reload never touches the turn in
flight. The conversation is kept in a :class:`~helikon.MemorySession`
(``/reset`` starts a new one); Ctrl-C during a turn cancels that run through
its cancellation token, not the session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import trio
from rich.markup import escape

from helikon.cancel import CancellationToken
from helikon.cli._render import EventPrinter, console
from helikon.cli._sidecar import Sidecar, load_sidecar
from helikon.errors import HelikonError
from helikon.events import AgentUpdated
from helikon.sessions import MemorySession

try:  # line editing and history where the platform has it
    import readline
except ImportError:  # pragma: no cover - Windows without pyreadline
    readline = None  # type: ignore[assignment]

#: How long a change must stay put before it is reloaded, in seconds.
DEBOUNCE = 0.3
#: How often the watcher looks at the files, in seconds.
POLL = 0.05

HELP = """\
/agent NAME   switch to agent NAME (the conversation goes on)
/agents       list the agents (* marks the current one)
/reload       reload the sidecar now
/reset        forget the conversation
/help         this help
/quit         leave (Ctrl-D too); Ctrl-C cancels a turn in flight"""


def _stamps(files: tuple[Path, ...]) -> dict[Path, float]:
    found: dict[Path, float] = {}
    for file in files:
        try:
            found[file] = file.stat().st_mtime_ns
        except OSError:
            found[file] = -1
    return found


class Repl:
    """The REPL's state: the current definitions, agent, conversation and watcher."""

    def __init__(self, path: Path, sidecar: Sidecar, agent: str) -> None:
        self.path = path
        self.sidecar = sidecar
        self.agent = agent
        self.session = MemorySession()
        self.out = console()
        self.err = console(sys.stderr)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watched = _stamps(sidecar.files)
        self._turning = False
        self._notices: list[str] = []

    # -- reloading ---------------------------------------------------------

    def _notice(self, markup: str) -> None:
        """Print a notice now, or after the turn in flight (never into a streaming answer)."""
        with self._lock:
            if self._turning:
                self._notices.append(markup)
                return
        self.err.print(markup)

    def _flush_notices(self) -> None:
        with self._lock:
            self._turning = False
            notices, self._notices = self._notices, []
        for markup in notices:
            self.err.print(markup)

    def reload(self, reason: str = "changed") -> bool:
        """Load the sidecar again; keep the last good definitions when it fails."""
        try:
            fresh = load_sidecar(self.path)
        except HelikonError as exc:
            with self._lock:
                self._watched = _stamps((*self.sidecar.files, self.path))
            self._notice(f"[red]reload failed: {escape(str(exc))}[/red]")
            self._notice("[yellow]keeping the last good definitions[/yellow]")
            return False
        with self._lock:
            self.sidecar = fresh
            self._watched = _stamps(fresh.files)
            gone = self.agent not in fresh.agent_names
            if gone:
                was, self.agent = self.agent, fresh.default_agent
        if gone:
            self._notice(f"[yellow]agent {escape(was)} is gone; now {fresh.default_agent}[/yellow]")
        self._notice(
            f"[green]reloaded {escape(self.path.name)} ({reason}): {', '.join(fresh.agent_names)}[/green]"
        )
        return True

    def _watch(self) -> None:
        pending: dict[Path, float] | None = None
        since = 0.0
        while not self._stop.wait(POLL):
            with self._lock:
                watched = self._watched
            now = _stamps(tuple(watched))
            if now == watched:
                pending = None
                continue
            if now != pending:
                pending, since = now, time.monotonic()
            elif time.monotonic() - since >= DEBOUNCE:
                pending = None
                self.reload("saved")

    # -- turns -------------------------------------------------------------

    def turn(self, text: str) -> None:
        """Run the current agent on ``text``; Ctrl-C cancels it."""
        with self._lock:
            sidecar, name = self.sidecar, self.agent
        try:
            agent = sidecar.build(name)
        except HelikonError as exc:
            self.err.print(f"[red]{escape(str(exc))}[/red]")
            return
        with self._lock:
            self._turning = True
        try:
            self._turn(agent, text, sidecar)
        finally:
            self._flush_notices()

    def _turn(self, agent: Any, text: str, sidecar: Sidecar) -> None:
        token = CancellationToken()
        ctx = sidecar.context().with_session(self.session).with_cancel(token)
        printer = EventPrinter(self.out, self.err, quiet_cancel=True)

        async def go() -> None:
            trio_token = trio.lowlevel.current_trio_token()

            def interrupt(signum: int, frame: FrameType | None) -> None:
                trio_token.run_sync_soon(token.cancel)

            previous = signal.signal(signal.SIGINT, interrupt)
            try:
                async for event in agent.run(ctx, text):
                    printer(event)
                    if isinstance(event, AgentUpdated) and event.agent in sidecar.agents:
                        self._follow(event.agent)
            finally:
                signal.signal(signal.SIGINT, previous)

        try:
            trio.run(go)
        except KeyboardInterrupt:
            printer.newline()
        except HelikonError as exc:
            printer.newline()
            self.err.print(f"[red]{escape(str(exc))}[/red]")
        if token.cancelled:
            printer.newline()
            self.err.print("[yellow]turn cancelled[/yellow]")

    def _follow(self, agent: str) -> None:
        """After a handoff the conversation goes on with the agent it went to."""
        with self._lock:
            self.agent = agent

    # -- commands ----------------------------------------------------------

    def command(self, line: str) -> bool:
        """Handle a slash command; False means quit."""
        word, _, rest = line[1:].strip().partition(" ")
        match word:
            case "quit" | "exit" | "q":
                return False
            case "help" | "?":
                self.out.print(HELP, markup=False)
            case "agents":
                with self._lock:
                    sidecar, current = self.sidecar, self.agent
                for name in sidecar.agent_names:
                    mark = "*" if name == current else " "
                    description = sidecar.description(name)
                    self.out.print(
                        f"{mark} {name}" + (f" - {description}" if description else ""), markup=False
                    )
            case "agent":
                name = rest.strip()
                with self._lock:
                    known = name in self.sidecar.agent_names
                    if known:
                        self.agent = name
                if known:
                    self.out.print(f"now talking to {name}", markup=False)
                else:
                    self.err.print(f"[red]no agent {escape(name)!r}; /agents lists them[/red]")
            case "reload":
                self.reload("/reload")
            case "reset":
                self.session = MemorySession()
                self.out.print("conversation reset")
            case _:
                self.err.print(f"[red]unknown command /{escape(word)}; /help lists them[/red]")
        return True

    def prompt(self) -> str:
        with self._lock:
            return f"{self.agent}> "

    def loop(self, read: Callable[[str], str] = input) -> None:
        """Read, run, repeat, until /quit or end of input."""
        history = Path(os.environ.get("HELIKON_HISTORY", Path.home() / ".helikon_history"))
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.read_history_file(history)
        watcher = threading.Thread(target=self._watch, name="helikon-reload", daemon=True)
        watcher.start()
        self.out.print(
            f"helikon repl: {', '.join(self.sidecar.agent_names)}; /help for commands", markup=False
        )
        try:
            while True:
                try:
                    line = read(self.prompt()).strip()
                except EOFError:
                    self.out.print()
                    break
                except KeyboardInterrupt:
                    self.out.print("\n(Ctrl-D or /quit leaves)", markup=False)
                    continue
                if not line:
                    continue
                if line.startswith("/"):
                    if not self.command(line):
                        break
                    continue
                self.turn(line)
        finally:
            self._stop.set()
            if readline is not None:
                with contextlib.suppress(OSError):
                    readline.write_history_file(history)


__all__ = ["DEBOUNCE", "HELP", "Repl"]
