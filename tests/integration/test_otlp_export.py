"""Spans and metrics through the real OTLP/HTTP exporters, to a receiver on
127.0.0.1 that decodes the protobuf payloads as a collector (or Langfuse's
OTLP endpoint) would."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from helikon import Handoff, LlmAgent, RunContext, collect, tool
from helikon.context import TracerHandle
from helikon.model import Usage
from helikon.observability import Telemetry
from helikon.providers.anthropic import AnthropicModel
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration


class Receiver(ThreadingHTTPServer):
    """Keeps every POST: its path, headers and (decompressed) body."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def bodies(self, path: str) -> list[bytes]:
        with self.lock:
            return [body for p, _, body in self.posts if p == path]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with self.server.lock:
            self.server.posts.append((self.path, dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@tool
async def market_data(symbol: str) -> str:
    """Look up a market price.

    Args:
        symbol: the ticker.
    """
    return f"{symbol}: 101.5"


def value(any_value: AnyValue) -> object:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


def test_a_handoff_run_exports_its_span_tree_and_metrics_over_otlp_http(receiver: Receiver) -> None:
    session = requests.Session()
    session.trust_env = False  # straight to 127.0.0.1, whatever proxy the environment names
    headers = {"Authorization": "Basic cGstbGYtMTpzay1sZi0x"}  # as Langfuse's OTLP endpoint wants
    resource = Resource.create({"service.name": "helikon-test"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(f"{receiver.url}/v1/traces", headers=headers, session=session))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(f"{receiver.url}/v1/metrics", session=session), export_interval_millis=3_600_000
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    specialist: LlmAgent[None] = LlmAgent(
        name="investing",
        model=MockModel(
            [
                call_tools(("market_data", {"symbol": "VTI"}), usage=Usage(7, 3)),
                say("Buy VTI.", usage=Usage(9, 5)),
            ],
            model_id="gpt-test",
        ),
        tools=[market_data],
    )
    triage: LlmAgent[None] = LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_investing", {}), usage=Usage(4, 1))], model_id="gpt-test"),
        handoffs=[Handoff.to(specialist)],
    )
    handle = TracerHandle(Telemetry(tracer_provider, meter_provider), session_id="s-otlp", user_id="u-1")

    result = anyio.run(lambda: collect(triage.run(RunContext.ephemeral(None).with_tracer(handle), "Invest?")))
    assert tracer_provider.force_flush(10_000) and meter_provider.force_flush(10_000)
    tracer_provider.shutdown()
    meter_provider.shutdown()

    assert result.final_output == "Buy VTI."
    posts = {path: {k.lower(): v for k, v in hdrs.items()} for path, hdrs, _ in receiver.posts}
    assert posts["/v1/traces"]["authorization"] == headers["Authorization"]
    assert posts["/v1/traces"]["content-type"] == "application/x-protobuf"
    spans: list[Span] = []
    for body in receiver.bodies("/v1/traces"):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            assert {a.key: value(a.value) for a in resource_spans.resource.attributes}["service.name"] == (
                "helikon-test"
            )
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "helikon"
                spans.extend(scope_spans.spans)
    by_id = {s.span_id: s for s in spans}
    parent_names = {
        s.name + (f" <- {by_id[s.parent_span_id].name}" if s.parent_span_id else "") for s in spans
    }
    assert parent_names == {
        "invoke_agent triage",
        "agent.turn <- invoke_agent triage",
        "chat gpt-test <- agent.turn",
        "invoke_agent investing <- agent.turn",
        "agent.turn <- invoke_agent investing",
        "execute_tool market_data <- agent.turn",
    }
    assert len(spans) == 9 and len({s.trace_id for s in spans}) == 1
    root = next(s for s in spans if s.name == "invoke_agent triage")
    root_attributes = {a.key: value(a.value) for a in root.attributes}
    assert root_attributes["session.id"] == "s-otlp" and root_attributes["user.id"] == "u-1"
    assert (root_attributes["gen_ai.usage.input_tokens"], root_attributes["gen_ai.usage.output_tokens"]) == (
        20,
        9,
    )
    chats = [{a.key: value(a.value) for a in s.attributes} for s in spans if s.name == "chat gpt-test"]
    # The handoff target's model calls reach the observer as effects of the agent tree: each has its tokens.
    assert sorted(str(c.get("gen_ai.usage.input_tokens", "-")) for c in chats) == ["4", "7", "9"]

    metrics: dict[str, Any] = {}
    for body in receiver.bodies("/v1/metrics"):
        exported = ExportMetricsServiceRequest()
        exported.ParseFromString(body)
        for resource_metrics in exported.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    metrics[metric.name] = metric
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    sums = {
        next(value(a.value) for a in p.attributes if a.key == "gen_ai.token.type"): p.sum
        for p in usage.histogram.data_points
    }
    assert sums == {"input": 20, "output": 9}
    operations = {
        next(value(a.value) for a in p.attributes if a.key == "gen_ai.operation.name")
        for p in metrics["gen_ai.client.operation.duration"].histogram.data_points
    }
    assert operations == {"chat", "execute_tool", "invoke_agent"}


WIRE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "provider-wire"


@pytest.mark.skipif(not WIRE.is_dir(), reason="the recorded provider replies are not here")
def test_the_genai_attributes_of_a_real_reply_arrive_on_the_wire(receiver: Receiver) -> None:
    session = requests.Session()
    session.trust_env = False
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "helikon-test"}))
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(f"{receiver.url}/v1/traces", session=session))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(f"{receiver.url}/v1/metrics", session=session), export_interval_millis=3_600_000
    )
    meter_provider = MeterProvider(metric_readers=[reader])
    body = (WIRE / "anthropic" / "nonstream_cache_read_write_usage_claude-sonnet-4-5.json").read_bytes()
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(200, headers={"content-type": "application/json"}, content=body)
        )
    )
    agent: LlmAgent[None] = LlmAgent(
        name="explainer",
        description="Explains programming languages.",
        model=AnthropicModel.messages(
            "claude-sonnet-4-5", api_key="sk-ant-test", http_client=client, stream=False
        ),
    )
    handle = TracerHandle(Telemetry(tracer_provider, meter_provider))

    anyio.run(lambda: collect(agent.run(RunContext.ephemeral(None).with_tracer(handle), "What is Python?")))
    assert tracer_provider.force_flush(10_000) and meter_provider.force_flush(10_000)
    tracer_provider.shutdown()
    meter_provider.shutdown()

    spans: dict[str, dict[str, object]] = {}
    for raw in receiver.bodies("/v1/traces"):
        request = ExportTraceServiceRequest()
        request.ParseFromString(raw)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans[span.name] = {a.key: value(a.value) for a in span.attributes}
    chat = spans["chat claude-sonnet-4-5"]
    assert {k: chat.get(k) for k in WIRE_EXPECTED} == WIRE_EXPECTED
    assert spans["invoke_agent explainer"]["gen_ai.agent.description"] == "Explains programming languages."

    listed = {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "server.address",
        "server.port",
        "error.type",
    }
    points = []
    for raw in receiver.bodies("/v1/metrics"):
        exported = ExportMetricsServiceRequest()
        exported.ParseFromString(raw)
        for resource_metrics in exported.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == "gen_ai.client.operation.duration":
                        points.extend(metric.histogram.data_points)
    assert points and all({a.key for a in p.attributes} <= listed for p in points)
    chat_point = next(
        {a.key: value(a.value) for a in p.attributes}
        for p in points
        if any(a.key == "gen_ai.operation.name" and value(a.value) == "chat" for a in p.attributes)
    )
    assert chat_point["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"


WIRE_EXPECTED: dict[str, object] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-sonnet-4-5",
    "gen_ai.response.model": "claude-sonnet-4-5-20250929",
    "gen_ai.response.id": "msg_01KPaKTJSqAKoZri7Ujrny58",
    "gen_ai.request.stream": False,
    "gen_ai.output.type": "text",
    "gen_ai.usage.cache_creation.input_tokens": 418,
    "gen_ai.usage.cache_read.input_tokens": 1111,
    "server.address": "api.anthropic.com",
    "server.port": 443,
}
