"""What one step of the machine returns."""

from __future__ import annotations

import attrs

from helikon.effects import Effect
from helikon.events import AgentEvent
from helikon.items import Item
from helikon.loop._states import RunState


@attrs.frozen
class Outcome:
    """The result of a step.

    Args:
        state: the next state.
        events: the events the step emitted, in order.
        effect: what the interpreter must do next (``Terminate`` when the
            state is terminal).
        appended: the items this step added to the conversation.
    """

    state: RunState
    events: tuple[AgentEvent, ...]
    effect: Effect
    appended: tuple[Item, ...] = ()


__all__ = ["Outcome"]
