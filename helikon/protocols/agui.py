"""Serve a helikon agent as an AG-UI endpoint (the ``agui`` extra).

`AG-UI <https://docs.ag-ui.com>`_ is the agent -> user-interface event
protocol: the front end POSTs a ``RunAgentInput`` (thread id, run id, the
messages so far, the tools it provides, state, forwarded props) and reads
the run as a stream of AG-UI events (Server-Sent Events).

- :class:`AguiServer` serves one agent (single, tree or workflow): ``app()``
  is a Starlette app (one route, ``POST /``) to serve alone or mount in any
  ASGI app (the agent server's included); its :meth:`~AguiServer.lifespan`
  owns the runs.
- :class:`AguiEvents` maps helikon events to AG-UI events (the table is in
  ``docs/protocols.md``); :func:`input_items` maps AG-UI messages to items.

Front-end tools and approvals use the same machinery: the run waits in
memory for an answer (the run's approval handler parks), the AG-UI run
ends (``RUN_FINISHED`` with pending tool calls, or with an ``interrupt``
outcome for approvals, which are also announced with a ``CUSTOM`` event),
and the next request of the thread carries the answer (a ``tool`` message
for a front-end tool, a ``resume`` entry for an approval): the same helikon
run goes on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, final

try:
    from ag_ui.core import EventType, RunAgentInput
    from pydantic import ValidationError
    from starlette.applications import Starlette
    from starlette.requests import HTTPConnection, Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.protocols.agui needs ag-ui-protocol and Starlette: pip install 'paigasus-helikon[agui]'"
    ) from exc

import anyio

from helikon.context import RunContext
from helikon.items import AgentInput
from helikon.protocols._agui_events import (
    APPROVAL_EVENT,
    APPROVAL_REASON,
    APPROVAL_SCHEMA,
    DENIED_EVENT,
    GUARDRAIL_EVENT,
    AguiEvents,
    answers_of,
    encode,
    input_items,
    interrupt_id,
)
from helikon.protocols._auth import Authenticated, owner
from helikon.protocols._calls import call
from helikon.protocols._frontend import FrontendTool, asking_policy
from helikon.protocols._mount import mount_protocols
from helikon.protocols._parked import MAX_RUNS, Parked, ParkedRun, ParkedRuns, RunsFull
from helikon.server._providers import Authenticator

MAX_BODY_BYTES = 4 * 1024 * 1024

#: ``(request, input) -> RunContext`` (sync or async).
AguiContext = Callable[[HTTPConnection, RunAgentInput], Any]


# -- the server ------------------------------------------------------------------------------


def _frontend_tools(agent: Any, input: RunAgentInput, results: dict[str, str]) -> tuple[Any, frozenset[str]]:
    """``agent`` with the client's tools added (an agent with ``with_tools``;
    others run without them), and their names."""
    tools = input.tools or []
    with_tools = getattr(agent, "with_tools", None)
    if not tools or with_tools is None:
        return agent, frozenset()
    own = {t.name for t in getattr(agent, "tools", ())}
    added = [
        FrontendTool(t.name, t.description, t.parameters if isinstance(t.parameters, dict) else {}, results)
        for t in tools
        if t.name not in own
    ]
    return with_tools(*added), frozenset(t.name for t in added)


@final
class AguiServer:
    """An agent behind the AG-UI protocol.

    Args:
        agent: the agent (anything with ``name`` and ``run(ctx, input)``).
        context: the run context, or ``(request, input) -> RunContext``
            (sync or async); default ``RunContext.ephemeral(None)``.
        auth: an authenticator, as the agent server's (``BearerAuth`` or
            ``(request) -> identity or None``); threads are scoped to the
            identity (another identity's thread id starts a new thread).
        max_body_bytes: the largest input accepted (413 beyond, unread).
        max_runs: runs kept in memory at once; a new thread's run evicts
            the run that has waited longest for an answer (its questions
            denied), and is refused with 503 when none waits.
        max_wait: seconds a question waits for an answer before it is
            denied (None: no limit).
    """

    def __init__(
        self,
        agent: Any,
        *,
        context: RunContext[Any] | AguiContext | None = None,
        auth: Authenticator | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_runs: int = MAX_RUNS,
        max_wait: float | None = None,
    ) -> None:
        self.agent = agent
        self.context = context
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.runs = ParkedRuns(max_runs, max_wait)

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Owns the runs (pass it to an outer app when mounting :meth:`app`)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.runs.serve)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    def app(self) -> Any:
        """The ASGI app: ``POST /`` runs the agent (``Accept: text/event-stream``)."""
        inner = Starlette(routes=[Route("/", self._run, methods=["POST"])], lifespan=self.lifespan)
        return Authenticated(inner, self.auth)

    async def _ctx(self, request: Request, input: RunAgentInput) -> RunContext[Any]:
        match self.context:
            case None:
                return RunContext.ephemeral(None)
            case RunContext():
                return self.context
        ctx: RunContext[Any] = await call(self.context, request, input)
        return ctx

    async def _run(self, request: Request) -> Response:
        body = await _body(request, self.max_body_bytes)
        if body is None:
            message = f"the body is larger than {self.max_body_bytes} bytes"
            return JSONResponse({"error": {"code": "too_large", "message": message}}, 413)
        try:
            input = RunAgentInput.model_validate_json(body)
        except ValidationError as exc:
            message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            return JSONResponse({"error": {"code": "bad_input", "message": message}}, 422)
        key = (owner(request), input.thread_id)
        run = self.runs.get(key)
        events: AguiEvents | None = None
        if run is not None and run.pending:
            decisions, results = answers_of(input, run)
            if decisions:
                names: frozenset[str] = run.data.get("frontend", frozenset())
                run.data.setdefault("results", {}).update(results)
                run.answer(decisions)
                events = AguiEvents(input.thread_id, input.run_id, names, str(self.agent.name))
        if events is None:
            if run is not None:
                run.cancel()
            store: dict[str, str] = {}
            agent, names = _frontend_tools(self.agent, input, store)
            ctx = await self._ctx(request, input)
            if names:
                ctx = ctx.with_permission_policy(asking_policy(names, ctx.permission_policy))
            try:
                run = self.runs.start(key, uuid.uuid4().hex, agent, ctx, AgentInput(input_items(input)))
            except RunsFull:
                busy = {"code": "busy", "message": "every run slot holds a working run; try again later"}
                return JSONResponse({"error": busy}, 503, {"retry-after": "2"})
            run.data.update(frontend=names, results=store)
            events = AguiEvents(input.thread_id, input.run_id, names, str(self.agent.name))
        assert run is not None
        return StreamingResponse(
            self._stream(run, events, input),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _stream(self, run: ParkedRun, events: AguiEvents, input: RunAgentInput) -> AsyncIterator[bytes]:
        for event in events.start(input, input.state):
            yield encode(event)
        ended = False
        try:
            async with aclosing(run.segment()) as segment:
                async for item in segment:
                    if isinstance(item, Parked):
                        for event in events.parked(item.requests):
                            yield encode(event)
                        ended = True
                        return
                    for event in events.map(item):
                        if event.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
                            ended = True
                        yield encode(event)
            if not ended:
                yield encode(events.error("the run ended without a terminal event"))
                ended = True
        finally:
            if not ended:  # the client went away mid-run: the run stops with it
                run.cancel()


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it is larger than ``limit`` (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def agui_app(
    agent: Any,
    *,
    context: RunContext[Any] | AguiContext | None = None,
    auth: Authenticator | None = None,
) -> Any:
    """``AguiServer(agent, ...).app()``: an ASGI app serving ``agent`` over AG-UI."""
    return AguiServer(agent, context=context, auth=auth).app()


def parse_events(body: str) -> list[dict[str, Any]]:
    """The events of an AG-UI SSE body, as JSON objects (for tests and tools)."""
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


__all__ = [
    "APPROVAL_EVENT",
    "APPROVAL_REASON",
    "APPROVAL_SCHEMA",
    "DENIED_EVENT",
    "GUARDRAIL_EVENT",
    "AguiContext",
    "AguiEvents",
    "AguiServer",
    "agui_app",
    "answers_of",
    "encode",
    "input_items",
    "interrupt_id",
    "mount_protocols",
    "parse_events",
]
