"""The agent server's HTTP and WebSocket handlers, and its guard middleware.

Every response carries ``X-Run-Id`` (the run's id; a fresh id where no run
is involved). Errors are JSON: ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import inspect
import logging
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, final

import anyio
import attrs
import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from helikon.codec import structure, structure_error
from helikon.items import AgentInput, Item
from helikon.server._backend import (
    ApprovalRefused,
    Decision,
    RunBackend,
    RunHandle,
    RunNotFound,
    ServerBusy,
    StartRun,
    owner_of,
    scoped_session_id,
)
from helikon.server._openapi import openapi_document
from helikon.server._page import page_headers, page_html
from helikon.server._providers import Authenticator, AuthRejection, ContextProvider, SessionProvider, call
from helikon.server._runs import (
    SSE_KEEPALIVE,
    Frame,
    RunStatus,
    is_terminal,
    output_of,
    sse_message,
    status_of,
)
from helikon.server._wire import JsonRefused, decode_json, item_form

log = logging.getLogger("helikon.server")

#: Paths served without authentication: the page and the schema name no
#: agent; the probes are asked by load balancers and orchestrators.
PUBLIC_PATHS = frozenset({"/", "/openapi.json", "/health", "/ready"})
#: The default limit on reading a request body: a client that stalls
#: mid-body gets 408 and its connection closed rather than holding it forever.
BODY_TIMEOUT_SECONDS = 30.0
MAX_SESSION_ID = 256
#: The most runs one page of ``GET /agents/{name}/runs`` lists.
MAX_PAGE = 100
KEEPALIVE_SECONDS = 15.0
#: What may go into the ``X-Run-Id`` header as it is.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def error(status: int, code: str, message: str, run_id: str | None = None) -> JSONResponse:
    headers = {"x-run-id": run_id} if run_id else None
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class BadRequest(Exception):
    """A client error: answered with ``status`` and a JSON error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _route_path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


@final
class guard:
    """Authenticate every request but the public page and schema, and put
    ``X-Run-Id`` on every response."""

    def __init__(self, app: ASGIApp, auth: Authenticator | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        if self.auth is not None and _route_path(scope) not in PUBLIC_PATHS:
            try:
                identity = await call(self.auth, HTTPConnection(scope))
            except AuthRejection as rejection:
                identity = rejection
            except Exception:  # fail closed
                log.exception("the authenticator raised; refusing the request")
                identity = None
            if identity is None or identity is False:
                identity = AuthRejection()
            if isinstance(identity, AuthRejection):
                await self._refuse(identity, scope, receive, send)
                return
            state["identity"] = identity
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        body = _BodyTracker(scope, receive)
        started = False

        async def send_with_run_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-run-id"]
                run_id = state.get("run_id")
                if not isinstance(run_id, str) or not _SAFE_ID.fullmatch(run_id):
                    run_id = uuid.uuid4().hex
                headers.append((b"x-run-id", str(run_id).encode()))
                if not body.done:  # answered before the body was read: the connection cannot be reused
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, body.receive, send_with_run_id)
        except ClientDisconnect:  # an expected event, not a server failure
            log.info("the client went away during %s %s", scope.get("method"), scope.get("path"))
        except Exception:
            log.exception("the agent server failed on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # too late for an error response: the server drops the connection
            response = error(500, "internal", "the server failed; see its log")
            await response(scope, body.receive, send_with_run_id)

    async def _refuse(self, rejection: AuthRejection, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            reason = rejection.message.encode()[:120].decode(errors="ignore")  # a close reason is short
            await send({"type": "websocket.close", "code": 1008, "reason": reason})
            return
        response = error(rejection.status, rejection.code, rejection.message, uuid.uuid4().hex)
        if rejection.status == 401:
            response.headers["www-authenticate"] = "Bearer"
        if not _BodyTracker(scope, receive).done:
            response.headers["connection"] = "close"  # the unread body makes the connection unusable
        await response(scope, receive, send)


@final
class _BodyTracker:
    """Whether a request's body has been read to its end."""

    def __init__(self, scope: Scope, receive: Receive) -> None:
        headers = dict(scope.get("headers", []))
        length = headers.get(b"content-length", b"0").strip()
        self.done = b"transfer-encoding" not in headers and length in (b"", b"0")
        self._receive = receive

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            self.done = True
        return message


def readiness(runs: object) -> tuple[int, str]:
    """``(HTTP status, state)`` of ``/ready`` for a run backend: 503 while it
    drains or while its queue is full. Reads two attributes and takes no
    lock, so it may be asked from another thread (the probe port)."""
    if getattr(runs, "draining", False):
        return 503, "draining"
    if not getattr(runs, "ready", True):
        return 503, "full"
    return 200, "ready"


async def read_json(request: Request, limit: int, timeout: float = BODY_TIMEOUT_SECONDS) -> Any:
    """The request's JSON body, at most ``limit`` bytes, read within ``timeout`` seconds."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if kind != "application/json" and not kind.endswith("+json"):
        raise BadRequest(415, "unsupported_media_type", "send the body as application/json")
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise BadRequest(413, "too_large", f"the request body is limited to {limit} bytes")
    body = bytearray()
    with anyio.move_on_after(timeout) as reading:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise BadRequest(413, "too_large", f"the request body is limited to {limit} bytes")
    if reading.cancelled_caught:
        raise BadRequest(408, "body_timeout", f"the request body was not received within {timeout:g} s")
    if not body:
        raise BadRequest(400, "bad_json", "the request body is empty; send a JSON object")
    try:
        return decode_json(bytes(body))
    except JsonRefused as refused:
        raise BadRequest(400, "bad_json", str(refused)) from None


def run_input(body: Any) -> AgentInput:
    """``{"input": "..."}`` or ``{"messages": [...]}`` as the run's input."""
    if not isinstance(body, dict):
        raise BadRequest(
            422, "bad_input", 'the body must be a JSON object: {"input": ...} or {"messages": [...]}'
        )
    unknown = sorted(set(body) - {"input", "messages"})
    if unknown:
        raise BadRequest(422, "bad_input", f"unknown field {unknown[0]!r}; expected 'input' or 'messages'")
    if ("input" in body) == ("messages" in body):
        raise BadRequest(422, "bad_input", "give exactly one of 'input' (text) and 'messages' (a list)")
    if "input" in body:
        text = body["input"]
        if not isinstance(text, str):
            raise BadRequest(422, "bad_input", "'input' must be a string")
        return AgentInput.from_user_text(text)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise BadRequest(422, "bad_input", "'messages' must be a non-empty list of items")
    try:
        # Strict: a wrong type anywhere (``null`` for an item, ``null`` for
        # a text) is refused here, naming its path, never coerced; the
        # book's snake-case items are read beside helikon's own.
        items: tuple[Item, ...] = structure([item_form(message) for message in messages], tuple[Item, ...])
    except Exception as exc:
        why = structure_error(exc, "messages")
        raise BadRequest(422, "bad_input", f"'messages' holds an item helikon cannot read: {why}") from None
    return AgentInput(items)


def decisions_of(body: Any) -> tuple[Decision, ...]:
    """``{"decisions": [{"call_id", "approved", "reason"?, "path"?}, ...]}``."""
    items = body.get("decisions") if isinstance(body, dict) else None
    if not isinstance(items, list) or not items:
        raise BadRequest(422, "bad_decisions", "'decisions' must be a non-empty list")
    found: list[Decision] = []
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("call_id"), str)
            or not isinstance(item.get("approved"), bool)
            or not isinstance(item.get("reason", ""), str)
            or not isinstance(item.get("path", []), list)
            or not all(isinstance(key, str) for key in item.get("path", []))
        ):
            raise BadRequest(
                422,
                "bad_decisions",
                'each decision is {"call_id": str, "approved": bool, "reason": str, "path": [str]}',
            )
        path = tuple(item.get("path", []))
        found.append(Decision(item["call_id"], item["approved"], item.get("reason", ""), path))
    return tuple(found)


def _finds_by_owner(runs: object) -> bool:
    """Whether a backend's ``find`` takes the caller's ``owner``."""
    try:
        return "owner" in inspect.signature(runs.find).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        return False


def _identity(request: HTTPConnection) -> Any:
    """The identity the authenticator returned for this request (``None`` without auth)."""
    return request.scope.get("state", {}).get("identity")


def session_id_of(request: HTTPConnection) -> str | None:
    value = request.headers.get("x-session-id")
    if value is None:
        return None
    if not value or len(value) > MAX_SESSION_ID or not all(" " <= c <= "~" for c in value):
        raise BadRequest(
            400, "bad_session_id", f"X-Session-Id must be 1 to {MAX_SESSION_ID} printable ASCII characters"
        )
    return value


def since_of(request: HTTPConnection) -> int:
    """Where a reader resumes: after ``Last-Event-ID``, or at ``?since=``."""
    last = request.headers.get("last-event-id")
    raw = request.query_params.get("since")
    if raw is not None and (not raw.isascii() or not raw.isdigit() or len(raw) > 18):
        raise BadRequest(400, "bad_resume", "since must be an event number, 0 or more")
    if last:  # empty: no event received yet
        if not last.isascii() or not last.isdigit() or len(last) > 18:
            raise BadRequest(400, "bad_resume", "Last-Event-ID must be an event number (the id of an event)")
        return int(last) + 1
    return 0 if raw is None else int(raw)


def result_of(run_id: str, agent: str, frames: list[Frame]) -> dict[str, Any]:
    """A finished run's result body, from its frames."""
    terminal = frames[-1] if frames and is_terminal(frames[-1]) else None
    status = status_of(frames)
    failed = status is RunStatus.FAILED
    return {
        "run_id": run_id,
        "agent": agent,
        "status": status.value,
        "output": output_of(frames, partial=status is RunStatus.CANCELLED),
        "error": terminal.get("error") if terminal is not None and failed else None,
        "usage": terminal.get("usage") if terminal is not None else None,
        "events": frames,
    }


@final
class OneShot:
    """Wait for the run and answer with its result; a client that goes away
    cancels the run."""

    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames: list[Frame] = []
        gone = False
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                await self.handle.cancel()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            async for frame in self.handle.frames():
                frames.append(frame)
            group.cancel_scope.cancel()
        if gone:
            return
        body = result_of(self.handle.run_id, self.handle.agent, frames)
        started = any(f.get("type") == "RunStarted" for f in frames)
        status = 500 if not started and frames and frames[-1].get("synthetic") else 200
        await JSONResponse(body, status_code=status)(scope, receive, send)


@final
class EventStream:
    """A run's frames as Server-Sent Events from ``since``; with
    ``cancel_on_disconnect`` (a run started by this request), a client that
    goes away cancels the run."""

    def __init__(self, handle: RunHandle, since: int = 0, cancel_on_disconnect: bool = False) -> None:
        self.handle = handle
        self.since = since
        self.cancel_on_disconnect = cancel_on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if self.cancel_on_disconnect:
                    await self.handle.cancel()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            async for chunk in keepalive(self.handle.frames(self.since), group):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()


async def keepalive(frames: AsyncIterator[Frame], group: Any) -> AsyncIterator[bytes]:
    """SSE messages of ``frames``, with a comment while the run is quiet.

    Frames that are ready together go out as one chunk (one write, one
    syscall, instead of one per event: under load the sends dominate), and
    the keep-alive timer is only armed when nothing is ready.
    """
    sender, receiver = anyio.create_memory_object_stream[Frame](64)

    async def pump() -> None:
        async with sender:
            async for frame in frames:
                await sender.send(frame)

    group.start_soon(pump)
    async with receiver:
        while True:
            batch: list[Frame] = []
            ended = _take_ready(receiver, batch)
            if not batch and not ended:
                with anyio.move_on_after(KEEPALIVE_SECONDS):
                    try:
                        batch.append(await receiver.receive())
                    except anyio.EndOfStream:
                        ended = True
                if not batch and not ended:
                    yield SSE_KEEPALIVE
                    continue
                ended = ended or _take_ready(receiver, batch)
            if batch:
                yield b"".join(sse_message(frame) for frame in batch)
            if ended:
                return


def _take_ready(receiver: Any, batch: list[Frame]) -> bool:
    """Move the frames ready now into ``batch``; whether the stream has ended."""
    while True:
        try:
            batch.append(receiver.receive_nowait())
        except anyio.WouldBlock:
            return False
        except anyio.EndOfStream:
            return True


@attrs.frozen
class Handlers:
    """The routes' handlers, over one server's configuration."""

    agents: Mapping[str, Any]
    context: ContextProvider
    sessions: SessionProvider
    runs: RunBackend
    max_body_bytes: int
    title: str
    body_timeout: float = BODY_TIMEOUT_SECONDS
    authorize: Callable[..., Any] | None = None
    #: Whether an authenticator is configured (the schema declares security then).
    authenticated: bool = False

    async def health(self, request: Request) -> Response:
        """Liveness: the process answers (touches no run, takes no lock)."""
        return JSONResponse({"status": "ok"})

    async def ready(self, request: Request) -> Response:
        """Readiness: 503 while draining or while the run queue is full."""
        status, state = readiness(self.runs)
        return JSONResponse({"status": state}, status_code=status)

    async def page(self, request: Request) -> Response:
        return HTMLResponse(page_html(self.title), headers=page_headers())

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document(self.title, auth=self.authenticated))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return error(404, "not_found", f"no route {request.url.path!r}")

    async def not_allowed(self, request: Request, exc: Exception) -> Response:
        detail = exc.headers if isinstance(exc, HTTPException) else None
        response = error(
            405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path!r}"
        )
        if detail and "allow" in {k.lower() for k in detail}:
            response.headers["allow"] = next(v for k, v in detail.items() if k.lower() == "allow")
        return response

    async def list_agents(self, request: Request) -> Response:
        agents = [
            {"name": name, "description": str(getattr(agent, "description", "") or "")}
            for name, agent in sorted(self.agents.items())
        ]
        return JSONResponse({"agents": agents})

    def _agent(self, request: HTTPConnection) -> Any:
        name = request.path_params["name"]
        agent = self.agents.get(name)
        if agent is None:
            raise BadRequest(404, "unknown_agent", f"no agent named {name!r}")
        return agent

    async def start_run(self, request: Request) -> Any:
        run_id = uuid.uuid4().hex
        request.state.run_id = run_id
        try:
            return await self._start(request, run_id)
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)
        except ServerBusy as busy:
            response = error(503, "unavailable", str(busy))
            response.headers["retry-after"] = str(busy.retry_after)
            return response

    async def _start(self, request: Request, run_id: str) -> Any:
        agent = self._agent(request)
        if getattr(self.runs, "draining", False):  # refuse before reading the body
            raise ServerBusy("the server is shutting down; retry on another replica")
        stream = request.query_params.get("stream")
        mode = request.query_params.get("mode", "sync")
        if stream not in (None, "sse") or mode not in ("sync", "async"):
            raise BadRequest(400, "bad_query", "use ?stream=sse or ?mode=async (or neither)")
        session_id = session_id_of(request)
        owner = owner_of(_identity(request))
        pacer = getattr(self.runs, "pacer", None)
        if pacer is not None:  # a burst of new runs is taken in portions too
            await pacer.checkpoint()
        input = run_input(await read_json(request, self.max_body_bytes, self.body_timeout))
        try:
            # a session id is the caller's own: another identity's same id is another session
            session = await call(
                self.sessions, None if session_id is None else scoped_session_id(owner, session_id)
            )
            ctx = await call(self.context, request, session)
        except Exception as exc:
            log.exception("building the run's session or context failed")
            return error(500, "start_failed", f"the run could not be set up: {type(exc).__name__}")
        try:
            handle = await self.runs.start(
                StartRun(agent, input, ctx, session_id, run_id, mode == "async", owner=owner)
            )
        except ServerBusy:
            raise
        except Exception as exc:
            log.exception("starting a run failed")
            return error(500, "start_failed", f"the run could not start: {exc}")
        if mode == "async" and stream is None:
            base = str(request.url_for("describe_run", name=handle.agent, run_id=run_id))
            return JSONResponse(
                {"run_id": run_id, "status_url": base, "events_url": f"{base}/events"},
                status_code=202,
                headers={"location": base},
            )
        if stream == "sse":  # with mode=async the run outlives this connection
            return EventStream(handle, cancel_on_disconnect=mode != "async")
        return OneShot(handle)

    async def _handle(self, request: HTTPConnection, action: str = "read") -> RunHandle:
        """The run named by the path, if the caller may ``action`` it (its
        owner may; another identity only when ``authorize`` says so): else 404,
        the answer for a run that does not exist, so no run id leaks."""
        agent = self._agent(request)
        run_id = request.path_params["run_id"]
        identity = _identity(request)
        try:
            if _finds_by_owner(self.runs):  # a backend that keys runs by owner (TemporalRuns)
                handle = await self.runs.find(str(agent.name), run_id, owner=owner_of(identity))  # type: ignore[call-arg]
            else:
                handle = await self.runs.find(str(agent.name), run_id)
        except RunNotFound:
            raise BadRequest(404, "unknown_run", f"no run {run_id!r} of this agent") from None
        owner = getattr(handle, "owner", None)
        if owner != owner_of(identity) and not (
            self.authorize is not None and await call(self.authorize, identity, owner, action)
        ):
            raise BadRequest(404, "unknown_run", f"no run {run_id!r} of this agent")
        request.state.run_id = handle.run_id
        return handle

    async def runs_route(self, request: Request) -> Any:
        """``/agents/{name}/runs``: GET lists, POST starts (one route, so a 405
        names both methods in ``Allow``)."""
        if request.method in ("GET", "HEAD"):
            return await self.list_runs(request)
        return await self.start_run(request)

    async def list_runs(self, request: Request) -> Response:
        """The caller's runs of an agent, newest first, a page at a time."""
        try:
            agent = self._agent(request)
            limit_text = request.query_params.get("limit", "20")
            if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE:
                raise BadRequest(400, "bad_query", f"limit must be a number from 1 to {MAX_PAGE}")
            lister = getattr(self.runs, "list_runs", None)
            if lister is None:
                raise BadRequest(501, "not_supported", "this server's run backend cannot list runs")
            try:
                page, cursor = await lister(
                    str(agent.name),
                    owner_of(_identity(request)),
                    int(limit_text),
                    request.query_params.get("after") or None,
                )
            except RunNotFound as gone:
                raise BadRequest(404, "bad_cursor", str(gone)) from None
            return JSONResponse({"runs": [await run.describe() for run in page], "next": cursor})
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)

    async def describe_run(self, request: Request) -> Response:
        try:
            handle = await self._handle(request)
            return JSONResponse(await handle.describe())
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)

    async def events_sse(self, request: Request) -> Any:
        try:
            since = since_of(request)
            return EventStream(await self._handle(request), since)
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)

    async def approve(self, request: Request) -> Response:
        try:
            handle = await self._handle(request, "approve")
            decisions = decisions_of(await read_json(request, self.max_body_bytes, self.body_timeout))
            try:
                await handle.approve(decisions)
            except ApprovalRefused as refused:
                raise BadRequest(409, "approval_refused", str(refused)) from None
            return JSONResponse(await handle.describe())
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)

    async def cancel(self, request: Request) -> Response:
        try:
            handle = await self._handle(request, "cancel")
            await handle.cancel()
            return JSONResponse(await handle.describe(), status_code=202)
        except BadRequest as bad:
            return error(bad.status, bad.code, bad.message)

    async def events_ws(self, websocket: WebSocket) -> None:
        """Replay the run's frames, then tail it; closes after the terminal frame."""
        try:
            since = since_of(websocket)
            handle = await self._handle(websocket)
        except BadRequest as bad:
            await websocket.accept()
            await websocket.send_json({"error": {"code": bad.code, "message": bad.message}})
            await websocket.close(code=4000 + bad.status, reason=bad.code)
            return
        await websocket.accept()
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                try:
                    while True:
                        await websocket.receive_text()
                except (WebSocketDisconnect, RuntimeError):
                    group.cancel_scope.cancel()

            group.start_soon(watch)
            async for frame in handle.frames(since):
                await websocket.send_text(msgspec.json.encode(frame).decode())
            await websocket.close(code=1000)
            group.cancel_scope.cancel()


__all__ = ["Handlers", "guard", "readiness"]
