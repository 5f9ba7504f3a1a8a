"""OpenTelemetry spans and metrics of a multi-agent run.

A triage agent hands off to an investing specialist, which calls a tool. The
run context's ``TracerHandle`` carries a ``Telemetry`` (so ``agent.run``
observes the run by itself) and the trace attributes Langfuse groups traces
by (session, user, tags). The spans go to the OpenTelemetry SDK's in-memory
exporter and are printed as a tree, with the token counts and the metrics;
scripted models stand in for real ones, so it runs anywhere::

    python examples/observability.py
    python examples/observability.py --otlp http://127.0.0.1:4318   # also export (needs a collector)

It needs the OpenTelemetry SDK (``pip install opentelemetry-sdk``, and
``opentelemetry-exporter-otlp-proto-http`` for ``--otlp``); helikon itself
needs only ``opentelemetry-api`` (the ``otel`` extra).
"""

from __future__ import annotations

import sys

import trio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helikon import Handoff, LlmAgent, RunContext, TracerHandle, Usage, collect, tool
from helikon.observability import Telemetry
from helikon.testing import MockModel, call_tools, say


@tool
async def fund_costs(fund: str) -> dict[str, float]:
    """Look up a fund's yearly cost.

    Args:
        fund: the fund's ticker.
    """
    return {"expense_ratio_percent": 0.03}


investing = LlmAgent(
    name="investing specialist",
    description="Answers questions about investing.",
    model=MockModel(
        [
            call_tools(("fund_costs", {"fund": "VTI"}), usage=Usage(input_tokens=140, output_tokens=18)),
            say(
                "Keep an emergency fund, then buy a broad index fund like VTI (0.03% a year).",
                usage=Usage(190, 25),
            ),
        ],
        model_id="gpt-4o-mini",
    ),
    tools=[fund_costs],
)

triage = LlmAgent(
    name="triage",
    model=MockModel(
        [call_tools(("transfer_to_investing_specialist", {}), usage=Usage(95, 12))], model_id="gpt-4o-mini"
    ),
    instructions="Route the question to the right specialist.",
    handoffs=[Handoff.to(investing)],
)


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    kids: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        kids.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = dict(span.attributes or {})
        tokens = ""
        if "gen_ai.usage.input_tokens" in attributes:
            used = (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"])
            tokens = f"  [in={used[0]} out={used[1]}]"
        ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        print(f"{'  ' * depth}{span.name}{tokens}  {ms:.2f} ms")
        for child in kids.get(span.context.span_id, []):  # type: ignore[union-attr]
            show(child, depth + 1)

    for root in kids.get(None, []):
        show(root, 0)


async def main(otlp: str | None) -> int:
    resource = Resource.create({"service.name": "helikon-example"})
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    if otlp is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{otlp}/v1/traces")))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    handle = (
        TracerHandle.builder()
        .with_session_id("demo-session")
        .with_user_id("demo-user")
        .with_tag("example")
        .with_tracer(Telemetry(tracer_provider, meter_provider))
        .build()
    )
    ctx = RunContext.ephemeral(None).with_tracer(handle)
    result = await collect(triage.run(ctx, "How should I start investing $5,000?"))
    print(f"answer: {result.final_output}\n")

    print_tree(tuple(spans.get_finished_spans()))
    print()
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    labels = dict(point.attributes or {})
                    what = (
                        labels.get("gen_ai.token.type")
                        or labels.get("gen_ai.agent.name")
                        or labels.get("gen_ai.tool.name", labels.get("gen_ai.request.model", ""))
                    )
                    amount = getattr(point, "sum", None)
                    amount = getattr(point, "value", None) if amount is None else amount
                    print(f"{metric.name} {labels['gen_ai.operation.name']} {what}: {amount:g}")
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return 0


if __name__ == "__main__":
    endpoint = sys.argv[sys.argv.index("--otlp") + 1] if "--otlp" in sys.argv else None
    sys.exit(trio.run(main, endpoint))
