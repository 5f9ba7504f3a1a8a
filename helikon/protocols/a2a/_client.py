"""An A2A agent (any framework's) as a helikon agent.

:class:`RemoteA2AAgent` has what a helikon agent needs to be a handoff
target, an ``AgentAsTool`` or a workflow child: a ``name``, a
``description`` and ``run(ctx, input)``. It is not a helikon machine, so in
an agent tree it is an *opaque child*: the interpreter runs it whole as one
``RunAgents`` effect, and the recording interpreter records that effect's
result (its output, usage and error), so a recorded run replays with no
network.

Its task's events become helikon events: an artifact chunk's text is a
``TokenDelta``; the completed task's artifacts (text parts, and data parts
as JSON) are its final ``MessageOutput`` and ``RunCompleted``; a failed,
rejected or cancelled task is ``RunFailed``; a task that asks for input or
auth is ``RunFailed`` too (the remote task is cancelled: a helikon parent
cannot answer it on a human's behalf).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, final

try:
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, create_client
    from a2a.helpers import new_text_message
    from a2a.types import (
        AgentCard,
        Artifact,
        CancelTaskRequest,
        Part,
        Role,
        SendMessageRequest,
        StreamResponse,
        TaskState,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError("helikon.protocols.a2a needs the a2a-sdk: pip install 'paigasus-helikon[a2a]'") from exc

from helikon.context import RunContext
from helikon.errors import OtherError
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, RunStarted, TokenDelta
from helikon.ids import RunId
from helikon.items import AgentInput, AssistantMessage, Item, SystemMessage, TextPart, UserMessage, text_of
from helikon.model import Usage
from helikon.protocols.a2a._parts import parts_text

_FAILED: dict[int, str] = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
    TaskState.TASK_STATE_INPUT_REQUIRED: "needs input",
    TaskState.TASK_STATE_AUTH_REQUIRED: "needs authentication",
}


_WAITING = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)


def _parts_text(parts: Sequence[Part]) -> str:
    return parts_text(parts, "")


def request_text(items: Sequence[Item]) -> str:
    """What a remote agent is asked: the last user message's text (the
    remote agent does not share the caller's conversation), or, with no
    user message, every text of the input."""
    for item in reversed(items):
        if isinstance(item, UserMessage):
            return text_of(item.content)
    return "\n".join(text_of(i.content) for i in items if isinstance(i, (SystemMessage, AssistantMessage)))


@final
class RemoteA2AAgent:
    """An agent served over A2A, usable wherever a helikon agent is.

    Args:
        url: the agent's base URL (its card is at
            ``{url}/.well-known/agent-card.json``).
        name: its name in this process (a handoff target's tool is
            ``transfer_to_{name}``); :meth:`from_card` takes the card's.
        description: what it does (for handoff and tool descriptions).
        headers: HTTP headers for every request (e.g. ``Authorization``).
        streaming: use ``message/stream`` (else ``message/send``).
        timeout: seconds per HTTP request.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str = "remote_agent",
        description: str = "",
        headers: Mapping[str, str] | None = None,
        streaming: bool = True,
        timeout: float = 60.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.name = name
        self.description = description or f"the A2A agent at {self.url}"
        self.headers = dict(headers or {})
        self.streaming = streaming
        self.timeout = timeout

    @classmethod
    async def from_card(cls, url: str, **options: Any) -> RemoteA2AAgent:
        """The agent at ``url``, named and described by its agent card."""
        headers = dict(options.get("headers") or {})
        async with httpx.AsyncClient(headers=headers, timeout=options.get("timeout", 60.0)) as http:
            card: AgentCard = await A2ACardResolver(http, url).get_agent_card()
        name = "".join(c if c.isalnum() or c in "_-" else "_" for c in card.name) or "remote_agent"
        options.setdefault("name", name)
        options.setdefault("description", card.description)
        return cls(url, **options)

    async def run(self, ctx: RunContext[Any] | None, input: AgentInput | str) -> AsyncIterator[AgentEvent]:
        """Send the input's request as one A2A task and follow it."""
        items = AgentInput.from_user_text(input).items if isinstance(input, str) else input.items
        yield RunStarted(self.name, RunId(f"a2a-{uuid.uuid4().hex}"))
        try:
            async for event in self._task(request_text(items)):
                yield event
        except Exception as exc:  # the network, the remote agent: this child's failure
            yield RunFailed(OtherError(f"A2A agent {self.name!r} at {self.url}: {type(exc).__name__}: {exc}"))

    async def _task(self, text: str) -> AsyncIterator[AgentEvent]:
        async with httpx.AsyncClient(headers=self.headers, timeout=self.timeout) as http:
            client = await create_client(self.url, ClientConfig(streaming=self.streaming, httpx_client=http))
            try:
                message = new_text_message(text, role=Role.ROLE_USER)
                artifacts: dict[str, str] = {}
                state: int = TaskState.TASK_STATE_UNSPECIFIED
                detail = ""
                task_id = ""
                async for response in client.send_message(SendMessageRequest(message=message)):
                    for event in _deltas(response, artifacts):
                        yield event
                    state, detail, task_id = _status(response, state, detail, task_id)
                    if response.HasField("message"):  # a direct answer, no task
                        artifacts["message"] = _parts_text(response.message.parts)
                        state = TaskState.TASK_STATE_COMPLETED
                if (
                    state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)
                    and task_id
                ):
                    await client.cancel_task(CancelTaskRequest(id=task_id))
            finally:
                await client.close()
        if state == TaskState.TASK_STATE_COMPLETED:
            output = "\n".join(v for v in artifacts.values() if v)
            yield MessageOutput(AssistantMessage((TextPart(output),), agent=self.name))
            yield RunCompleted(Usage())
            return
        why = _FAILED.get(state, "ended without completing")
        yield RunFailed(OtherError(f"A2A agent {self.name!r} {why}" + (f": {detail}" if detail else "")))


def _deltas(response: StreamResponse, artifacts: dict[str, str]) -> list[AgentEvent]:
    """Token deltas for new artifact text; ``artifacts`` keeps each artifact's text."""
    found: list[tuple[Artifact, bool]] = []
    if response.HasField("artifact_update"):
        found.append((response.artifact_update.artifact, response.artifact_update.append))
    if response.HasField("task"):
        found.extend((a, False) for a in response.task.artifacts)
    events: list[AgentEvent] = []
    for artifact, append in found:
        text = _parts_text(artifact.parts)
        before = artifacts.get(artifact.artifact_id, "")
        now = before + text if append else text
        artifacts[artifact.artifact_id] = now
        if now.startswith(before) and len(now) > len(before):
            events.append(TokenDelta(now[len(before) :]))
    return events


def _status(response: StreamResponse, state: int, detail: str, task_id: str) -> tuple[int, str, str]:
    status = None
    if response.HasField("task"):
        status, task_id = response.task.status, response.task.id
    elif response.HasField("status_update"):
        status, task_id = response.status_update.status, response.status_update.task_id
    if status is None:
        return state, detail, task_id
    message = _parts_text(status.message.parts) if status.HasField("message") else ""
    return status.state, message or detail, task_id


__all__ = ["RemoteA2AAgent", "request_text"]
