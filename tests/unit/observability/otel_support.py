"""What the observability tests share: an OpenTelemetry SDK pipeline that
keeps every span and metric in memory, and readers for what it kept."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio
import attrs
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helikon import LlmAgent, RunResult, collect
from helikon.observability import ObservingInterpreter
from helikon.testing import MockModel, ScriptItem

#: A span tree: the span's name and its children's trees, in start order.
Shape = tuple[str, tuple["Shape", ...]]


@attrs.define
class Pipeline:
    """An SDK tracer provider and meter provider that keep everything in memory."""

    spans: InMemorySpanExporter
    tracer_provider: TracerProvider
    reader: InMemoryMetricReader
    meter_provider: MeterProvider

    @classmethod
    def new(cls) -> Pipeline:
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        reader = InMemoryMetricReader()
        return cls(spans, tracer_provider, reader, MeterProvider(metric_readers=[reader]))

    def observer(self, inner: Any = None, **kw: Any) -> ObservingInterpreter:
        return ObservingInterpreter(
            inner, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kw
        )

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def metric_points(self, name: str) -> list[HistogramDataPoint | NumberDataPoint]:
        data = self.reader.get_metrics_data()
        points: list[HistogramDataPoint | NumberDataPoint] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)  # type: ignore[arg-type]
        return points


def _order(span: ReadableSpan) -> tuple[int, str, str]:
    call_id = (span.attributes or {}).get("gen_ai.tool.call.id", "")
    return (span.start_time or 0, span.name, str(call_id))


def children(spans: Iterable[ReadableSpan], parent: ReadableSpan | None) -> list[ReadableSpan]:
    """The spans whose parent is ``parent`` (``None``: the roots), in start order."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    if parent is None:
        found = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    else:
        wanted = parent.context.span_id if parent.context is not None else None
        found = [s for s in spans if s.parent is not None and s.parent.span_id == wanted]
    return sorted(found, key=_order)


def shape(spans: Sequence[ReadableSpan], parent: ReadableSpan | None = None) -> tuple[Shape, ...]:
    """The span trees under ``parent`` (the roots by default)."""
    return tuple((s.name, shape(spans, s)) for s in children(spans, parent))


#: Attributes that are measurements of this run's timing, not what it did.
MEASURED = frozenset({"gen_ai.response.time_to_first_chunk"})


def flat(spans: Sequence[ReadableSpan]) -> list[tuple[str, dict[str, object], str]]:
    """Every span, depth first in start order: its path of names, its
    attributes and its status code (what a replay must reproduce)."""
    out: list[tuple[str, dict[str, object], str]] = []

    def walk(parent: ReadableSpan | None, path: str) -> None:
        for span in children(spans, parent):
            here = f"{path}/{span.name}"
            kept = {k: v for k, v in (span.attributes or {}).items() if k not in MEASURED}
            out.append((here, kept, span.status.status_code.name))
            walk(span, here)

    walk(None, "")
    return out


def named(spans: Iterable[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in start order."""
    return sorted((s for s in spans if s.name == name), key=_order)


def one(spans: Iterable[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = named(spans, name)
    return span


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def label(point: HistogramDataPoint | NumberDataPoint, key: str) -> object:
    """A metric data point's attribute ``key`` (``None`` when absent)."""
    return dict(point.attributes or {}).get(key)


def agent(name: str, *scripts: Sequence[ScriptItem], **kw: Any) -> LlmAgent[Any]:
    kw.setdefault("description", f"The {name} agent.")
    return LlmAgent(name=name, model=MockModel(scripts, model_id=f"{name}-model"), **kw)


def run(make: Callable[[], Awaitable[RunResult[Any]]], backend: str = "trio") -> RunResult[Any]:
    result: RunResult[Any] = anyio.run(make, backend=backend)
    return result


def drain(stream: Any, backend: str = "trio") -> list[Any]:
    """Every event of ``stream`` (a run that may raise: its error is re-raised)."""

    async def go() -> list[Any]:
        return [event async for event in stream]

    events: list[Any] = anyio.run(go, backend=backend)
    return events


__all__ = [
    "Pipeline",
    "Shape",
    "agent",
    "attributes",
    "children",
    "collect",
    "drain",
    "flat",
    "label",
    "named",
    "one",
    "run",
    "shape",
]
