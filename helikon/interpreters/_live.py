"""The live interpreter: performs effects with real models and tools.

It runs under trio or asyncio (through anyio). Model streams are consumed
chunk by chunk, each chunk turned into its raw delta event at once with the
pure :func:`~helikon.loop.delta_event`. Tool calls of one turn run
concurrently in a task group under ``parallel_tool_call_limit``; their
outcomes go back in call order, whatever order they finish in.

Cancellation: tools and instructions run inside a cancel scope tied to the
run's token and deadline, so a cancel interrupts them at once. A model
stream is checked between chunks (a cancel scope must not stay open across
the ``yield`` that streams a delta); model adapters receive the token and
wrap their network waits in :meth:`CancellationToken.scope`.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator
from typing import final

import msgspec

from helikon._json import JsonObject
from helikon.context import ToolContext
from helikon.effects import (
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    RenderInstructions,
    Terminate,
    ToolOutcome,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import (
    ModelError,
    OtherModelFailure,
    StepError,
    ToolCrashed,
    ToolError,
    TransportFailure,
)
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._drive import interruption
from helikon.interpreters._env import RunEnv
from helikon.items import ToolCall
from helikon.loop import delta_event
from helikon.model import ModelEvent

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def tool_output_text(value: object) -> str:
    """The text the model sees for a tool's return value (JSON unless a str).

    msgspec encodes attrs classes, dataclasses, Structs, enums and datetimes
    directly; a value it cannot encode raises ``TypeError``.
    """
    if isinstance(value, str):
        return value
    return _encode(value).decode()


@final
class LiveInterpreter:
    """Performs effects for real. The default interpreter of ``agent.run``.

    Args:
        run_id: use this id for every run (tests); by default each run gets
            a fresh random one.
    """

    def __init__(self, run_id: str | None = None) -> None:
        self._run_id = run_id

    def new_run_id(self) -> RunId:
        return RunId(self._run_id if self._run_id is not None else uuid.uuid4().hex)

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        stopped = interruption(env)
        if stopped is not None:
            yield stopped
            return
        match effect:
            case CallModel():
                async for item in self._call_model(effect, env):
                    yield item
            case ExecuteTools(calls=calls):
                yield await self._execute_tools(calls, env)
            case RenderInstructions():
                yield await self._render_instructions(env)
            case Handoff() | Terminate():
                raise StepError(f"the live interpreter cannot perform {type(effect).__name__} yet")

    async def _call_model(self, effect: CallModel, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        events: list[ModelEvent] = []
        deadline = env.deadline
        # The model gets a token that also carries the run's deadline, so an
        # adapter's waits under ``cancel.scope()`` end at the timeout too.
        cancel = env.ctx.cancel if deadline is None else env.ctx.cancel.child(deadline)
        try:
            stream = env.model.invoke(effect.request, cancel)
            try:
                async for event in stream:
                    events.append(event)
                    delta = delta_event(event)
                    if delta is not None:
                        yield delta
                    if cancel.cancelled or (
                        deadline is not None and len(events) % 64 == 0 and interruption(env) is not None
                    ):
                        break
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
        except ModelError as exc:
            yield ModelCallFailed(exc.failure, tuple(events))
            return
        except (OSError, EOFError) as exc:
            yield ModelCallFailed(TransportFailure(f"{type(exc).__name__}: {exc}"), tuple(events))
            return
        except Exception as exc:  # a model adapter bug must not crash the run
            yield ModelCallFailed(OtherModelFailure(f"{type(exc).__name__}: {exc}"), tuple(events))
            return
        finally:
            if cancel is not env.ctx.cancel:
                cancel.detach()
        stopped = interruption(env)
        yield stopped if stopped is not None else ModelResponded(tuple(events))

    async def _render_instructions(self, env: RunEnv) -> EffectResult:
        if env.instructions is None:
            raise StepError("the agent has no instructions function")
        with env.ctx.cancel.scope(env.deadline):
            text = env.instructions(env.ctx)
            if inspect.isawaitable(text):
                text = await text
            return InstructionsRendered(str(text))
        return interruption(env) or _cancelled()

    async def _execute_tools(self, calls: tuple[ToolCall, ...], env: RunEnv) -> EffectResult:
        outcomes: list[ToolOutcome | None] = [None] * len(calls)
        with env.ctx.cancel.scope(env.deadline):
            if len(calls) == 1:
                outcomes[0] = await _run_tool(calls[0], env)
            else:
                import anyio

                limit = env.spec.config.parallel_tool_call_limit
                limiter = anyio.CapacityLimiter(limit) if limit is not None else None

                async def worker(index: int, call: ToolCall) -> None:
                    if limiter is None:
                        outcomes[index] = await _run_tool(call, env)
                    else:
                        async with limiter:
                            outcomes[index] = await _run_tool(call, env)

                async with anyio.create_task_group() as group:
                    for index, call in enumerate(calls):
                        group.start_soon(worker, index, call)
        stopped = interruption(env)
        if stopped is not None or any(o is None for o in outcomes):
            return stopped or _cancelled()
        return ToolsExecuted(tuple(o for o in outcomes if o is not None))


def _cancelled() -> EffectResult:
    from helikon.effects import RunInterrupted
    from helikon.errors import Cancelled

    return RunInterrupted(Cancelled())


async def _run_tool(call: ToolCall, env: RunEnv) -> ToolOutcome:
    tool = env.tools.get(call.name)
    if tool is None:
        return ToolRaised(call.call_id, ToolCrashed(f"tool {call.name!r} has no implementation"))
    ctx = env.ctx
    tool_ctx = ToolContext(
        ctx.user_ctx,
        ctx.state,
        env.actions,
        ctx.cancel,
        ctx.tracer,
        call.call_id,
        env.run_id,
        env.spec.name,
        ctx.agent_depth,
        env.spec.config.max_agent_depth,
        ctx.permission_mode,
    )
    try:
        args: JsonObject = _decode(call.arguments) if call.arguments else {}
        return ToolReturned(call.call_id, tool_output_text(await tool.invoke(tool_ctx, args)))
    except ToolError as exc:
        return ToolRaised(call.call_id, exc.failure)
    except Exception as exc:  # the model sees the failure; the run goes on
        return ToolRaised(call.call_id, ToolCrashed(f"{type(exc).__name__}: {exc}"))


__all__ = ["LiveInterpreter", "tool_output_text"]
