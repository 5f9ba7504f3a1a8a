"""The studio's time travel: the machine state after any step, forks, and diffs.

Routes (added to the studio's app by :func:`fork_routes`):

- ``GET /api/runs/{id}/lineage``: whether the run can be forked (the studio
  serves its agent), its parent and how it was forked (each step replayed,
  edited or live; where it left the recording), and its forks;
- ``GET /api/runs/{id}/state/{step}``: the machine's state after ``step``
  (``-1``: before the first), as :func:`helikon.dump_state` writes it,
  recomputed with :func:`helikon.forks.state_after` (no IO), secrets redacted;
- ``POST /api/runs/{id}/fork``: ``{"step": k, "answer": <the step's result,
  edited>, "mode": "replay" | "live"}`` or ``{"step": null, "input": "<another
  user message>"}``: runs the fork with :func:`helikon.forks.fork` and keeps
  it as a new run linked to its parent; answers ``{"id": ...}``;
- ``GET /api/diff?a=ID&b=ID``: two runs' events, steps and final output
  compared with :func:`helikon.diff.diff`, by the same field paths as
  :class:`~helikon.interpreters.ReplayDivergence` (``events[3].item.content``).

The library code is :mod:`helikon.forks`; this module only finds the run's
agent, reads the request and shapes the answer.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from helikon import codec
from helikon.diff import diff
from helikon.effects import Effect, EffectResult
from helikon.errors import HelikonError
from helikon.events import AgentEvent, MessageOutput
from helikon.forks import Forked, fork, state_after
from helikon.governance import redact_values
from helikon.interpreters import ReplayDivergence
from helikon.interpreters._recording import secrets_of
from helikon.snapshots import StateFormatError, dump_state
from helikon.steps import prepare
from helikon.studio._catalog import RunEntry, summary
from helikon.trace import Trace, TraceFormatError

if TYPE_CHECKING:
    from helikon.studio._app import Studio

#: The largest fork request body read (an edited answer).
MAX_BODY = 1 << 20


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact_values(value, secrets) if secrets else value
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, secrets) for k, v in value.items()}
    return value


def _final_output(trace: Trace) -> Any:
    """The run's last assistant message (what ``collect`` calls its output), as JSON."""
    said = [e.item for e in trace.events if isinstance(e, MessageOutput)]
    if not said:
        return None
    text = "".join(getattr(part, "text", "") for part in said[-1].content)
    return text


def _lines(differences: list[str]) -> list[dict[str, str]]:
    """``path: expected X, got Y`` lines as ``{"path", "text"}``."""
    rows = []
    for line in differences:
        path, _, rest = line.partition(": ")
        rows.append({"path": path, "text": rest, "line": line})
    return rows


def diff_runs(a: Trace, b: Trace) -> dict[str, Any]:
    """Two runs compared: events, steps (effects and results) and final output,
    each difference named by its field path."""
    events = diff(
        [codec.unstructure(e, AgentEvent) for e in a.events],
        [codec.unstructure(e, AgentEvent) for e in b.events],
        "events",
    )
    steps = diff(
        [
            {
                "effect": codec.unstructure(s.effect, Effect),
                "result": codec.unstructure(s.result, EffectResult),
            }
            for s in a.steps
        ],
        [
            {
                "effect": codec.unstructure(s.effect, Effect),
                "result": codec.unstructure(s.result, EffectResult),
            }
            for s in b.steps
        ],
        "steps",
    )
    out_a, out_b = _final_output(a), _final_output(b)
    return {
        "output": {"a": out_a, "b": out_b, "differences": _lines(diff(out_a, out_b, "output"))},
        "events": _lines(events),
        "steps": _lines(steps),
        "same": not events and not steps and out_a == out_b,
    }


def _fork_info(forked: Forked, step: int | None, mode: str, edited: str) -> dict[str, Any]:
    return {
        "step": step,
        "mode": mode,
        "edited": edited,
        "suspended": forked.suspended,
        "marks": [
            {"index": m.index, "how": m.how, "parts": [{"path": list(p), "how": h} for p, h in m.parts]}
            for m in forked.marks
        ],
        "divergences": [
            {"step": d.step, "message": str(d), "differences": _lines(list(d.differences))}
            for d in forked.divergences
        ],
    }


class ForkViews:
    """The routes above, over a studio's catalogue and agents."""

    def __init__(self, studio: Studio) -> None:
        self.studio = studio

    def _agent(self, trace: Trace) -> Any:
        name = trace.header.agent
        return next((a for a in self.studio.agents if getattr(a, "name", None) == name), None)

    @staticmethod
    def _why_not(trace: Trace) -> str:
        return (
            "this needs the agent that made the run: start the studio with --agents or --app "
            f"serving an agent named {trace.header.agent!r}"
        )

    def _no_agent(self, trace: Trace) -> JSONResponse:
        return _error(409, "no_agent", self._why_not(trace))

    async def _context(self, request: Request) -> Any:
        context = self.studio.context
        if context is None or hasattr(context, "with_session"):
            return context
        made = context(request, None)
        return await made if inspect.isawaitable(made) else made

    async def _run(self, request: Request) -> tuple[RunEntry, Trace] | JSONResponse:
        entry = self.studio.catalogue.get(str(request.path_params["run_id"]))
        if entry is None:
            return _error(404, "not_found", "no such run")
        try:
            trace = await anyio.to_thread.run_sync(self.studio.catalogue.load, entry)
        except TraceFormatError as exc:
            return _error(422, "not_a_trace", str(exc))
        return entry, trace

    async def lineage(self, request: Request) -> JSONResponse:
        """``GET /api/runs/{id}/lineage``."""
        found = await self._run(request)
        if isinstance(found, JSONResponse):
            return found
        entry, trace = found
        catalogue = self.studio.catalogue
        parent = catalogue.get(entry.parent) if entry.parent is not None else None
        children = [
            {"id": e.id, "name": e.name}
            for e in await anyio.to_thread.run_sync(catalogue.entries)
            if e.parent == entry.id
        ]
        agent = self._agent(trace)
        return JSONResponse(
            {
                "forkable": agent is not None,
                "reason": None if agent is not None else self._why_not(trace),
                "parent": None if parent is None else {"id": parent.id, "name": parent.name},
                "fork": entry.fork,
                "children": children,
            }
        )

    async def state(self, request: Request) -> JSONResponse:
        """``GET /api/runs/{id}/state/{step}``."""
        found = await self._run(request)
        if isinstance(found, JSONResponse):
            return found
        _, trace = found
        try:
            step = int(str(request.path_params["step"]))
        except ValueError:
            return _error(422, "bad_step", "the step must be a number")
        agent = self._agent(trace)
        if agent is None:
            return self._no_agent(trace)
        ctx = await self._context(request)

        def compute() -> Any:
            state = state_after(agent, trace, step, ctx)
            secrets = secrets_of(prepare(agent, ctx))
            return _redacted(json.loads(dump_state(state)), secrets)

        try:
            data = await anyio.to_thread.run_sync(compute)
        except ValueError as exc:
            return _error(422, "bad_step", str(exc))
        except StateFormatError as exc:
            return _error(422, "no_state", str(exc))
        except Exception as exc:  # the agent no longer fits its recording
            return _error(409, "not_this_agent", f"the machine refused the recorded answers: {exc}")
        return JSONResponse({"step": step, "snapshot": data})

    async def fork(self, request: Request) -> JSONResponse:
        """``POST /api/runs/{id}/fork``."""
        found = await self._run(request)
        if isinstance(found, JSONResponse):
            return found
        entry, trace = found
        body = await request.body()
        if len(body) > MAX_BODY:
            return _error(413, "too_large", f"a fork request holds at most {MAX_BODY} bytes")
        try:
            asked = json.loads(body)
        except ValueError:
            return _error(422, "bad_json", "the request body is not JSON")
        if not isinstance(asked, dict):
            return _error(422, "bad_request", "the request body must be a JSON object")
        mode = asked.get("mode", "replay")
        if mode not in ("replay", "live"):
            return _error(422, "bad_mode", "mode is 'replay' or 'live'")
        step = asked.get("step")
        if step is not None and (
            isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(trace.steps)
        ):
            return _error(422, "bad_step", f"step must be a step of the run (0 to {len(trace.steps) - 1})")
        answer: EffectResult | None = None
        if step is not None and asked.get("answer") is not None:
            try:
                answer = codec.structure(asked["answer"], EffectResult)
            except Exception as exc:
                return _error(
                    422,
                    "bad_answer",
                    f"the edited answer is not a result: {codec.structure_error(exc, 'answer')}",
                )
        text = asked.get("input")
        if text is not None and not isinstance(text, str):
            return _error(422, "bad_input", "input must be text")
        if step is None and text is None:
            return _error(422, "bad_request", "give a step (and its edited answer) or another input")
        agent = self._agent(trace)
        if agent is None:
            return self._no_agent(trace)
        ctx = await self._context(request)
        try:
            forked = await fork(agent, trace, step, answer, ctx=ctx, input=text, replay=mode == "replay")
        except ReplayDivergence as exc:
            return _error(409, "diverged_before", str(exc))
        except HelikonError as exc:  # the machine refused the edited answer (it answers another effect)
            return _error(422, "refused", f"the run cannot take that answer: {exc}")
        edited = "input" if text is not None else ("answer" if answer is not None else "nothing")
        info = _fork_info(forked, step, mode, edited)
        kept = self.studio.catalogue.add(forked.trace, time.time(), parent=entry, fork=info)
        return JSONResponse(
            {"id": kept.id, "run": summary(kept, forked.trace), "fork": info}, status_code=201
        )

    async def diff(self, request: Request) -> JSONResponse:
        """``GET /api/diff?a=ID&b=ID``."""
        traces: list[tuple[RunEntry, Trace]] = []
        for key in ("a", "b"):
            entry = self.studio.catalogue.get(request.query_params.get(key, ""))
            if entry is None:
                return _error(404, "not_found", f"no such run: {key}")
            try:
                traces.append((entry, await anyio.to_thread.run_sync(self.studio.catalogue.load, entry)))
            except TraceFormatError as exc:
                return _error(422, "not_a_trace", str(exc))
        (ea, ta), (eb, tb) = traces
        compared = await anyio.to_thread.run_sync(diff_runs, ta, tb)
        return JSONResponse({"a": summary(ea, ta), "b": summary(eb, tb), **compared})


def fork_routes(studio: Studio) -> list[Route]:
    """The time-travel routes of ``studio``'s app."""
    views = ForkViews(studio)
    return [
        Route("/api/runs/{run_id}/lineage", views.lineage, methods=["GET"]),
        Route("/api/runs/{run_id}/state/{step}", views.state, methods=["GET"]),
        Route("/api/runs/{run_id}/fork", views.fork, methods=["POST"]),
        Route("/api/diff", views.diff, methods=["GET"]),
    ]


__all__ = ["ForkViews", "diff_runs", "fork_routes"]
