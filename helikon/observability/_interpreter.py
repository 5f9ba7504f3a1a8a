"""The observer: any interpreter, plus OpenTelemetry spans and metrics.

:class:`ObservingInterpreter` wraps an interpreter (live, recording, replay,
a user's own) and reads what passes through it — the outcomes
:func:`~helikon.interpreters.drive` shows it, the effects it is asked to
perform, the live events and the results — and nothing else: the pure core
knows nothing of telemetry. What each run becomes is in
:mod:`helikon.observability._runs`.

While the inner interpreter works on an effect, the effect's span is the
current OpenTelemetry span (a model call's ``chat`` span, a tool's own
``execute_tool`` span, else the run's turn), so spans that user code, model
adapters or HTTP instrumentation start nest where they belong; an agent run
from inside a tool (``AgentAsTool``) becomes a child of that tool's span.

With neither a tracer provider nor a meter provider configured when a run
starts, the observer hands every effect to the inner interpreter untouched.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, final

import attrs
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from helikon.effects import (
    AgentsRan,
    CallModel,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    HandoffCompleted,
    InvokeTool,
    RunAgents,
    RunInterrupted,
)
from helikon.errors import RunSuspended
from helikon.events import AgentEvent, RunCompleted, RunFailed, TurnStarted
from helikon.ids import RunId
from helikon.interpreters import RESULT_TYPES, Interpreter, LiveInterpreter, RunEnv
from helikon.interpreters._machine import OutcomeLike
from helikon.observability import _semconv as sc
from helikon.observability._forwarded import Forwarded, open_child
from helikon.observability._operations import TracedTools, chat_result, context_of, relay, tool_outcomes
from helikon.observability._runs import (
    Attributes,
    RunSpans,
    begin_turn,
    close_run,
    describe_failure,
    model_of,
    note,
    now,
    open_run,
    parent_of,
    resolve,
    stamps_of,
)
from helikon.observability._telemetry import Signals, resolve_signals


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
        if self._signals is None:
            self.__dict__["perform"] = self.inner.perform
            self.__dict__["observe"] = self._inner_observe
        else:
            self.__dict__.pop("perform", None)
            self.__dict__.pop("observe", None)

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
        at = now()
        run = self._runs.get(env.run_id)
        if run is None or not run.direct or run.closed:
            run = self._seen(env, run if run is not None and not run.closed else None, signals, at)
        for event in outcome.events:
            match event:
                case TurnStarted(turn=turn):
                    begin_turn(run, turn, at)
                case RunCompleted(usage=usage):
                    self._close(run, at, usage=usage)
                case RunFailed(error=error, usage=usage):
                    self._close(run, at, usage=usage, error=error)
                case _:
                    note(run, event, at)

    def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        signals = self._signals
        if signals is None:
            return self.inner.perform(effect, env)
        return self._perform(effect, env, signals)

    # -- runs ------------------------------------------------------------------

    def _seen(self, env: RunEnv, placeholder: RunSpans | None, signals: Signals, at: int) -> RunSpans:
        """The run of ``env``, now seen directly."""
        if placeholder is not None:  # a child so far seen through its events
            placeholder.direct = True
            return placeholder
        provider, model = model_of(env)
        run = open_run(
            signals,
            key=env.run_id,
            name=env.spec.name,
            parent=parent_of(env.run_id, self._runs),
            stamps=stamps_of(env.ctx.tracer),
            provider=provider,
            model=model or env.spec.model_id or None,
            at=at,
            direct=True,
            secrets=env.secrets,
        )
        self._runs[env.run_id] = run
        # A caller that stops iterating a run between two steps leaves no
        # code of ours running: end the run's spans when its world is gone.
        weakref.finalize(env, self._abandoned, run)
        return run

    def _abandoned(self, run: RunSpans) -> None:
        if not run.closed:
            self._close(run, now())

    def _close(self, run: RunSpans, at: int, **how: Any) -> None:
        close_run(run, at=at, **how)
        self._runs = {key: r for key, r in self._runs.items() if not r.closed}

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
        try:
            if type(effect) is CallModel:
                stream = self._call_model(effect, env, inner_env, run, signals)
            elif type(effect) is ExecuteTools:
                stream = self._execute_tools(effect, env, inner_env, run, signals)
            elif type(effect) is Handoff or type(effect) is RunAgents:
                stream = self._run_children(effect, env, inner_env, run, signals)
            else:
                stream = relay(self.inner.perform(effect, inner_env), context_of(run))
            async with aclosing(stream):
                async for item in stream:
                    yield item
        except GeneratorExit:
            if run is not None:  # the caller stopped the run
                self._close(run, now())
            raise
        except BaseException as exc:
            if run is not None:
                if isinstance(exc, RunSuspended):
                    self._close(run, now(), suspended=True)
                else:
                    self._close(run, now(), error=exc)
            raise

    async def _call_model(
        self, effect: CallModel, env: RunEnv, inner_env: RunEnv, run: RunSpans | None, signals: Signals
    ) -> AsyncGenerator[AgentEvent | EffectResult, None]:
        start = now()
        provider, model = model_of(env)
        model = model or env.spec.model_id or None
        attributes: Attributes = {sc.OPERATION_NAME: sc.CHAT}
        if provider is not None:
            attributes[sc.PROVIDER_NAME] = provider
        if model is not None:
            attributes[sc.REQUEST_MODEL] = model
        attributes.update(sc.settings_attributes(effect.request.settings))
        conversation = run.stamps.get(sc.CONVERSATION_ID) if run is not None else None
        if conversation is not None:
            attributes[sc.CONVERSATION_ID] = conversation
        span = signals.tracer.start_span(
            f"{sc.CHAT} {model}" if model else sc.CHAT,
            context=context_of(run),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        secrets = env.secrets
        if signals.capture_content:
            system, history = sc.input_messages(effect.request.messages)
            if system:
                span.set_attribute(sc.SYSTEM_INSTRUCTIONS, sc.as_json(system, secrets))
            span.set_attribute(sc.INPUT_MESSAGES, sc.as_json(history, secrets))
        metric: Attributes = {sc.OPERATION_NAME: sc.CHAT}
        metric.update((k, v) for k, v in attributes.items() if k in (sc.PROVIDER_NAME, sc.REQUEST_MODEL))
        ended = False
        try:
            async for item in relay(self.inner.perform(effect, inner_env), trace.set_span_in_context(span)):
                if type(item) in RESULT_TYPES:
                    end = now()
                    chat_result(span, item, env, effect, metric, signals)  # type: ignore[arg-type]
                    signals.duration.record((end - start) / 1e9, metric)
                    span.end(end_time=end)
                    ended = True
                yield item
        finally:
            if not ended:
                span.set_status(Status(StatusCode.ERROR, "the model call did not finish"))
                span.end()

    async def _execute_tools(
        self, effect: ExecuteTools, env: RunEnv, inner_env: RunEnv, run: RunSpans | None, signals: Signals
    ) -> AsyncGenerator[AgentEvent | EffectResult, None]:
        invoked = [step for step in effect.steps if type(step) is InvokeTool]
        parent = context_of(run)
        if not invoked:  # hooks and policy steps only
            async for item in relay(self.inner.perform(effect, inner_env), parent):
                yield item
            return
        start = now()
        spans: dict[str, Span] = {}
        for step in invoked:
            attributes: Attributes = {
                sc.OPERATION_NAME: sc.EXECUTE_TOOL,
                sc.TOOL_NAME: step.tool,
                sc.TOOL_CALL_ID: step.call_id,
                sc.TOOL_TYPE: "function",
            }
            tool = env.tools.get(step.tool)
            description = getattr(tool, "description", None)
            if isinstance(description, str) and description:
                attributes[sc.TOOL_DESCRIPTION] = description
            span = signals.tracer.start_span(
                f"{sc.EXECUTE_TOOL} {step.tool}", context=parent, attributes=attributes, start_time=start
            )
            if signals.capture_content:
                span.set_attribute(sc.TOOL_CALL_ARGUMENTS, sc.as_json(step.args, env.secrets))
            spans[step.call_id] = span
        ended: dict[str, int] = {}
        traced = attrs.evolve(inner_env, tools=TracedTools(inner_env.tools, spans, ended))
        provider = run.provider if run is not None else None
        try:
            async for item in relay(self.inner.perform(effect, traced), parent):
                if type(item) in RESULT_TYPES:
                    at = now()
                    for step, failure, output in tool_outcomes(effect, item):  # type: ignore[arg-type]
                        span = spans.pop(step.call_id)
                        end = ended.get(step.call_id, at)
                        metric: Attributes = {sc.OPERATION_NAME: sc.EXECUTE_TOOL, sc.TOOL_NAME: step.tool}
                        if provider is not None:
                            metric[sc.PROVIDER_NAME] = provider
                        if failure is not None:
                            kind = sc.error_type(failure)
                            span.set_attribute(sc.ERROR_TYPE, kind)
                            span.set_status(
                                Status(StatusCode.ERROR, sc.scrub(describe_failure(failure), env.secrets))
                            )
                            metric[sc.ERROR_TYPE] = kind
                        elif signals.capture_content:
                            text = output if isinstance(output, str) else sc.as_json(output, env.secrets)
                            span.set_attribute(sc.TOOL_CALL_RESULT, sc.scrub(text, env.secrets))
                        span.end(end_time=end)
                        signals.duration.record((end - start) / 1e9, metric)
                        signals.tool_calls.add(1, metric)
                yield item
        finally:
            for span in spans.values():  # no result came back
                span.set_status(Status(StatusCode.ERROR, "the tool call did not finish"))
                span.end()

    async def _run_children(
        self,
        effect: Handoff | RunAgents,
        env: RunEnv,
        inner_env: RunEnv,
        run: RunSpans | None,
        signals: Signals,
    ) -> AsyncGenerator[AgentEvent | EffectResult, None]:
        start = now()
        host = run if run is not None else self._detached(env, signals, start)
        tops: dict[str, RunSpans] = {}
        target: RunSpans | None = None
        if type(effect) is Handoff:
            agent = resolve(env.children.get(effect.target))
            target = tops[effect.target] = open_child(host, effect.target, start, agent or None)
            router = Forwarded(host, [target], first=target)
        else:
            assert type(effect) is RunAgents
            for child in effect.runs:
                agent = resolve(env.children.get(child.key))
                name = str(getattr(agent, "name", None) or child.agent or child.key)
                tops[child.key] = open_child(host, name, start, agent, key=child.key)
            router = Forwarded(host, list(tops.values()), first=None)
        for opened in tops.values():  # known by run id, should the interpreter show one directly
            self._runs.setdefault(opened.key, opened)
        try:
            async for item in relay(self.inner.perform(effect, inner_env), host.context()):
                if type(item) in RESULT_TYPES:
                    at = now()
                    match item:
                        case HandoffCompleted(usage=usage, error=error) if target is not None:
                            close_run(target, at=at, usage=usage, error=error)
                        case AgentsRan(results=results):
                            for result in results:
                                if result.key in tops:
                                    close_run(tops[result.key], at=at, usage=result.usage, error=result.error)
                        case RunInterrupted():
                            for top in tops.values():
                                close_run(top, at=at, error=item)
                        case _:
                            pass
                else:
                    router.feed(item, now())  # type: ignore[arg-type]
                yield item
        finally:
            at = now()
            for top in tops.values():
                close_run(top, at=at)
            if run is None:
                close_run(host, at=at)
            self._runs = {key: r for key, r in self._runs.items() if not r.closed}

    def _detached(self, env: RunEnv, signals: Signals, at: int) -> RunSpans:
        """A run for an effect performed outside :func:`drive` (the step API):
        it lasts as long as the effect."""
        provider, model = model_of(env)
        return open_run(
            signals,
            key=env.run_id,
            name=env.spec.name,
            parent=None,
            stamps=stamps_of(env.ctx.tracer),
            provider=provider,
            model=model,
            at=at,
            direct=True,
            secrets=env.secrets,
        )


__all__ = ["ObservingInterpreter", "Telemetry"]
