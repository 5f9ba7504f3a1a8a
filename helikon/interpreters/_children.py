"""Running a child agent that is not a helikon machine (anything with
``run(ctx, input)``), whole, as one effect.

Its events are forwarded to the parent's stream, all but its own
``RunStarted`` and terminal event (the tree emits one outer pair); its final
text, usage and error come back as a :class:`ChildEnd`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import attrs

from helikon.context import Actions, RunContext
from helikon.errors import AgentError, OtherError
from helikon.events import AgentEvent, MessageOutput, RunCompleted, RunFailed, RunStarted
from helikon.items import AgentInput, AssistantMessage, Item, text_of
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
    agent: Any, ctx: RunContext[Any], input: tuple[Item, ...]
) -> AsyncIterator[AgentEvent | ChildEnd]:
    """Run ``agent`` (any object with ``run(ctx, input)``) on ``input``: its
    forwarded events, then a :class:`ChildEnd`.

    Helikon's own agents never come here: they are sub-machines of the tree
    (:mod:`helikon.agents._tree`); this runs the ones that are not machines.
    """
    actions = Actions()
    stream: AsyncIterator[AgentEvent] = agent.run(ctx, AgentInput(input))
    output = ""
    usage = Usage()
    error: AgentError | None = OtherError(
        f"agent {getattr(agent, 'name', agent)!r} ended without a terminal event"
    )
    try:
        async for event in stream:
            match event:
                case RunStarted():
                    continue
                case RunCompleted(usage=done):
                    usage, error = done, None
                    continue
                case RunFailed(usage=done, error=failure):
                    usage, error = done, failure
                    continue
                case MessageOutput(item=AssistantMessage(content=content)):
                    output = text_of(content)
            yield event
    except Exception as exc:  # a user-defined agent's bug is that child's failure
        error = OtherError(f"agent {getattr(agent, 'name', agent)!r} raised {type(exc).__name__}: {exc}")
    yield ChildEnd(output, usage, error, actions.escalated)


__all__ = ["ChildEnd", "resolve", "run_child"]
