"""The studio's regression view: replay a recorded run against the current
code (strict, loose, or with live tools) and say where it first diverges.

``POST /api/runs/{id}/replay`` (body ``{"mode": "strict" | "loose" |
"live_tools", "agent": name?}``) replays the run's trace with a
:class:`~helikon.interpreters.ReplayInterpreter` against the studio's agent
of the recorded name (or ``agent``; for an agent tree, the studio's agent
among the tree's), from the recorded input, and answers
with the outcome: ``matches`` (with the step count), ``diverged`` (the step,
the headline, and every :class:`~helikon.interpreters.ReplayDivergence`
field path split into ``path``/``expected``/``actual``), or ``error`` (no
such agent, the run failed otherwise). A golden trace's answer also carries
the command that re-records it.

What the replay shows is scrubbed of the run's secrets (its agents' and the
context's), as a trace is.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, Final, final

import anyio

from helikon.effects import Effect, EffectResult
from helikon.errors import HelikonError
from helikon.events import AgentEvent
from helikon.governance import redact_values
from helikon.ids import RunId
from helikon.interpreters import ReplayDivergence, ReplayInterpreter
from helikon.interpreters._env import RunEnv
from helikon.interpreters._recording import secrets_of
from helikon.items import AgentInput
from helikon.trace import Trace

#: The replay modes the view offers: (strict, live_tools) of each.
MODES: Final = {"strict": (True, False), "loose": (False, False), "live_tools": (True, True)}
#: The longest a replay may take (seconds); live tools run for real.
REPLAY_TIMEOUT: Final = 120.0
_LINE = re.compile(
    r"^(?P<path>.*?): (?:expected (?P<expected>.*), got (?P<actual>.*)"
    r"|missing \(expected (?P<missing>.*)\)|unexpected (?P<unexpected>.*))$",
    re.DOTALL,
)


def field(line: str) -> dict[str, str | None]:
    """One ``ReplayDivergence.differences`` line as ``{path, expected, actual, line}``
    (``expected`` None: the run has something the recording has not; ``actual``
    None: the recording has something the run has not).

    >>> field("request.instructions: expected 'a', got 'b'")["path"]
    'request.instructions'
    >>> field("events[3]: missing (expected 1)")["actual"] is None
    True
    """
    match = _LINE.match(line)
    if match is None:
        return {"path": None, "expected": None, "actual": None, "line": line}
    if match["missing"] is not None:
        return {"path": match["path"], "expected": match["missing"], "actual": None, "line": line}
    if match["unexpected"] is not None:
        return {"path": match["path"], "expected": None, "actual": match["unexpected"], "line": line}
    return {"path": match["path"], "expected": match["expected"], "actual": match["actual"], "line": line}


def record_command(trace_path: Path, root: Path) -> str:
    """The command that re-records the golden at ``trace_path`` (under ``root``):
    pytest on the nearest directory above it that holds tests, the golden's
    tests selected by its name, ``--helikon-record``."""
    stem = trace_path.stem
    here = trace_path.parent
    stop = root.parent
    tests = root
    while True:
        if any(here.glob("test_*.py")) or any(here.glob("*_test.py")):
            tests = here
            break
        if here == stop or here.parent == here:
            break
        here = here.parent
    try:
        shown = tests.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = tests
    where = str(shown) if str(shown) != "." else "."
    return f"pytest {where} -k {stem} --helikon-record"


@final
class _Watching:
    """Delegates to a replay interpreter and remembers the run's secrets
    (every member's), so what the view shows can be scrubbed of them."""

    def __init__(self, inner: ReplayInterpreter) -> None:
        self.inner = inner
        self.secrets: tuple[str, ...] = ()

    def new_run_id(self) -> RunId:
        return self.inner.new_run_id()

    def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        self._learn(env)
        return self.inner.perform(effect, env)

    def observe(self, env: Any, outcome: Any) -> None:
        self._learn(env)
        self.inner.observe(env, outcome)

    def _learn(self, env: RunEnv) -> None:
        if not self.secrets and not env.path:
            self.secrets = secrets_of(env)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _scrub(text: str, secrets: Iterable[str]) -> str:
    secrets = tuple(s for s in secrets if s)
    return redact_values(text, secrets) if secrets else text


def _context_secrets(context: Any) -> tuple[str, ...]:
    return tuple(getattr(context, "extra_secrets", ()) or ())


async def replay(
    trace: Trace, agent: Any, context: Any, mode: str, *, timeout: float = REPLAY_TIMEOUT
) -> dict[str, Any]:
    """Replay ``trace`` against ``agent`` in ``mode``; the view's answer (see the module)."""
    strict, live_tools = MODES[mode]
    watching = _Watching(ReplayInterpreter(trace, strict=strict, live_tools=live_tools))
    answer: dict[str, Any] = {"mode": mode, "agent": agent.name, "steps": len(trace.steps)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with anyio.fail_after(timeout):
                async for _ in agent.run(context, AgentInput(trace.header.input), interpreter=watching):
                    pass
        except ReplayDivergence as exc:
            secrets = (*watching.secrets, *_context_secrets(context))
            answer.update(
                outcome="diverged",
                step=exc.step,
                message=_scrub(str(exc), secrets),
                headline=_scrub(str(exc).splitlines()[0], secrets),
                differences=[field(_scrub(line, secrets)) for line in exc.differences],
            )
        except TimeoutError:
            answer.update(outcome="error", message=f"the replay took longer than {timeout:g} s")
        except HelikonError as exc:
            secrets = (*watching.secrets, *_context_secrets(context))
            answer.update(outcome="error", message=_scrub(f"{type(exc).__name__}: {exc}", secrets))
        else:
            answer.update(
                outcome="matches", message=f"replay matches the recording ({len(trace.steps)} steps)"
            )
    secrets = (*watching.secrets, *_context_secrets(context))
    answer["warnings"] = [_scrub(str(w.message), secrets) for w in caught]
    return answer


def routes(studio: Any) -> list[Any]:
    """The view's routes, for :meth:`Studio.app`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from helikon.trace import TraceFormatError

    def error(status: int, code: str, message: str) -> JSONResponse:
        return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)

    # One replay at a time: each records the warnings it raises (a loose
    # replay's "different definition"), and Python's warning filters are the
    # process's, not a task's.
    one_at_a_time = anyio.Lock()

    async def replay_run(request: Request) -> JSONResponse:
        entry = studio.catalogue.get(str(request.path_params["run_id"]))
        if entry is None:
            return error(404, "not_found", "no such run")
        try:
            body = await request.json()
        except ValueError:
            return error(400, "bad_json", "the body is not JSON")
        if not isinstance(body, dict):
            return error(400, "bad_json", "the body is not a JSON object")
        mode = body.get("mode", "strict")
        if mode not in MODES:
            return error(422, "bad_mode", f"mode must be one of {', '.join(MODES)}")
        try:
            trace = await anyio.to_thread.run_sync(studio.catalogue.load, entry)
        except TraceFormatError as exc:
            return error(422, "not_a_trace", str(exc))
        name = body.get("agent") or trace.header.agent
        agents = {agent.name: agent for agent in studio.agents}
        if not body.get("agent") and name not in agents:
            # An agent tree's trace names the member that started (a swarm's
            # entry); its definition lists every agent of the tree, the root too.
            definition = trace.header.definition if isinstance(trace.header.definition, dict) else {}
            members = definition.get("agents")
            if isinstance(members, dict):
                name = next((member for member in members if member in agents), name)
        answer: dict[str, Any]
        if not isinstance(name, str) or name not in agents:
            answer = {
                "mode": mode,
                "agent": name if isinstance(name, str) else None,
                "steps": len(trace.steps),
                "outcome": "error",
                "message": (
                    f"this studio has no agent named {name!r} to replay against: start it with "
                    "--app or --agents naming it (its agents: " + (", ".join(sorted(agents)) or "none") + ")"
                ),
                "warnings": [],
            }
        else:
            async with one_at_a_time:
                answer = await replay(trace, agents[name], studio.context, mode)
        answer["agents"] = sorted(agents)
        if entry.source == "golden" and entry.path is not None and studio.golden is not None:
            answer["record_command"] = record_command(entry.path, Path(studio.golden))
        return JSONResponse(answer)

    return [Route("/api/runs/{run_id}/replay", replay_run, methods=["POST"])]


__all__ = ["MODES", "REPLAY_TIMEOUT", "field", "record_command", "replay", "routes"]
