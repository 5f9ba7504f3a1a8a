"""A helikon agent as an A2A server, on the ``a2a-sdk``'s server primitives.

The SDK's request handler, task store and JSON-RPC routes do the protocol
(``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``);
:class:`HelikonExecutor` (an SDK ``AgentExecutor``) runs the agent for a
task and maps its run to task states and artifacts:

- the run starts: ``submitted`` then ``working``; each assistant message is
  a ``working`` status message;
- a tool call waits for a human (an approval): ``input-required``, with a
  message naming the calls (a text part and a data part); the run waits in
  memory (:mod:`helikon.protocols._parked`); the next message of the task
  answers it (a data part ``{"approved": true|false, "reason": ...}``, or
  text: ``yes``/``approve``/``approved``/``y``/``ok`` approve, anything
  else denies with the text as the reason) and the same run goes on;
- the run completes: its final output as an artifact (``output``): a text
  part, or a data part for an agent with structured output; ``completed``;
- the run fails: ``failed`` with the error; ``tasks/cancel`` cancels it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, final

try:
    import httpx
    from a2a.auth.user import User
    from a2a.helpers import get_data_parts, new_data_part, new_task, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.context import ServerCallContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        DefaultServerCallContextBuilder,
        create_agent_card_routes,
        create_jsonrpc_routes,
    )
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        TaskStore,
        TaskUpdater,
    )
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Part,
        TaskState,
    )
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
    from a2a.utils.push_url_validator import validate_push_notification_url
    from starlette.applications import Starlette
    from starlette.requests import Request
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError("helikon.protocols.a2a needs the a2a-sdk: pip install 'paigasus-helikon[a2a]'") from exc

import anyio

from helikon.context import RunContext
from helikon.effects import ApprovalRequest
from helikon.errors import describe
from helikon.events import MessageOutput, RunCompleted, RunFailed
from helikon.items import AgentInput, TextPart, UserMessage, text_of
from helikon.protocols._auth import Authenticated
from helikon.protocols._calls import call
from helikon.protocols._parked import MAX_RUNS, Decision, Parked, ParkedRun, ParkedRuns, RunsFull
from helikon.protocols.a2a._parts import parts_text
from helikon.server._backend import owner_of
from helikon.server._providers import Authenticator

#: Words that approve a pending call when a task's answer is text.
APPROVING_WORDS = frozenset({"y", "yes", "approve", "approved", "ok", "allow"})

#: ``(request_context) -> RunContext`` (sync or async): the run context of a task.
A2AContext = Callable[[RequestContext], Any]


@final
class _Identity(User):
    """The agent server authenticator's identity, as the SDK's user."""

    def __init__(self, owner: str) -> None:
        self._owner = owner

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._owner


@final
class _CallContexts(DefaultServerCallContextBuilder):
    """The SDK's call context, its user the request's authenticated identity
    (so the SDK's task store scopes tasks by identity)."""

    def build_user(self, request: Request) -> User:
        owner = owner_of(request.scope.get("state", {}).get("identity"))
        return _Identity(owner) if owner is not None else super().build_user(request)


def _owner(context: ServerCallContext | None) -> str | None:
    if context is None or not context.user.is_authenticated:
        return None
    return context.user.user_name


def decisions_from(parts: list[Part], requests: tuple[ApprovalRequest, ...]) -> list[Decision]:
    """The answer to every pending call in a task's message: a data part
    ``{"approved": bool, "reason": str}`` (or ``{"decisions": [{"callId",
    "approved", "reason"}]}`` per call), else its text (see
    :data:`APPROVING_WORDS`)."""
    for data in get_data_parts(parts):
        if isinstance(data, dict) and isinstance(data.get("decisions"), list):
            by_call = {str(d.get("callId")): d for d in data["decisions"] if isinstance(d, dict)}
            return [
                Decision(
                    r.call_id,
                    by_call[r.call_id].get("approved") is True,
                    str(by_call[r.call_id].get("reason", "")),
                    r.path,
                )
                for r in requests
                if r.call_id in by_call
            ]
        if isinstance(data, dict) and "approved" in data:
            approved = data.get("approved") is True
            reason = str(data.get("reason", "")) or ("" if approved else "a human denied the call")
            return [Decision(r.call_id, approved, reason, r.path) for r in requests]
    text = " ".join(p.text for p in parts if p.text).strip()
    approved = text.lower().rstrip(".!") in APPROVING_WORDS
    reason = "" if approved else (text or "a human denied the call")
    return [Decision(r.call_id, approved, reason, r.path) for r in requests]


def message_text(parts: list[Part]) -> str:
    """What a task's message asks, as text (see :func:`parts_text`)."""
    return parts_text(parts)


def _asking(requests: tuple[ApprovalRequest, ...]) -> list[Part]:
    calls = [
        {
            "callId": r.call_id,
            "tool": r.tool,
            "arguments": _json(r.arguments),
            "prompt": r.prompt,
            "path": list(r.path),
        }
        for r in requests
    ]
    lines = "; ".join(f"{r.tool}({r.arguments})" for r in requests)
    text = f"approval needed for {lines}: answer yes or no"
    return [new_text_part(text), new_data_part({"approvals": calls})]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@final
class HelikonExecutor(AgentExecutor):
    """Runs a helikon agent for A2A tasks (one run per task)."""

    def __init__(
        self,
        agent: Any,
        context: RunContext[Any] | A2AContext | None = None,
        runs: ParkedRuns | None = None,
    ) -> None:
        self.agent = agent
        self.context = context
        self.runs = runs if runs is not None else ParkedRuns()
        self.structured = _structured(agent)

    async def _ctx(self, request: RequestContext) -> RunContext[Any]:
        match self.context:
            case None:
                return RunContext.ephemeral(None)
            case RunContext():
                return self.context
        ctx: RunContext[Any] = await call(self.context, request)
        return ctx

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        key = (_owner(context.call_context), task_id)
        run = self.runs.get(key)
        parts = list(context.message.parts) if context.message is not None else []
        if run is not None and run.pending:
            requests = tuple(w.request for w in run.pending.values())
            run.answer(decisions_from(parts, requests))
        else:
            if context.current_task is None:
                history = [context.message] if context.message is not None else []
                task = new_task(
                    task_id, context.context_id or "", TaskState.TASK_STATE_SUBMITTED, history=history
                )
                await event_queue.enqueue_event(task)
            text = message_text(parts)
            ctx = await self._ctx(context)
            input = AgentInput((UserMessage((TextPart(text),)),))
            try:
                run = self.runs.start(key, task_id, self.agent, ctx, input)
            except RunsFull:
                busy = "the server is busy: every run slot holds a working run; try again later"
                await updater.failed(updater.new_agent_message([new_text_part(busy)]))
                return
        await updater.start_work()
        await self._follow(run, updater)

    async def _follow(self, run: ParkedRun, updater: TaskUpdater) -> None:
        output = ""
        async with aclosing(run.segment()) as segment:
            async for item in segment:
                match item:
                    case Parked(requests=requests):
                        await updater.requires_input(updater.new_agent_message(_asking(requests)))
                        return
                    case MessageOutput(item=message):
                        output = text_of(message.content)
                        if output:
                            await updater.update_status(
                                TaskState.TASK_STATE_WORKING,
                                updater.new_agent_message([new_text_part(output)]),
                            )
                    case RunCompleted():
                        await updater.add_artifact(self._parts(output), name="output", last_chunk=True)
                        await updater.complete()
                        return
                    case RunFailed(error=error):
                        await updater.failed(updater.new_agent_message([new_text_part(describe(error))]))
                        return
        await updater.failed(updater.new_agent_message([new_text_part("the run ended without an end")]))

    def _parts(self, output: str) -> list[Part]:
        if self.structured:
            try:
                return [new_data_part(json.loads(output), media_type="application/json")]
            except ValueError:
                pass
        return [new_text_part(output, media_type="text/plain")]

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        run = self.runs.get((_owner(context.call_context), task_id))
        if run is not None:
            run.cancel()
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel()


def agent_card(agent: Any, url: str, *, version: str = "1.0.0", push: bool = False) -> AgentCard:
    """The agent card of ``agent`` served at ``url`` (JSON-RPC): its name
    and description, a skill for the agent itself and one per tool."""
    name = str(getattr(agent, "name", "agent"))
    description = str(getattr(agent, "description", "") or f"the helikon agent {name}")
    skills = [AgentSkill(id=name, name=name, description=description, tags=["agent"])]
    for tool in getattr(agent, "tools", ()):
        skills.append(
            AgentSkill(
                id=f"{name}.{tool.name}",
                name=tool.name,
                description=tool.description or tool.name,
                tags=["tool"],
            )
        )
    return AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["application/json"] if _structured(agent) else ["text/plain"],
        skills=skills,
    )


def _structured(agent: Any) -> bool:
    return (
        getattr(agent, "output_type", None) is not None or getattr(agent, "output_schema", None) is not None
    )


@final
class A2AServer:
    """An agent behind the A2A protocol (JSON-RPC, with the agent card at
    ``/.well-known/agent-card.json``).

    Args:
        agent: the agent (anything with ``name`` and ``run(ctx, input)``).
        url: where clients reach the app (the card's interface URL).
        context: the run context, or ``(request_context) -> RunContext``
            (sync or async); default ``RunContext.ephemeral(None)``. A call
            that needs a human (a guard rule, a policy's ``AskUser``) makes
            the task ``input-required``.
        auth: an authenticator, as the agent server's; tasks are scoped to
            the identity (the card stays public).
        task_store: the SDK's task store (default in memory).
        push: offer push notifications (the SDK's sender and an in-memory
            config store): a client's webhook gets the task's updates.
        push_url_validator: ``(url) -> bool`` (async) for the webhooks a
            client may name; default the SDK's, which refuses loopback,
            private and link-local addresses (no server-side request forgery).
        max_runs: runs kept in memory at once; a new task evicts the one
            that has waited longest for input (its questions denied), and
            fails as busy when none waits.
        max_wait: seconds a question waits for input before it is denied
            (None: no limit).
    """

    def __init__(
        self,
        agent: Any,
        url: str,
        *,
        context: RunContext[Any] | A2AContext | None = None,
        auth: Authenticator | None = None,
        task_store: TaskStore | None = None,
        push: bool = False,
        push_url_validator: Callable[[str], Awaitable[bool]] | None = None,
        max_runs: int = MAX_RUNS,
        max_wait: float | None = None,
    ) -> None:
        self.agent = agent
        self.url = url
        self.auth = auth
        self.runs = ParkedRuns(max_runs, max_wait)
        self.executor = HelikonExecutor(agent, context, self.runs)
        self.card = agent_card(agent, url, push=push)
        self._http: httpx.AsyncClient | None = None
        options: dict[str, Any] = {}
        if push:
            self._http = httpx.AsyncClient(timeout=30)
            store = InMemoryPushNotificationConfigStore()
            validator = push_url_validator or validate_push_notification_url
            options = {
                "push_config_store": store,
                "push_sender": BasePushNotificationSender(self._http, store, push_url_validator=validator),
                "push_url_validator": validator,
            }
        self.handler = DefaultRequestHandler(
            agent_executor=self.executor,
            task_store=task_store or InMemoryTaskStore(),
            agent_card=self.card,
            **options,
        )

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Owns the runs (pass it to an outer app when mounting :meth:`app`)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.runs.serve)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    await self.handler.aclose()
                    if self._http is not None:
                        await self._http.aclose()

    def app(self) -> Any:
        """The ASGI app (asyncio only: the SDK's server runs on asyncio)."""
        routes = [
            *create_agent_card_routes(self.card),
            *create_jsonrpc_routes(self.handler, "/", context_builder=_CallContexts()),
        ]
        inner = Starlette(routes=routes, lifespan=self.lifespan)
        return Authenticated(inner, self.auth, public=frozenset({AGENT_CARD_WELL_KNOWN_PATH}))


__all__ = [
    "APPROVING_WORDS",
    "A2AContext",
    "A2AServer",
    "HelikonExecutor",
    "agent_card",
    "decisions_from",
    "message_text",
]
