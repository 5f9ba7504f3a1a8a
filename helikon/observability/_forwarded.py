"""Which child run a forwarded event belongs to.

While a ``Handoff`` or ``RunAgents`` effect is performed, the interpreter
streams the events of the child runs it drives: everything but each child's
own ``RunStarted`` and terminal event, in the order the children produced
them (a parallel wave's children one after the other, once the wave is
over). The children announce themselves with two markers, and
:class:`Forwarded` follows them:

- ``AgentUpdated(name)`` before the events of a workflow's child: a child of
  the nearest workflow up the current chain whose definition has a child of
  that name (a sibling before it is then over), else the effect's next child
  of that name, else a child of the current run;
- ``HandoffItem(from, to)`` when a child hands off: a new run of ``to``
  under the run of ``from`` (its ``AgentUpdated(to)`` is then no news).

Every other event goes to the current run, unless the observer sees that
run directly (then its own effects tell more than its events).
"""

from __future__ import annotations

from typing import Final, final

from helikon.events import (
    AgentEvent,
    AgentUpdated,
    HandoffItem,
    ReasoningDelta,
    TokenDelta,
    ToolCallDelta,
)
from helikon.observability._runs import (
    RunSpans,
    child_names,
    close_children,
    definition_of,
    model_of,
    on_event,
    open_run,
)

#: Raw deltas tell a span tree nothing the semantic events do not.
_DELTAS: Final = frozenset({TokenDelta, ReasoningDelta, ToolCallDelta})


def open_child(host: RunSpans, name: str, at: int, agent: object = None, key: str | None = None) -> RunSpans:
    """A run of ``name`` seen through its events, under ``host``."""
    if agent is None:
        agent = definition_of(host.agent, name)
    provider, model = model_of(agent)
    return open_run(
        host.signals,
        key=f"{host.key}/{key or name}",
        name=name,
        parent=host,
        stamps=host.stamps,
        provider=provider,
        model=model,
        at=at,
        agent=agent,
        secrets=host.secrets,
    )


@final
class Forwarded:
    """Routes the events forwarded while one effect runs child agents.

    Args:
        parent: the run that asked for the children.
        tops: the effect's children, in order.
        first: the child whose events come first unannounced (a handoff
            target); ``None`` when each child is announced (workflows).
    """

    def __init__(self, parent: RunSpans, tops: list[RunSpans], first: RunSpans | None) -> None:
        self.parent = parent
        self.waiting = [t for t in tops if t is not first]
        self.active = first

    def feed(self, event: AgentEvent, at: int) -> None:
        kind = type(event)
        if kind in _DELTAS:
            return
        if kind is AgentUpdated:
            self._announced(event.agent, at)  # type: ignore[union-attr]
            return
        if kind is HandoffItem:
            self._handed_off(event.from_agent, event.to_agent, at)  # type: ignore[union-attr]
            return
        run = self.active
        if run is not None and not run.direct and not run.closed:
            on_event(run, event, at)

    def _announced(self, name: str, at: int) -> None:
        active = self.active
        if active is not None and active.name == name:
            return
        run = active
        while run is not None and run is not self.parent:
            if name in child_names(run.agent):
                close_children(run, at)  # the workflow's previous child is over
                self.active = open_child(run, name, at)
                return
            run = run.parent
        top = next((t for t in self.waiting if t.name == name), None)
        if top is not None:
            self.waiting.remove(top)
            if active is not None:  # the previous child's own children are over
                close_children(_top_of(active, self.parent), at)
            self.active = top
            return
        self.active = open_child(active or self.parent, name, at)

    def _handed_off(self, source: str, target: str, at: int) -> None:
        run = self.active
        while run is not None and run is not self.parent and run.name != source:
            run = run.parent
        host = run if run is not None and run is not self.parent else (self.active or self.parent)
        self.active = open_child(host, target, at)


def _top_of(run: RunSpans, parent: RunSpans) -> RunSpans:
    """The effect's child that ``run`` descends from (or is)."""
    while run.parent is not None and run.parent is not parent:
        run = run.parent
    return run


__all__ = ["Forwarded", "open_child"]
