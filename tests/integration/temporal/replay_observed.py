"""Replay a stored Temporal history with OpenTelemetry configured globally,
then run the same agent live with the same providers (run as a script by
``test_replay_observability.py``: global providers are set once per
process, so this runs in a process of its own).

Usage: ``python replay_observed.py HISTORY.json WORKFLOW_ID``. Prints one JSON line:
the spans and usage/cost metric points seen after the replay, and after a
live run of the agent under the same providers (which shows the observer
was on).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SPENDING = ("gen_ai.client.token.usage", "helikon.client.cost")
#: The price of the agent's model, $ per million tokens.
PRICE = {"input": 1, "output": 2}


def spender() -> Any:
    """An agent that spends tokens over two turns, with a tool between."""
    from helikon import LlmAgent, Usage, tool
    from helikon.testing import MockModel, call_tools, say

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        """
        return a + b

    scripts = [call_tools(("add", {"a": 1, "b": 2}), usage=Usage(120, 8)), say("3", usage=Usage(150, 4))]
    return LlmAgent(name="spender", model=MockModel(scripts, model_id="calc"), tools=[add])


def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    from temporalio.client import WorkflowHistory
    from temporalio.runtime import Runtime, TelemetryConfig

    from helikon import ModelPrice, PriceTable, RunContext, collect
    from helikon.temporal import replayer

    def seen() -> dict[str, object]:
        data = reader.get_metrics_data()
        points = {name: 0 for name in SPENDING}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name in points:
                        points[metric.name] += len(metric.data.data_points)
        return {"spans": [s.name for s in spans.get_finished_spans()], "points": points}

    async def go() -> dict[str, object]:
        history = WorkflowHistory.from_json(sys.argv[2], Path(sys.argv[1]).read_text())
        runtime = Runtime(telemetry=TelemetryConfig())
        replayed = await replayer(runtime=runtime).replay_workflow(history)
        after_replay = seen()
        ctx = RunContext.ephemeral(None).with_prices(PriceTable({"calc": ModelPrice(**PRICE)}))
        await collect(spender().run(ctx, "add them"))
        return {"replayed": replayed.replay_failure is None, "replay": after_replay, "live": seen()}

    print(json.dumps(asyncio.run(go())), flush=True)
    os._exit(0)  # no interpreter finalization with a Temporal runtime alive (sdk-python#300)


if __name__ == "__main__":
    main()
