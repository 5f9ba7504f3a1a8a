"""Where telemetry goes: the OpenTelemetry providers, resolved per run.

At the start of each run an observer resolves its tracer and meter providers
(the global ones by default) to the :class:`Signals` to use; there are none when
neither provider is configured — the OpenTelemetry API's own proxy and no-op
providers count as not configured — and the observer then passes every
effect straight through, so an unconfigured observer costs next to nothing.
"""

from __future__ import annotations

from typing import Any, final

import attrs
from opentelemetry import metrics, trace

from helikon._version import __version__
from helikon.observability import _semconv as sc

#: The instrumentation scope name of every span and metric.
SCOPE = "helikon"


def configured(provider: object) -> bool:
    """Whether ``provider`` records anything: the API package's own providers
    (the global proxy before one is set, and the no-op ones) do not."""
    return not type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


@final
@attrs.frozen(eq=False)
class Signals:
    """What one run reports to: a tracer, the metric instruments, and whether
    content is captured."""

    tracer_provider: object
    meter_provider: object
    tracer: trace.Tracer
    token_usage: metrics.Histogram
    duration: metrics.Histogram
    tool_calls: metrics.Counter
    capture_content: bool
    cost: metrics.Counter | None = None


def resolve_signals(
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    capture_content: bool,
    cached: Signals | None,
) -> Signals | None:
    """The signals for a run starting now (``cached`` when its providers are
    still the ones to use), or ``None`` when nothing is configured to
    receive them. ``None`` providers are the global ones."""
    tracer_provider = tracer_provider or trace.get_tracer_provider()
    meter_provider = meter_provider or metrics.get_meter_provider()
    if (
        cached is not None
        and cached.tracer_provider is tracer_provider
        and cached.meter_provider is meter_provider
    ):
        return cached
    if not configured(tracer_provider) and not configured(meter_provider):
        return None
    meter = meter_provider.get_meter(SCOPE, __version__)
    return Signals(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        tracer=tracer_provider.get_tracer(SCOPE, __version__),
        token_usage=meter.create_histogram(
            sc.TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=sc.TOKEN_BUCKETS,
        ),
        duration=meter.create_histogram(
            sc.OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        ),
        tool_calls=meter.create_counter(
            sc.TOOL_CALLS, unit="{call}", description="Tool calls performed, by tool and error type."
        ),
        capture_content=capture_content,
        cost=meter.create_counter(sc.COST_METRIC, unit="USD", description="Money spent on model calls."),
    )


@final
class _ReplayTracer(trace.Tracer):
    """A tracer whose spans say they describe a replay (``helikon.replay``)."""

    def __init__(self, inner: trace.Tracer) -> None:
        self._inner = inner

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        kwargs["attributes"] = {**(kwargs.get("attributes") or {}), sc.REPLAY: True}
        return self._inner.start_span(name, *args, **kwargs)

    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        kwargs["attributes"] = {**(kwargs.get("attributes") or {}), sc.REPLAY: True}
        return self._inner.start_as_current_span(name, *args, **kwargs)


def replayed(signals: Signals) -> Signals:
    """``signals`` for a replayed run: nothing it reports is new work, so its
    spans are marked ``helikon.replay=true`` and its metrics (token usage,
    durations, tool calls) are not recorded at all — a replay never counts
    as spending."""
    return attrs.evolve(
        signals,
        tracer=_ReplayTracer(signals.tracer),
        token_usage=metrics.NoOpHistogram(sc.TOKEN_USAGE),
        duration=metrics.NoOpHistogram(sc.OPERATION_DURATION),
        tool_calls=metrics.NoOpCounter(sc.TOOL_CALLS),
    )


def replaying(interpreter: object) -> bool:
    """Whether ``interpreter`` (or one it wraps, through ``inner``) replays a
    recording (its ``replaying`` attribute is true)."""
    seen = 0
    while interpreter is not None and seen < 16:
        if getattr(interpreter, "replaying", False) is True:
            return True
        interpreter, seen = getattr(interpreter, "inner", None), seen + 1
    return False


__all__ = ["SCOPE", "Signals", "configured", "replayed", "replaying", "resolve_signals"]
