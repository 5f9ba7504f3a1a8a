"""The observer: any interpreter, plus OpenTelemetry spans and metrics.

:class:`ObservingInterpreter` wraps an interpreter (live, recording, replay,
a user's own) and reads what passes through it — the outcomes
:func:`~helikon.interpreters.drive` shows it, the effects it is asked to
perform, the live events and the results — and nothing else: the pure core
knows nothing of telemetry. What each run becomes is in
:mod:`helikon.observability._runs`; how a performed effect — for a
multi-agent run, a wave of effects addressed to the agent tree's sub-runs —
becomes spans, in :mod:`helikon.observability._waves`.

While the inner interpreter works on an effect, the effect's span is the
current OpenTelemetry span (a model call's ``chat`` span, a tool's own
``execute_tool`` span, else the run's turn), so spans that user code, model
adapters or HTTP instrumentation start nest where they belong; an agent that
a tool of the run starts with ``agent.run`` becomes a child of that tool's
span.

With neither a tracer provider nor a meter provider configured when a run
starts, the observer hands every effect to the inner interpreter untouched.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, cast, final

import attrs
from opentelemetry import metrics, trace

from helikon.effects import Effect, EffectResult, PerformAll, RunAgents, Terminate
from helikon.errors import RunSuspended
from helikon.events import (
    AgentEvent,
    ReasoningDelta,
    RunCompleted,
    RunFailed,
    TokenDelta,
    ToolCallDelta,
    ToolOutputItem,
)
from helikon.ids import RunId
from helikon.interpreters import RESULT_TYPES, Interpreter, LiveInterpreter, RunEnv
from helikon.interpreters._machine import OutcomeLike
from helikon.model import Usage
from helikon.observability._operations import relay
from helikon.observability._runs import (
    NOTED,
    RunSpans,
    close_run,
    model_of,
    note,
    now,
    open_run,
    parent_of,
    stamps_of,
)
from helikon.observability._telemetry import Signals, replayed, replaying, resolve_signals
from helikon.observability._waves import Tree, Wave, owner, settle

#: The live events that are pieces of a streamed model answer.
CHUNKS: frozenset[type] = frozenset({TokenDelta, ReasoningDelta, ToolCallDelta})


@final
class Telemetry:
    """Where runs report spans and metrics, and whether content goes along.

    Put one on a run context's :class:`~helikon.context.TracerHandle` to
    observe every ``agent.run`` under that context — and the agents its
    tools run — or give it to an :class:`ObservingInterpreter`.

    Args:
        tracer_provider: the OpenTelemetry tracer provider; ``None`` uses the
            global one, as it is when each run starts.
        meter_provider: the meter provider; ``None`` uses the global one.
        capture_content: also record the messages, system instructions,
            tool arguments and tool results (off by default: they may hold
            personal data). Captured text is scrubbed of the run's secrets.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        capture_content: bool = False,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.capture_content = capture_content
        self._signals: Signals | None = None

    def signals(self) -> Signals | None:
        """The signals for a run starting now; ``None`` when no provider is
        configured to receive them."""
        signals = resolve_signals(
            self.tracer_provider, self.meter_provider, self.capture_content, self._signals
        )
        if signals is not None:
            self._signals = signals
        return signals

    def instrument(self, interpreter: Any, handle: object = None) -> Any:
        """``interpreter`` observed (unless it is observed already): what
        :meth:`TracerHandle.instrument <helikon.context.TracerHandle.instrument>`
        calls for ``agent.run``."""
        if isinstance(interpreter, ObservingInterpreter):
            return interpreter
        return ObservingInterpreter(interpreter, telemetry=self)


@final
class ObservingInterpreter:
    """Performs effects with ``inner`` and reports them to OpenTelemetry.

    Args:
        inner: the interpreter that performs effects; ``None`` means a new
            :class:`~helikon.interpreters.LiveInterpreter`.
        tracer_provider: where spans go (``None``: the global provider).
        meter_provider: where metrics go (``None``: the global provider).
        capture_content: record message content and tool arguments and
            results too (off by default).
        telemetry: all three at once (then the other arguments are ignored).
    """

    def __init__(
        self,
        inner: Interpreter | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool = False,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.inner: Interpreter = inner if inner is not None else LiveInterpreter()
        self.telemetry = telemetry or Telemetry(
            tracer_provider, meter_provider, capture_content=capture_content
        )
        self._inner_observe = getattr(self.inner, "observe", None)
        clock = getattr(self.inner, "now", None)
        if clock is not None:  # the inner interpreter's clock is the run's (drive reads ``now``)
            self.__dict__["now"] = clock
        self._runs: dict[str, RunSpans] = {}
        self._last_env: tuple[weakref.ref[RunEnv], RunEnv] | None = None
        self._signals: Signals | None = None
        self._resolve()

    def new_run_id(self) -> RunId:
        # Whether anything receives telemetry is decided as each run starts.
        self._resolve()
        return self.inner.new_run_id()

    def _resolve(self) -> None:
        """Look up the signals; with none, step aside: ``drive`` then finds the
        inner interpreter's own ``perform`` and ``observe`` on this object
        (instance attributes shadow the methods), so an observer with nothing
        to report to adds no call at all to a run's steps."""
        self._signals = self.telemetry.signals()
        inner_part = getattr(self.inner, "perform_part", None)
        if self._signals is not None and replaying(self.inner):
            self._signals = replayed(self._signals)  # a replay performs nothing anew
        if self._signals is None:
            self.__dict__["perform"] = self.inner.perform
            self.__dict__["observe"] = self._inner_observe
            self.__dict__["perform_part"] = inner_part
        else:
            self.__dict__.pop("perform", None)
            self.__dict__.pop("observe", None)
            # Spans are made wave by wave: an observed run performs each wave
            # whole (lock-step; part-by-part spans are left for later).
            self.__dict__["perform_part"] = None

    def observe(self, env: RunEnv, outcome: OutcomeLike) -> None:
        signals = self._signals
        if self._inner_observe is not None:
            try:
                self._inner_observe(env, outcome)
            except BaseException as exc:  # a replay's divergence, say: the run ends here
                run = self._runs.get(env.run_id) if signals is not None else None
                if run is not None:
                    self._close(run, now(), error=exc)
                raise
        if signals is None:
            return
        run = self._runs.get(env.run_id)
        if run is None or run.closed:
            if not outcome.events and type(outcome.effect) is Terminate:
                return  # the run's last hooks were told it ended: it is over already
            run = self._seen(env, signals, now())
        at = now()
        tree: Tree = run.tree
        for event in outcome.events:
            kind = type(event)
            if kind is RunCompleted:
                self._close(run, at, usage=event.usage)  # type: ignore[union-attr]
            elif kind is RunFailed:
                self._close(run, at, usage=event.usage, error=event.error)  # type: ignore[union-attr]
            elif kind in NOTED:
                note(owner(run, event), event, at)
            elif kind is ToolOutputItem and tree.calls:
                # What a tool-run agent's caller got back (its call span says it).
                item = cast(ToolOutputItem, event).item
                sub = tree.calls.get(item.call_id)
                if sub is not None and sub.call is not None:
                    sub.call.output, sub.call.failed = item.content, item.is_error

    def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        signals = self._signals
        if signals is None:
            return self.inner.perform(effect, env)
        return self._perform(effect, env, signals)

    # -- runs ------------------------------------------------------------------

    def _seen(self, env: RunEnv, signals: Signals, at: int) -> RunSpans:
        """The run of ``env``, seen for the first time."""
        run = self._open_root(env, signals, at, parent_of(env.run_id, self._runs))
        self._runs[env.run_id] = run
        # A caller that stops iterating a run between two steps leaves no
        # code of ours running: end the run's spans when its world is gone.
        weakref.finalize(env, self._abandoned, run)
        return run

    def _open_root(self, env: RunEnv, signals: Signals, at: int, parent: RunSpans | None) -> RunSpans:
        provider, model = model_of(env)
        run = open_run(
            signals,
            key=env.run_id,
            name=env.spec.name,
            parent=parent,
            stamps=stamps_of(env.ctx.tracer),
            provider=provider,
            model=model or env.spec.model_id or None,
            at=at,
            secrets=env.secrets,
            description=env.spec.description,
        )
        run.tree = Tree(run, self._runs)
        return run

    def _abandoned(self, run: RunSpans) -> None:
        if not run.closed:
            self._close(run, now(), abrupt=True)

    def _close(
        self,
        run: RunSpans,
        at: int,
        *,
        usage: Usage | None = None,
        error: object = None,
        suspended: bool = False,
        abrupt: bool = False,
    ) -> None:
        """End root run ``run`` and its open sub-runs."""
        if run.closed:
            return
        abrupt = abrupt or isinstance(error, BaseException)
        settle(run.tree, at, error, suspended=suspended, abrupt=abrupt)
        close_run(run, at=at, usage=usage, error=error, suspended=suspended)
        for key in [key for key, r in self._runs.items() if r.closed]:
            del self._runs[key]

    def _inner_env(self, env: RunEnv) -> RunEnv:
        """``env`` whose context carries this observer's telemetry, so the
        agents a tool runs are observed too."""
        last = self._last_env
        if last is not None and last[0]() is env:
            return last[1]
        handle = env.ctx.tracer
        inner = env
        if handle.tracer is not self.telemetry:
            inner = attrs.evolve(env, ctx=env.ctx.with_tracer(handle.with_tracer(self.telemetry)))
        self._last_env = (weakref.ref(env), inner)
        return inner

    # -- effects -----------------------------------------------------------------

    async def _perform(
        self, effect: Effect, env: RunEnv, signals: Signals
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        run = self._runs.get(env.run_id)
        inner_env = self._inner_env(env)
        detached: RunSpans | None = None
        if run is None and (type(effect) is PerformAll or type(effect) is RunAgents):
            # Performed outside a run (the step API): a run for as long as the effect.
            run = detached = self._open_root(env, signals, now(), None)
        # A replay answers a wave part by part as it was recorded: show that part.
        select = getattr(self.inner, "select", None)
        shown = select(effect) if select is not None else effect
        wave = Wave(signals, run, shown, inner_env, self.inner, now(), pending=effect)
        try:
            stream = relay(self.inner.perform(effect, wave.env), wave.context())
            async with aclosing(stream):
                async for item in stream:
                    kind = type(item)
                    if kind in RESULT_TYPES:
                        wave.finish(item, now())  # type: ignore[arg-type]
                    elif kind in NOTED:
                        wave.live(item, now())  # type: ignore[arg-type]
                    elif kind in CHUNKS:
                        wave.chunk(now())
                    yield item
        except GeneratorExit:
            if run is not None:  # the caller stopped the run
                self._close(run, now(), abrupt=True)
            raise
        except BaseException as exc:
            if run is not None:
                if isinstance(exc, RunSuspended):
                    self._close(run, now(), suspended=True)
                else:
                    self._close(run, now(), error=exc)
            raise
        finally:
            wave.abort()
            if detached is not None:
                self._close(detached, now())


__all__ = ["ObservingInterpreter", "Telemetry"]
