"""Running sub-agents: workflow children and handoff targets.

A child is driven by the same interpreter as its parent. Its events are
forwarded to the parent's stream, all but its own ``RunStarted`` and
terminal event (a composite emits one outer pair); its final text, usage and
error come back as a :class:`ChildEnd`. Agents that are not helikon machines
(anything with ``run(ctx, input)``) are run as they are.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import attrs

from helikon.context import Actions, RunContext
from helikon.errors import AgentError, OtherError
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, RunStarted
from helikon.items import AgentInput, Item, text_of
from helikon.model import Usage


@attrs.frozen
class ChildEnd:
    """How a child run ended."""

    output: str
    usage: Usage
    error: AgentError | None
    escalated: bool = False


def resolve(entry: Any) -> Any:
    """The agent behind a registry entry (a ``Handoff`` resolves lazily)."""
    resolver = getattr(entry, "resolve", None)
    return resolver() if callable(resolver) else entry


async def run_child(
    interpreter: Any,
    agent: Any,
    ctx: RunContext[Any],
    input: tuple[Item, ...],
    *,
    path: tuple[str | int, ...],
    run_id: str,
    limits: Any,
) -> AsyncIterator[AgentEvent | ChildEnd]:
    """Run ``agent`` on ``input``: its forwarded events, then a :class:`ChildEnd`."""
    from helikon.interpreters._drive import drive

    actions = Actions()
    make_env = getattr(agent, "make_env", None)
    if make_env is not None:
        env = make_env(ctx, interpreter, run_id=run_id, path=path, actions=actions, parent=limits)
        stream: AsyncIterator[AgentEvent] = drive(interpreter, env, AgentInput(input))
    else:
        stream = agent.run(ctx, AgentInput(input))
    output = ""
    usage = Usage()
    error: AgentError | None = OtherError(
        f"agent {getattr(agent, 'name', agent)!r} ended without a terminal event"
    )
    try:
        async for event in stream:
            kind = type(event)
            if kind is RunStarted:
                continue
            if kind is RunCompleted:
                usage, error = event.usage, None  # type: ignore[union-attr]
                continue
            if kind is RunFailed:
                usage, error = event.usage, event.error  # type: ignore[union-attr]
                continue
            if kind is MessageOutput:
                output = text_of(event.item.content)  # type: ignore[union-attr, arg-type]
            yield event
    except Exception as exc:  # a user-defined agent's bug is that child's failure
        error = OtherError(f"agent {getattr(agent, 'name', agent)!r} raised {type(exc).__name__}: {exc}")
    yield ChildEnd(output, usage, error, actions.escalated)


__all__ = ["ChildEnd", "resolve", "run_child"]
