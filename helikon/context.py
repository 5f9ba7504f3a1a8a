"""The run context and the narrower view a tool gets.

:class:`RunContext` carries what a run shares with the world: the user's own
context object, the session, hooks, tracer, cancellation token and run-scoped
state. It is a frozen value; ``with_*`` methods return changed copies.
:class:`ToolContext` is what a tool sees: everything but the session, so a
tool cannot bypass the run's persistence.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any, Generic, TypeVar

import attrs

from helikon import _plugins
from helikon.cancel import CancellationToken
from helikon.config import PermissionMode
from helikon.errors import ConfigError
from helikon.governance import mode_change_allowed
from helikon.ids import CallId, RunId
from helikon.pricing import PriceSource
from helikon.sessions._protocol import Session

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


def _as_tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(items)


def _as_tags(tags: str | Iterable[str]) -> tuple[str, ...]:
    """Tags as a tuple; one string is one tag (not its characters)."""
    return (tags,) if isinstance(tags, str) else tuple(tags)


@attrs.frozen
class HookRegistry:
    """The hooks and guardrails a run carries (see ``docs/governance.md``).

    A hook is a function ``(ctx, event) -> HookDecision | None`` (sync or
    async) called for every :mod:`helikon.governance` hook event; a
    guardrail a function ``(ctx, input) -> GuardrailVerdict`` (sync or
    async) given the user's text (input guardrails) or the final answer
    (output guardrails). Run-level ones fire after the agent's own.
    """

    hooks: tuple[Any, ...] = attrs.field(default=(), converter=_as_tuple)
    input_guardrails: tuple[Any, ...] = attrs.field(default=(), converter=_as_tuple)
    output_guardrails: tuple[Any, ...] = attrs.field(default=(), converter=_as_tuple)

    def with_hook(self, hook: Any) -> HookRegistry:
        return attrs.evolve(self, hooks=(*self.hooks, hook))

    def with_input_guardrail(self, guardrail: Any) -> HookRegistry:
        return attrs.evolve(self, input_guardrails=(*self.input_guardrails, guardrail))

    def with_output_guardrail(self, guardrail: Any) -> HookRegistry:
        return attrs.evolve(self, output_guardrails=(*self.output_guardrails, guardrail))


_GLOBAL_TELEMETRY: list[Any] = []


def _global_telemetry() -> Any:
    """The observer of runs whose handle names no tracer: a
    :class:`~helikon.observability.Telemetry` of the global providers when
    ``opentelemetry-api`` is installed and a provider is configured, else None.

    The observability integration sits above this layer: the facade plugs
    its factory in (:data:`helikon._plugins.default_observer`), and it is
    built only once a provider is known to be configured."""
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        return None
    if type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.trace") and type(
        metrics.get_meter_provider()
    ).__module__.startswith("opentelemetry.metrics"):
        return None  # the API's own proxy and no-op providers: nothing configured
    if not _GLOBAL_TELEMETRY:
        if _plugins.default_observer is None:
            return None
        _GLOBAL_TELEMETRY.append(_plugins.default_observer())
    return _GLOBAL_TELEMETRY[0]


@attrs.frozen
class TracerHandle:
    """Where a run reports spans, and the trace attributes it stamps on them.

    ``tracer`` is what observes the run: anything with an
    ``instrument(interpreter, handle)`` method, such as
    :class:`helikon.observability.Telemetry`; ``agent.run`` wraps its
    interpreter with it. The default (``None``) reports to the globally
    installed OpenTelemetry providers when ``opentelemetry-api`` is
    installed and an application configured one (spans go to whatever
    exporter is installed); with none configured it costs nothing.
    ``session_id``, ``user_id`` and ``tags`` are stamped on the run and turn
    spans (``session.id``, ``user.id``, ``langfuse.trace.tags``; the session
    id is also the ``gen_ai.conversation.id``).

    Build one with keywords, or with the book's builder::

        TracerHandle.builder().with_session_id("s-1").with_user_id("u-7").with_tag("prod").build()

    >>> handle = TracerHandle.builder().with_session_id("demo").with_tag("a").with_tag("b").build()
    >>> handle.session_id, handle.user_id, handle.tags
    ('demo', None, ('a', 'b'))
    """

    tracer: object | None = None
    session_id: str | None = None
    user_id: str | None = None
    tags: tuple[str, ...] = attrs.field(default=(), converter=_as_tags)

    @classmethod
    def builder(cls) -> TracerHandle:
        """An empty handle to chain ``with_*`` calls on (``build()`` ends the chain)."""
        return cls()

    def build(self) -> TracerHandle:
        """This handle (the end of a builder chain)."""
        return self

    def with_tracer(self, tracer: object | None) -> TracerHandle:
        return attrs.evolve(self, tracer=tracer)

    def with_session_id(self, session_id: str | None) -> TracerHandle:
        return attrs.evolve(self, session_id=session_id)

    def with_user_id(self, user_id: str | None) -> TracerHandle:
        return attrs.evolve(self, user_id=user_id)

    def with_tag(self, tag: str) -> TracerHandle:
        return attrs.evolve(self, tags=(*self.tags, tag))

    def with_tags(self, tags: Iterable[str]) -> TracerHandle:
        return attrs.evolve(self, tags=(*self.tags, *tags))

    def instrument(self, interpreter: Any) -> Any:
        """``interpreter`` observed by ``tracer`` when it can observe runs
        (it has ``instrument``) — with no ``tracer``, by the global
        OpenTelemetry providers when one is configured — else
        ``interpreter`` itself."""
        tracer = self.tracer if self.tracer is not None else _global_telemetry()
        instrument = getattr(tracer, "instrument", None)
        return interpreter if instrument is None else instrument(interpreter, self)


@attrs.frozen
class Governed:
    """A run's permission configuration, as sub-agent runs inherit it.

    The fields are the :class:`RunContext` fields of the same names;
    :meth:`RunContext.governed` reads them and :meth:`RunContext.with_governed`
    applies them (an ``AgentAsTool`` sub-run is governed like its parent).
    """

    permission_mode: PermissionMode = PermissionMode.DEFAULT
    deny_rules: tuple[Any, ...] = ()
    allow_rules: tuple[Any, ...] = ()
    guard_rules: tuple[Any, ...] = ()
    default_guards: bool = True
    permission_policy: Any = None
    approval_handler: Any = None
    extra_secrets: tuple[str, ...] = ()
    redact_output: bool = True
    suspend_on_approval: bool = False


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
    deny_rules: tuple[Any, ...] = ()
    allow_rules: tuple[Any, ...] = ()
    guard_rules: tuple[Any, ...] = ()
    default_guards: bool = True
    permission_policy: Any = None
    approval_handler: Any = None
    extra_secrets: tuple[str, ...] = ()
    redact_output: bool = True
    suspend_on_approval: bool = False
    #: Where model prices come from (see :mod:`helikon.pricing`); None: no
    #: prices, every cost is None.
    prices: PriceSource | None = None

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
        return attrs.evolve(self, user_ctx=user_ctx)  # type: ignore[return-value, arg-type]

    def with_permission_mode(self, mode: PermissionMode) -> RunContext[Ctx]:
        """Change the permission mode; it only tightens: BYPASS can only go to
        DONT_ASK, and DONT_ASK is final (``ConfigError`` otherwise)."""
        if not mode_change_allowed(self.permission_mode, mode):
            raise ConfigError(f"permission mode {self.permission_mode.name} cannot change to {mode.name}")
        return attrs.evolve(self, permission_mode=mode)

    def with_deny_rules(self, rules: Iterable[Any]) -> RunContext[Ctx]:
        return attrs.evolve(self, deny_rules=(*self.deny_rules, *rules))

    def with_allow_rules(self, rules: Iterable[Any]) -> RunContext[Ctx]:
        return attrs.evolve(self, allow_rules=(*self.allow_rules, *rules))

    def with_guard_rules(self, rules: Iterable[Any]) -> RunContext[Ctx]:
        return attrs.evolve(self, guard_rules=(*self.guard_rules, *rules))

    def without_default_guards(self) -> RunContext[Ctx]:
        """Drop ``GuardRule.destructive_defaults()`` (on by default)."""
        return attrs.evolve(self, default_guards=False)

    def with_permission_policy(self, policy: Any) -> RunContext[Ctx]:
        """``policy(ctx, tool_name, args) -> PermissionDecision`` (sync or async)."""
        return attrs.evolve(self, permission_policy=policy)

    def with_approval_handler(self, handler: Any) -> RunContext[Ctx]:
        """``handler(request) -> Allow() | Deny(reason)`` (sync or async)."""
        return attrs.evolve(self, approval_handler=handler)

    def with_prices(self, prices: PriceSource | None) -> RunContext[Ctx]:
        """Price each model call from ``prices``: a :class:`~helikon.PriceTable`
        or :class:`~helikon.providers.prices.GenaiPrices` (the ``prices`` extra)."""
        return attrs.evolve(self, prices=prices)

    def with_extra_secrets(self, secrets: Iterable[str]) -> RunContext[Ctx]:
        return attrs.evolve(self, extra_secrets=(*self.extra_secrets, *secrets))

    def without_output_redaction(self) -> RunContext[Ctx]:
        return attrs.evolve(self, redact_output=False)

    def governed(self) -> Governed:
        """This context's permission configuration (what sub-agents inherit)."""
        return Governed(
            self.permission_mode,
            self.deny_rules,
            self.allow_rules,
            self.guard_rules,
            self.default_guards,
            self.permission_policy,
            self.approval_handler,
            self.extra_secrets,
            self.redact_output,
            self.suspend_on_approval,
        )

    def with_governed(self, governed: Governed) -> RunContext[Ctx]:
        """This context with ``governed``'s permission configuration."""
        return attrs.evolve(self, **attrs.asdict(governed, recurse=False))

    def with_suspend_on_approval(self, suspend: bool = True) -> RunContext[Ctx]:
        """With no approval handler, stop the run in ``NeedsApproval`` instead
        of denying, to be resumed later with the decision."""
        return attrs.evolve(self, suspend_on_approval=suspend)


@attrs.frozen
class ToolContext(Generic[Ctx]):
    """What a running tool may see and do (no session).

    ``prices`` is the run's price source (:meth:`RunContext.with_prices`):
    an agent used as a tool passes it on to its sub-run.
    """

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
    governed: Governed = Governed()
    prices: PriceSource | None = attrs.field(default=None, kw_only=True)


__all__ = ["Actions", "Governed", "HookRegistry", "RunContext", "SessionState", "ToolContext", "TracerHandle"]
