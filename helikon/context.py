"""The run context and the narrower view a tool gets.

:class:`RunContext` carries what a run shares with the world: the user's own
context object, the session, hooks, tracer, cancellation token and run-scoped
state. It is a frozen value; ``with_*`` methods return changed copies.
:class:`ToolContext` is what a tool sees: everything but the session, so a
tool cannot bypass the run's persistence.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Generic, TypeVar

import attrs

from helikon.cancel import CancellationToken
from helikon.config import PermissionMode
from helikon.ids import CallId, RunId

if TYPE_CHECKING:
    from helikon.protocols import Session

Ctx = TypeVar("Ctx")
Ctx2 = TypeVar("Ctx2")


@attrs.define
class SessionState:
    """Run-scoped key/value state shared by the tools and sub-agents of a run.

    It is the one mutable thing a run hands to user code; it is not part of
    the pure machine's state and is not recorded in traces.
    """

    values: MutableMapping[str, object] = attrs.field(factory=dict)

    def get(self, key: str, default: object = None) -> object:
        return self.values.get(key, default)

    def __getitem__(self, key: str) -> object:
        return self.values[key]

    def __setitem__(self, key: str, value: object) -> None:
        self.values[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.values


@attrs.define
class Actions:
    """Signals a tool can raise to the agents around it."""

    escalated: bool = False

    def escalate(self) -> None:
        """Ask an enclosing loop agent to stop after this iteration."""
        self.escalated = True


@attrs.frozen
class HookRegistry:
    """The hooks and guardrails a run carries (see the governance docs)."""

    hooks: tuple[object, ...] = ()


@attrs.frozen
class TracerHandle:
    """Where a run reports spans; the default reports nowhere."""

    tracer: object | None = None


@attrs.frozen
class RunContext(Generic[Ctx]):
    """Everything a run shares with the world.

    Build one with :meth:`ephemeral` and override parts with the ``with_*``
    methods, each of which returns a new context.
    """

    user_ctx: Ctx
    session: Session | None = None
    hooks: HookRegistry = HookRegistry()
    tracer: TracerHandle = TracerHandle()
    cancel: CancellationToken = attrs.field(factory=CancellationToken)
    state: SessionState = attrs.field(factory=SessionState)
    permission_mode: PermissionMode = PermissionMode.DEFAULT
    agent_depth: int = 0

    @classmethod
    def ephemeral(cls, user_ctx: Ctx) -> RunContext[Ctx]:
        """A context with defaults: no session, no hooks, a fresh token."""
        return cls(user_ctx)

    def with_session(self, session: Session | None) -> RunContext[Ctx]:
        return attrs.evolve(self, session=session)

    def with_hooks(self, hooks: HookRegistry) -> RunContext[Ctx]:
        return attrs.evolve(self, hooks=hooks)

    def with_tracer(self, tracer: TracerHandle) -> RunContext[Ctx]:
        return attrs.evolve(self, tracer=tracer)

    def with_cancel(self, cancel: CancellationToken) -> RunContext[Ctx]:
        return attrs.evolve(self, cancel=cancel)

    def with_user_ctx(self, user_ctx: Ctx2) -> RunContext[Ctx2]:
        return RunContext(
            user_ctx,
            self.session,
            self.hooks,
            self.tracer,
            self.cancel,
            self.state,
            self.permission_mode,
            self.agent_depth,
        )


@attrs.frozen
class ToolContext(Generic[Ctx]):
    """What a running tool may see and do (no session)."""

    user_ctx: Ctx
    state: SessionState
    actions: Actions
    cancel: CancellationToken
    tracer: TracerHandle
    call_id: CallId
    run_id: RunId
    agent: str
    agent_depth: int = 0
    max_agent_depth: int = 8
    permission_mode: PermissionMode = PermissionMode.DEFAULT


__all__ = ["Actions", "HookRegistry", "RunContext", "SessionState", "ToolContext", "TracerHandle"]
