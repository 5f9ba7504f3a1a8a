"""The studio's runs: trace files found on disk and runs recorded by the studio.

Each run gets an opaque id (a hash of where it came from), so the API never
takes a path from a client: a run is looked up in the catalogue, never opened
by a name a request chose. Traces are read with :class:`helikon.trace.Trace`
(never as raw JSON), so the studio follows the trace format wherever it goes.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, final

import attrs

from helikon import codec
from helikon.effects import AllPerformed, CallModel, Effect, EffectResult, PerformAll
from helikon.events import AgentEvent, RunCompleted, RunFailed
from helikon.trace import Trace, TraceFormatError

#: The most trace files listed from one directory (the first, by path).
MAX_FILES = 2000
#: The most runs recorded by the studio kept (in memory; the oldest go first).
MAX_RECORDED = 1000


@attrs.frozen
class RunEntry:
    """A run the studio knows: where it came from and (once read) its trace."""

    id: str
    source: str  # "traces", "golden" or "studio"
    name: str
    time: float  # seconds since the epoch: the file's mtime, or when the run ended
    path: Path | None = None
    trace: Trace | None = attrs.field(default=None, eq=False)
    #: A fork's parent run (its studio id), and how it was forked (see ``_fork``).
    parent: str | None = None
    fork: dict[str, Any] | None = attrs.field(default=None, eq=False)


def _run_id(source: str, name: str) -> str:
    return hashlib.sha256(f"{source}\0{name}".encode()).hexdigest()[:20]


def run_id_of(source: str, path: Path) -> str:
    """The run list's id of the trace file at ``path`` listed from a directory of ``source``."""
    return _run_id(source, str(path.resolve()))


def _walk_calls(effect: Effect) -> Iterable[Effect]:
    yield effect
    if isinstance(effect, PerformAll):
        for at in effect.effects:
            yield from _walk_calls(at.effect)


def status_of(trace: Trace) -> str:
    """``completed``, ``failed``, ``cancelled``, ``suspended`` (at an approval) or ``incomplete``."""
    for event in reversed(trace.final_events):
        if isinstance(event, RunCompleted):
            return "completed"
        if isinstance(event, RunFailed):
            return "cancelled" if type(event.error).__name__ == "Cancelled" else "failed"
    if trace.steps and type(trace.steps[-1].effect).__name__ == "AwaitApproval":
        return "suspended"
    return "incomplete"


def summary(entry: RunEntry, trace: Trace) -> dict[str, Any]:
    """The run list's row: agent, status, turns (model calls, sub-agents' too), tokens, time."""
    usage = next(
        (e.usage for e in reversed(trace.final_events) if isinstance(e, RunCompleted | RunFailed)), None
    )
    turns = sum(isinstance(e, CallModel) for step in trace.steps for e in _walk_calls(step.effect))
    return {
        "id": entry.id,
        "source": entry.source,
        "name": entry.name,
        "agent": trace.header.agent,
        "run_id": trace.header.run_id,
        "status": status_of(trace),
        "steps": len(trace.steps),
        "turns": turns,
        "input_tokens": None if usage is None else usage.input_tokens,
        "output_tokens": None if usage is None else usage.output_tokens,
        "time": datetime.fromtimestamp(entry.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "parent": entry.parent,
    }


def _event(event: AgentEvent) -> dict[str, Any]:
    data: dict[str, Any] = codec.unstructure(event, AgentEvent)
    return data


def _node(
    path: tuple[str | int, ...], effect: Effect, result: EffectResult | None, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """One step (or one agent's part of a wave), with its sub-agents' steps
    nested; the events stay with the wave's step (they are not tagged by agent)."""
    children: list[dict[str, Any]] = []
    if isinstance(effect, PerformAll):
        results = {r.path: r.result for r in result.results} if isinstance(result, AllPerformed) else {}
        for at in effect.effects:
            children.append(_node((*path, *at.path), at.effect, results.get(at.path), []))
    return {
        "path": [str(p) for p in path],
        "effect_type": type(effect).__name__,
        "result_type": None if result is None else type(result).__name__,
        "effect": codec.unstructure(effect, Effect),
        "result": None if result is None else codec.unstructure(result, EffectResult),
        "events": events,
        "children": children,
    }


def timeline(entry: RunEntry, trace: Trace) -> dict[str, Any]:
    """The run page's data: the summary, the input, and every step with the
    events it brought (see :meth:`Trace.events_by_step`), a wave's agents nested."""
    start, per_step, end = trace.events_by_step()
    steps = []
    previous: float | None = trace.header.started
    for step, events in zip(trace.steps, per_step, strict=True):
        node = _node(tuple(step.path), step.effect, step.result, [_event(e) for e in events])
        node["index"] = step.index
        node["now"] = step.now
        node["elapsed"] = None if step.now is None or previous is None else step.now - previous
        previous = step.now if step.now is not None else previous
        steps.append(node)
    return {
        "run": summary(entry, trace),
        "fingerprint": trace.header.fingerprint,
        "input": [codec.unstructure(item) for item in trace.header.input],
        "start": [_event(e) for e in start],
        "steps": steps,
        "end": [_event(e) for e in end],
    }


@final
class Catalogue:
    """Trace files under the given directories, plus runs recorded by the studio.

    Files are re-listed on every :meth:`entries` call (a trace written while
    the studio runs shows up) and read when first asked for; a file that is
    not a trace is listed with its error, never fails the list.
    """

    def __init__(self, directories: Iterable[tuple[str, Path]] = ()) -> None:
        self.directories = tuple(directories)
        self._recorded: dict[str, RunEntry] = {}
        self._files: dict[str, RunEntry] = {}
        self._lock = threading.Lock()

    def add(
        self, trace: Trace, when: float, *, parent: RunEntry | None = None, fork: dict[str, Any] | None = None
    ) -> RunEntry:
        """Keep a run the studio recorded (a fork of ``parent``: ``fork`` says how); returns its entry."""
        if parent is None:
            entry = RunEntry(
                _run_id("studio", trace.header.run_id), "studio", trace.header.run_id, when, None, trace
            )
        else:
            with self._lock:
                number = 1 + sum(e.parent == parent.id for e in self._recorded.values())
            name = f"fork {number} of {parent.name}"
            entry = RunEntry(
                _run_id("fork", f"{parent.id}/{number}/{when}"),
                "fork",
                name,
                when,
                None,
                trace,
                parent.id,
                fork,
            )
        with self._lock:
            self._recorded[entry.id] = entry
            while len(self._recorded) > MAX_RECORDED:
                del self._recorded[next(iter(self._recorded))]
        return entry

    def _scan(self) -> dict[str, RunEntry]:
        found: dict[str, RunEntry] = {}
        for source, directory in self.directories:
            if not directory.is_dir():
                continue
            files = sorted(directory.rglob("*.jsonl"), key=lambda p: str(p))[:MAX_FILES]
            for path in files:
                try:
                    mtime = path.stat().st_mtime
                except OSError:
                    continue
                name = str(path.relative_to(directory))
                run_id = run_id_of(source, path)
                known = self._files.get(run_id)
                if known is not None and known.time == mtime:
                    found[run_id] = known
                else:
                    found[run_id] = RunEntry(run_id, source, name, mtime, path)
        return found

    def entries(self) -> list[RunEntry]:
        """Every run, newest first."""
        with self._lock:
            self._files = self._scan()
            every = [*self._recorded.values(), *self._files.values()]
        return sorted(every, key=lambda e: (-e.time, e.name))

    def get(self, run_id: str) -> RunEntry | None:
        with self._lock:
            entry = self._recorded.get(run_id) or self._files.get(run_id)
        if entry is None:
            self.entries()
            with self._lock:
                entry = self._recorded.get(run_id) or self._files.get(run_id)
        return entry

    def load(self, entry: RunEntry) -> Trace:
        """The entry's trace (read once per file version).

        Raises:
            TraceFormatError: the file is not a readable trace.
        """
        if entry.trace is not None:
            return entry.trace
        assert entry.path is not None
        try:
            trace = Trace.load(entry.path)
        except OSError as exc:
            raise TraceFormatError(f"{entry.name}: cannot be read: {exc}") from None
        loaded = attrs.evolve(entry, trace=trace)
        with self._lock:
            if self._files.get(entry.id) is entry:
                self._files[entry.id] = loaded
        return trace


__all__ = [
    "MAX_FILES",
    "MAX_RECORDED",
    "Catalogue",
    "RunEntry",
    "run_id_of",
    "status_of",
    "summary",
    "timeline",
]
