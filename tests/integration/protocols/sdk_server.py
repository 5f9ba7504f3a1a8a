"""An A2A agent built on the a2a-sdk alone (no helikon): its own executor,
request handler, task store and routes, as the SDK's examples build one."""

from __future__ import annotations

from typing import Any

from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class ShoutingExecutor(AgentExecutor):
    """Answers ``SHOUT: <the text in capitals>`` as an artifact; ``fail`` fails the task."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.requests.append(text)
        task_id, context_id = context.task_id or "", context.context_id or ""
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("the shouter lost its voice")]))
            return
        await updater.add_artifact([new_text_part("SHOUT: ")], artifact_id="a1", name="answer")
        await updater.add_artifact(
            [new_text_part(text.upper())], artifact_id="a1", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def shouter_app(url: str, executor: ShoutingExecutor) -> Any:
    card = AgentCard(
        name="shouter",
        description="Repeats what it is told, in capitals.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="shout", name="shout", description="Shouts.", tags=["text"])],
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
