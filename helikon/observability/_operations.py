"""How one performed effect becomes spans and metrics.

- :func:`relay` passes an interpreter's stream on with an OpenTelemetry
  context current while the interpreter works;
- :func:`open_chat` and :func:`end_chat` are a model call's ``chat`` span;
  :func:`open_tools` and :func:`end_tools` a tool round's ``execute_tool``
  spans, one per tool that runs;
- :func:`chat_result` reads a model call's result (usage, finish reason,
  response id, the answer when content is captured) onto its ``chat`` span
  and the metrics;
- :func:`tool_outcomes` pairs an ``ExecuteTools``' tool steps with their
  results;
- :class:`TracedTools` hands the inner interpreter tools that run under their
  call's ``execute_tool`` span and note when they end.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from helikon.effects import (
    CallModel,
    EffectResult,
    ExecuteTools,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    RunInterrupted,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.events import AgentEvent
from helikon.interpreters import RunEnv
from helikon.loop import Response, aggregate
from helikon.observability import _semconv as sc
from helikon.observability._runs import Attributes, RunSpans, describe_failure, model_of, now
from helikon.observability._telemetry import Signals
from helikon.pricing import priced


def context_of(run: RunSpans | None) -> Context | None:
    return run.context() if run is not None else None


async def relay(
    stream: AsyncIterator[AgentEvent | EffectResult], ctx: Context | None
) -> AsyncGenerator[AgentEvent | EffectResult, None]:
    """``stream``'s items, each produced with ``ctx`` as the current context.

    The context is attached only while the inner interpreter works (around
    each step of its stream), never across a ``yield``: the caller's own
    code never runs under it, and it is detached in the task that attached it.
    """
    if ctx is None:
        async for item in stream:
            yield item
        return
    try:
        while True:
            token = otel_context.attach(ctx)
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def open_chat(
    signals: Signals, effect: CallModel, env: RunEnv, run: RunSpans | None, at: int
) -> tuple[Span, Attributes]:
    """Start a model call's inference span (``chat``; ``generate_content``
    for Gemini) under ``run``'s current span; the span and the attributes of
    its metrics."""
    provider, model = model_of(env)
    model = model or env.spec.model_id or None
    operation = sc.inference_operation(provider)
    attributes: Attributes = {sc.OPERATION_NAME: operation}
    if provider is not None:
        attributes[sc.PROVIDER_NAME] = provider
    if model is not None:
        attributes[sc.REQUEST_MODEL] = model
    address, port = sc.endpoint(getattr(env.model, "base_url", None) or getattr(env.model, "url", None))
    if address is not None:
        attributes[sc.SERVER_ADDRESS] = address
        if port is not None:
            attributes[sc.SERVER_PORT] = port
    streams = getattr(env.model, "streams", None)
    if isinstance(streams, bool):
        attributes[sc.REQUEST_STREAM] = streams
    attributes[sc.OUTPUT_TYPE] = sc.output_type(effect.request.settings.response_format)
    attributes.update(sc.settings_attributes(effect.request.settings))
    conversation = run.stamps.get(sc.CONVERSATION_ID) if run is not None else None
    if conversation is not None:
        attributes[sc.CONVERSATION_ID] = conversation
    span = signals.tracer.start_span(
        f"{operation} {model}" if model else operation,
        context=context_of(run),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=at,
    )
    if signals.capture_content:
        system, history = sc.input_messages(effect.request.messages, effect.request.instructions)
        if system:
            span.set_attribute(sc.SYSTEM_INSTRUCTIONS, sc.as_json(system, env.secrets))
        span.set_attribute(sc.INPUT_MESSAGES, sc.as_json(history, env.secrets))
    metric: Attributes = {k: v for k, v in attributes.items() if k in sc.METRIC_ATTRIBUTES}
    return span, metric


def end_chat(
    span: Span,
    metric: Attributes,
    result: EffectResult,
    env: RunEnv,
    effect: CallModel,
    signals: Signals,
    start: int,
    at: int,
) -> Response | None:
    """End a model call's span with its result; the model's response."""
    response = chat_result(span, result, env, effect, metric, signals)
    signals.duration.record((at - start) / 1e9, metric)
    span.end(end_time=at)
    return response


def open_tools(
    signals: Signals, effect: ExecuteTools, env: RunEnv, run: RunSpans | None, at: int
) -> dict[str, Span]:
    """Start one ``execute_tool`` span per tool the round runs (hook and
    policy steps run no tool), by call id."""
    parent = context_of(run)
    spans: dict[str, Span] = {}
    for step in effect.steps:
        if type(step) is not InvokeTool:
            continue
        spans[step.call_id] = open_tool(signals, step.tool, step.call_id, env, parent, at)
        if signals.capture_content:
            spans[step.call_id].set_attribute(sc.TOOL_CALL_ARGUMENTS, sc.as_json(step.args, env.secrets))
    return spans


def open_tool(
    signals: Signals, tool: str, call_id: str, env: RunEnv, parent: Context | None, at: int
) -> Span:
    """Start the ``execute_tool`` span of call ``call_id`` of ``tool``."""
    attributes: Attributes = {
        sc.OPERATION_NAME: sc.EXECUTE_TOOL,
        sc.TOOL_NAME: tool,
        sc.TOOL_CALL_ID: call_id,
        sc.TOOL_TYPE: "function",
    }
    description = getattr(env.tools.get(tool), "description", None)
    if isinstance(description, str) and description:
        attributes[sc.TOOL_DESCRIPTION] = description
    return signals.tracer.start_span(
        f"{sc.EXECUTE_TOOL} {tool}", context=parent, attributes=attributes, start_time=at
    )


def end_tools(
    spans: dict[str, Span],
    ended: Mapping[str, int],
    effect: ExecuteTools,
    result: EffectResult,
    env: RunEnv,
    provider: str | None,
    signals: Signals,
    start: int,
    at: int,
) -> None:
    """End a round's tool spans with their outcomes (each at the time its
    tool returned, when known), and count the calls."""
    for step, failure, output in tool_outcomes(effect, result):
        span = spans.pop(step.call_id, None)
        if span is None:
            continue
        end = ended.get(step.call_id, at)
        metric: Attributes = {sc.OPERATION_NAME: sc.EXECUTE_TOOL}
        if provider is not None:
            metric[sc.PROVIDER_NAME] = provider
        if failure is not None:
            kind = sc.error_type(failure)
            span.set_attribute(sc.ERROR_TYPE, kind)
            span.set_status(Status(StatusCode.ERROR, sc.scrub(describe_failure(failure), env.secrets)))
            metric[sc.ERROR_TYPE] = kind
        elif signals.capture_content:
            text = output if isinstance(output, str) else sc.as_json(output, env.secrets)
            span.set_attribute(sc.TOOL_CALL_RESULT, sc.scrub(text, env.secrets))
        span.end(end_time=end)
        signals.duration.record((end - start) / 1e9, metric)
        signals.tool_calls.add(1, {**metric, sc.TOOL_NAME: step.tool})


def unfinished(spans: Iterable[Span], what: str) -> None:
    """End spans whose operation never gave a result, with an error."""
    for span in spans:
        span.set_status(Status(StatusCode.ERROR, f"the {what} did not finish"))
        span.end()


def chat_result(
    span: Span, result: EffectResult, env: RunEnv, effect: CallModel, metric: Attributes, signals: Signals
) -> Response | None:
    """Set what a model call's result tells on its span and metrics; the
    model's response (None when the call failed)."""
    match result:
        case ModelResponded(events=events):
            response = aggregate(events, env.run_id, effect.turn)
            usage = response.usage
            span.set_attribute(sc.INPUT_TOKENS, usage.input_tokens)
            span.set_attribute(sc.OUTPUT_TOKENS, usage.output_tokens)
            if usage.cached_input_tokens:
                span.set_attribute(sc.CACHE_READ_TOKENS, usage.cached_input_tokens)
            if usage.reasoning_tokens:
                span.set_attribute(sc.REASONING_TOKENS, usage.reasoning_tokens)
            if usage.cache_creation_input_tokens:
                span.set_attribute(sc.CACHE_CREATION_TOKENS, usage.cache_creation_input_tokens)
            reason = sc.finish_reason(response.finish)
            if reason is not None:
                span.set_attribute(sc.FINISH_REASONS, (reason,))
            if response.response_id is not None:
                span.set_attribute(sc.RESPONSE_ID, response.response_id)
            if response.response_model is not None:
                # The model that answered, as the provider named it (often a
                # dated version of the one asked for); never guessed.
                span.set_attribute(sc.RESPONSE_MODEL, response.response_model)
                metric[sc.RESPONSE_MODEL] = response.response_model
            if signals.capture_content:
                span.set_attribute(sc.OUTPUT_MESSAGES, sc.as_json(sc.output_messages(response), env.secrets))
            signals.token_usage.record(usage.input_tokens, {**metric, sc.TOKEN_TYPE: "input"})
            signals.token_usage.record(usage.output_tokens, {**metric, sc.TOKEN_TYPE: "output"})
            cost = priced(usage, env.spec.price).cost  # the same pure pricing the machine applies
            if cost is not None:
                span.set_attribute(sc.COST, float(cost))
                if signals.cost is not None:
                    signals.cost.add(float(cost), metric)
            return response
        case ModelCallFailed(failure=failure):
            kind = sc.error_type(failure)
            span.set_attribute(sc.ERROR_TYPE, kind)
            span.set_status(Status(StatusCode.ERROR, sc.scrub(describe_failure(failure), env.secrets)))
            metric[sc.ERROR_TYPE] = kind
        case RunInterrupted():
            kind = sc.error_type(result)
            span.set_attribute(sc.ERROR_TYPE, kind)
            span.set_status(Status(StatusCode.ERROR, kind))
            metric[sc.ERROR_TYPE] = kind
        case _:
            pass
    return None


def tool_outcomes(effect: ExecuteTools, result: EffectResult) -> list[tuple[InvokeTool, object, object]]:
    """Each tool step, its failure (None when the tool returned) and its output."""
    out: list[tuple[InvokeTool, object, object]] = []
    if type(result) is ToolsExecuted:
        for step, step_result in zip(effect.steps, result.results, strict=False):
            if type(step) is not InvokeTool:
                continue
            if type(step_result) is ToolReturned:
                out.append((step, None, step_result.output))
            elif type(step_result) is ToolRaised:
                out.append((step, step_result.failure, None))
            else:
                out.append((step, step_result, None))
    elif type(result) is RunInterrupted:
        out.extend((step, result, None) for step in effect.steps if type(step) is InvokeTool)
    return out


@final
class TracedTools(Mapping[str, Any]):
    """A run's tools, each invoked with its call's span as the current span
    (and its end time noted)."""

    def __init__(self, tools: Mapping[str, Any], spans: dict[str, Span], ended: dict[str, int]) -> None:
        self._tools = tools
        self._spans = spans
        self._ended = ended

    def __getitem__(self, name: str) -> Any:
        return TracedTool(self._tools[name], self._spans, self._ended)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


@final
class TracedTool:
    """One tool, invoked under its call's span."""

    def __init__(self, tool: Any, spans: dict[str, Span], ended: dict[str, int]) -> None:
        self._tool = tool
        self._spans = spans
        self._ended = ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    async def invoke(self, ctx: Any, args: Any) -> Any:
        call_id = getattr(ctx, "call_id", None)
        span = self._spans.get(call_id) if isinstance(call_id, str) else None
        if span is None:
            return await self._tool.invoke(ctx, args)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            return await self._tool.invoke(ctx, args)
        finally:
            otel_context.detach(token)
            self._ended[call_id] = now()  # type: ignore[index]


__all__ = [
    "TracedTool",
    "TracedTools",
    "chat_result",
    "context_of",
    "end_chat",
    "end_tools",
    "open_chat",
    "open_tool",
    "open_tools",
    "relay",
    "tool_outcomes",
    "unfinished",
]
