"""One agent's run, as OpenTelemetry sees it through the ObservingInterpreter.

Each test runs a scripted agent under the live interpreter wrapped by the
observer, exports to the SDK's in-memory exporters, and reads the spans and
metrics back.
"""

from __future__ import annotations

import gc
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind
from otel_support import Pipeline, agent, attributes, drain, label, named, one, run, shape

from helikon import RunContext, collect, tool
from helikon.context import ToolContext, TracerHandle
from helikon.errors import ModelError, RunError, RunSuspended, ToolError
from helikon.events import RunStarted, ToolCallItem
from helikon.governance import AskUser
from helikon.interpreters import LiveInterpreter
from helikon.model import Finish, FinishReason, TextChunk, Usage
from helikon.observability import ObservingInterpreter, Telemetry
from helikon.observability._telemetry import configured
from helikon.steps import perform, start
from helikon.testing import call_tools, say

CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}

current_spans: list[int] = []


@tool
async def lookup_spending(category: str) -> dict[str, float]:
    """Look up this month's spending in a category.

    Args:
        category: the budget category.
    """
    current_spans.append(trace.get_current_span().get_span_context().span_id)
    return {"spent": 120.5}


def budget_agent(name: str = "budget", **kw: Any) -> Any:
    return agent(
        name,
        call_tools(("lookup_spending", {"category": "food"}), usage=Usage(10, 4)),
        [TextChunk("You spent 120.5 on food."), Usage(20, 6), Finish(FinishReason.STOP, "resp-2")],
        instructions="You are a budgeting assistant.",
        tools=[lookup_spending],
        **kw,
    )


def handle_ctx() -> RunContext[None]:
    handle = TracerHandle.builder().with_session_id("s-42").with_user_id("u-7").with_tag("budget").build()
    return RunContext.ephemeral(None).with_tracer(handle.with_tag("test"))


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_tool_run_is_an_agent_span_with_a_turn_per_model_call_holding_its_chat_and_tools(
    otel: Pipeline, backend: str
) -> None:
    current_spans.clear()
    budget = budget_agent()

    result = run(
        lambda: collect(budget.run(handle_ctx(), "How am I doing?", interpreter=otel.observer())), backend
    )

    spans = otel.finished()
    assert shape(spans) == (tool_run_tree("budget"),)
    (run_id,) = [e.run_id for e in result.events if isinstance(e, RunStarted)]
    (call_id,) = [e.item.call_id for e in result.events if isinstance(e, ToolCallItem)]
    stamps = {
        "session.id": "s-42",
        "user.id": "u-7",
        "langfuse.trace.tags": ("budget", "test"),
        "gen_ai.conversation.id": "s-42",
    }
    root = one(spans, "invoke_agent budget")
    assert attributes(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "budget",
        "gen_ai.agent.description": "The budget agent.",
        "gen_ai.provider.name": "mock",
        "gen_ai.request.model": "budget-model",
        "helikon.run.id": run_id,
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 10,
        **stamps,
    }
    turns = named(spans, "agent.turn")
    assert [attributes(t) for t in turns] == [
        {"helikon.turn": n, "gen_ai.agent.name": "budget", **stamps} for n in (1, 2)
    ]
    first, second = named(spans, "chat budget-model")
    assert first.kind is SpanKind.CLIENT
    first_chunk = attributes(first).pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(first_chunk, float) and first_chunk >= 0
    assert {k: v for k, v in attributes(first).items() if k != "gen_ai.response.time_to_first_chunk"} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mock",
        "gen_ai.request.model": "budget-model",
        "gen_ai.output.type": "text",
        "gen_ai.conversation.id": "s-42",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.response.finish_reasons": ("tool_call",),
    }
    assert attributes(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes(second)["gen_ai.response.id"] == "resp-2"
    assert (
        attributes(second)["gen_ai.usage.input_tokens"],
        attributes(second)["gen_ai.usage.output_tokens"],
    ) == (
        20,
        6,
    )
    call = one(spans, "execute_tool lookup_spending")
    assert attributes(call) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_spending",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look up this month's spending in a category.",
    }
    # While the tool ran, its own span was the current one (so its spans nest under it).
    assert current_spans == [call.context.span_id]
    assert all(s.status.status_code.name == "UNSET" for s in spans)
    assert not any(CONTENT_KEYS & set(attributes(s)) for s in spans)
    assert root.start_time <= turns[0].start_time <= first.start_time <= first.end_time <= call.start_time  # type: ignore[operator]
    assert call.end_time <= turns[1].start_time <= second.end_time <= root.end_time  # type: ignore[operator]


def test_a_tool_run_reports_token_usage_durations_and_tool_calls(otel: Pipeline) -> None:
    run(lambda: collect(budget_agent().run(None, "How am I doing?", interpreter=otel.observer())))

    tokens = {label(p, "gen_ai.token.type"): p for p in otel.metric_points("gen_ai.client.token.usage")}
    assert (tokens["input"].sum, tokens["input"].count) == (30, 2)  # type: ignore[union-attr]
    assert (tokens["output"].sum, tokens["output"].count) == (10, 2)  # type: ignore[union-attr]
    assert dict(tokens["input"].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mock",
        "gen_ai.request.model": "budget-model",
        "gen_ai.token.type": "input",
    }
    durations = {
        label(p, "gen_ai.operation.name"): p for p in otel.metric_points("gen_ai.client.operation.duration")
    }
    assert {op: p.count for op, p in durations.items()} == {  # type: ignore[union-attr]
        "chat": 2,
        "execute_tool": 1,
        "invoke_agent": 1,
    }
    # The duration metric carries only the attributes the conventions list
    # for it: the tool's name is on helikon's own counter.
    assert dict(durations["execute_tool"].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.provider.name": "mock",
    }
    assert list(durations["chat"].explicit_bounds)[:3] == [0.01, 0.02, 0.04]  # type: ignore[union-attr]
    (calls,) = otel.metric_points("helikon.tool.calls")
    assert calls.value == 1  # type: ignore[union-attr]
    assert dict(calls.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_spending",
        "gen_ai.provider.name": "mock",
    }


@tool
async def flaky_lookup(category: str) -> str:
    """Look up spending, badly.

    Args:
        category: the budget category.
    """
    raise ToolError(f"the ledger for {category} is locked")


def test_a_failed_run_marks_the_failing_tool_model_call_and_run_with_error_status_and_type(
    otel: Pipeline,
) -> None:
    failing = agent(
        "budget",
        call_tools(("flaky_lookup", {"category": "food"}), usage=Usage(5, 2)),
        [TextChunk("Let me"), ModelError.rate_limited("slow down", retry_after_ms=500)],
        tools=[flaky_lookup],
    )

    with pytest.raises(RunError):
        run(lambda: collect(failing.run(None, "How am I doing?", interpreter=otel.observer())))

    spans = otel.finished()
    assert shape(spans) == (
        (
            "invoke_agent budget",
            (
                ("agent.turn", (("chat budget-model", ()), ("execute_tool flaky_lookup", ()))),
                ("agent.turn", (("chat budget-model", ()),)),
            ),
        ),
    )
    tool_span = one(spans, "execute_tool flaky_lookup")
    assert tool_span.status.status_code.name == "ERROR"
    assert attributes(tool_span)["error.type"] == "tool_crashed"
    assert "the ledger for food is locked" in (tool_span.status.description or "")
    ok_call, failed_call = named(spans, "chat budget-model")
    assert ok_call.status.status_code.name == "UNSET"
    assert failed_call.status.status_code.name == "ERROR"
    assert attributes(failed_call)["error.type"] == "rate_limited"
    root = one(spans, "invoke_agent budget")
    assert root.status.status_code.name == "ERROR"
    assert attributes(root)["error.type"] == "model_failed"
    assert "rate limited: slow down" in (root.status.description or "")
    assert [t.status.status_code.name for t in named(spans, "agent.turn")] == ["UNSET", "UNSET"]

    errors = {
        (label(p, "gen_ai.operation.name"), label(p, "error.type"))
        for p in otel.metric_points("gen_ai.client.operation.duration")
    }
    assert errors == {
        ("chat", None),
        ("chat", "rate_limited"),
        ("execute_tool", "tool_crashed"),
        ("invoke_agent", "model_failed"),
    }
    (calls,) = otel.metric_points("helikon.tool.calls")
    assert calls.attributes["error.type"] == "tool_crashed"  # type: ignore[index]


@tool
async def cancel_run(ctx: ToolContext[None]) -> str:
    """Cancel the run from inside."""
    ctx.cancel.cancel()
    return "cancelled"


def test_a_cancelled_run_ends_with_error_type_cancelled(otel: Pipeline) -> None:
    cancelled = agent("budget", call_tools(("cancel_run", {})), say("never"), tools=[cancel_run])

    with pytest.raises(RunError):
        run(lambda: collect(cancelled.run(None, "go", interpreter=otel.observer())))

    root = one(otel.finished(), "invoke_agent budget")
    assert (root.status.status_code.name, attributes(root)["error.type"]) == ("ERROR", "cancelled")


def test_a_run_suspended_for_approval_ends_its_spans_without_an_error(otel: Pipeline) -> None:
    asking = agent("budget", call_tools(("lookup_spending", {"category": "rent"})), tools=[lookup_spending])
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_policy(lambda ctx, tool, args: AskUser("May I look?"))
        .with_suspend_on_approval()
    )

    with pytest.raises(RunSuspended):
        drain(asking.run(ctx, "go", interpreter=otel.observer()))

    spans = otel.finished()
    root = one(spans, "invoke_agent budget")
    assert attributes(root)["helikon.run.suspended"] is True
    assert root.status.status_code.name == "UNSET"
    assert shape(spans) == (("invoke_agent budget", (("agent.turn", (("chat budget-model", ()),)),)),)
    (event,) = named(spans, "agent.turn")[0].events
    assert (event.name, dict(event.attributes or {})["gen_ai.tool.name"]) == (
        "helikon.approval_requested",
        "lookup_spending",
    )


def test_runs_under_a_context_whose_handle_has_telemetry_are_observed_without_naming_an_interpreter(
    otel: Pipeline,
) -> None:
    telemetry = Telemetry(otel.tracer_provider, otel.meter_provider)
    ctx = RunContext.ephemeral(None).with_tracer(TracerHandle(telemetry, session_id="s-1"))

    run(lambda: collect(budget_agent().run(ctx, "How am I doing?")))

    root = one(otel.finished(), "invoke_agent budget")
    assert attributes(root)["session.id"] == "s-1"
    assert len(otel.finished()) == 6


def test_concurrent_runs_through_one_observer_give_one_tree_each(otel: Pipeline) -> None:
    observer = otel.observer()
    first, second = budget_agent(), budget_agent(name="planner")

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(collect, first.run(None, "a", interpreter=observer))
            group.start_soon(collect, second.run(None, "b", interpreter=observer))

    anyio.run(both)

    assert sorted(shape(otel.finished())) == [tool_run_tree("budget"), tool_run_tree("planner")]


def tool_run_tree(name: str) -> Any:
    return (
        f"invoke_agent {name}",
        (
            ("agent.turn", ((f"chat {name}-model", ()), ("execute_tool lookup_spending", ()))),
            ("agent.turn", ((f"chat {name}-model", ()),)),
        ),
    )


def test_an_effect_performed_through_the_step_api_is_a_span_of_its_own(otel: Pipeline) -> None:
    budget = budget_agent()
    first = start(budget, "How am I doing?", run_id="step-1")

    _events, result = anyio.run(
        lambda: perform(budget, first.effect, run_id="step-1", interpreter=otel.observer())
    )

    assert type(result).__name__ == "ModelResponded"
    (chat,) = otel.finished()
    assert chat.parent is None and chat.name == "chat budget-model"
    assert attributes(chat)["gen_ai.usage.input_tokens"] == 10


# -- no provider, no overhead ---------------------------------------------------------------


def test_the_api_own_providers_count_as_not_configured_and_the_sdk_ones_as_configured() -> None:
    from opentelemetry import metrics

    assert not configured(trace.NoOpTracerProvider())
    assert not configured(metrics.NoOpMeterProvider())
    assert configured(TracerProvider())


def test_without_a_provider_the_observer_hands_effects_to_the_inner_interpreter_untouched() -> None:
    if configured(trace.get_tracer_provider()):
        pytest.skip("a global tracer provider is set in this process")
    observer = ObservingInterpreter(LiveInterpreter(run_id="r-plain"))
    budget = budget_agent()
    plain = run(
        lambda: collect(budget_agent().run(None, "How am I doing?", interpreter=LiveInterpreter("r-plain")))
    )

    observed = run(lambda: collect(budget.run(None, "How am I doing?", interpreter=observer)))

    assert observed.events == plain.events
    env = budget.make_env(RunContext.ephemeral(None), observer)
    stream = observer.perform(start(budget, "hi", run_id="r").effect, env)
    # The very stream of the inner interpreter (a model call's: its one generator), no wrapper in between.
    assert stream.ag_code.co_qualname == "LiveInterpreter._call_model"  # type: ignore[attr-defined]
    anyio.run(stream.aclose)  # type: ignore[attr-defined]


# -- the handle and the wrapping -------------------------------------------------------------


def test_the_tracer_handle_builder_collects_session_user_and_tags() -> None:
    handle = TracerHandle.builder().with_session_id("demo-session").with_user_id("demo-user")
    handle = handle.with_tag("example").with_tag("prod").build()

    assert (handle.session_id, handle.user_id, handle.tags) == (
        "demo-session",
        "demo-user",
        ("example", "prod"),
    )
    assert TracerHandle(tags="one").tags == ("one",)
    assert TracerHandle().with_tags(["a", "b"]).tags == ("a", "b")
    ctx = RunContext.ephemeral(None).with_tracer(handle)
    assert ctx.tracer is handle


def test_a_handle_wraps_an_interpreter_only_with_a_tracer_that_can_observe(otel: Pipeline) -> None:
    live = LiveInterpreter()
    assert TracerHandle().instrument(live) is live
    assert TracerHandle("not an observer").instrument(live) is live

    telemetry = Telemetry(otel.tracer_provider)
    wrapped = TracerHandle(telemetry).instrument(live)
    assert (
        isinstance(wrapped, ObservingInterpreter) and wrapped.inner is live and wrapped.telemetry is telemetry
    )
    # An observed interpreter is not observed twice.
    assert TracerHandle(telemetry).instrument(wrapped) is wrapped
    explicit = otel.observer(live)
    assert TracerHandle(telemetry).instrument(explicit) is explicit


def test_a_run_whose_caller_stops_listening_still_ends_its_spans(otel: Pipeline) -> None:
    async def listen_until_the_tool_call() -> None:
        stream = budget_agent().run(None, "How am I doing?", interpreter=otel.observer())
        async with aclosing(stream) as events:
            async for event in events:
                if isinstance(event, ToolCallItem):
                    break  # between two steps: no effect is being performed
        gc.collect()

    anyio.run(listen_until_the_tool_call)

    spans = otel.finished()
    assert shape(spans) == (("invoke_agent budget", (("agent.turn", (("chat budget-model", ()),)),)),)
    assert all(s.status.status_code.name == "UNSET" for s in spans)


def test_a_priced_run_reports_its_cost_on_spans_and_the_cost_counter(otel: Pipeline) -> None:
    from decimal import Decimal

    from helikon import ModelPrice, PriceTable

    prices = PriceTable({"budget-model": ModelPrice(input="2", output="10")})
    ctx = RunContext.ephemeral(None).with_prices(prices)
    result = run(lambda: collect(budget_agent().run(ctx, "How am I doing?", interpreter=otel.observer())))
    # (10 x 2 + 4 x 10) + (20 x 2 + 6 x 10) = 160 dollars per million tokens
    assert result.usage.cost == Decimal("0.00016")
    chats = [s for s in otel.finished() if s.name.startswith("chat")]
    assert sorted(attributes(s)["helikon.usage.cost"] for s in chats) == [0.00006, 0.0001]
    (agent_span,) = [s for s in otel.finished() if s.name.startswith("invoke_agent")]
    assert attributes(agent_span)["helikon.usage.cost"] == 0.00016
    (spent,) = otel.metric_points("helikon.client.cost")
    assert spent.value == pytest.approx(0.00016)  # type: ignore[union-attr]


def test_an_unpriced_run_reports_no_cost(otel: Pipeline) -> None:
    run(lambda: collect(budget_agent().run(None, "How am I doing?", interpreter=otel.observer())))
    assert all("helikon.usage.cost" not in attributes(s) for s in otel.finished())
    assert otel.metric_points("helikon.client.cost") == []
