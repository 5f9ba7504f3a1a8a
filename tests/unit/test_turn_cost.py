"""Each model turn's cost is in the event stream (issue 36): the event that
closes the turn (its last ``ToolCallItem``, or its ``MessageOutput`` when it
asked for no tools) carries it when the model has a price; a trace writes it
only then, so runs without prices are recorded byte for byte as before."""

from __future__ import annotations

from decimal import Decimal

import anyio

from helikon import LlmAgent, ModelPrice, PriceTable, RunContext, Trace, Usage, collect, tool
from helikon.codec import converter
from helikon.events import AgentEvent, MessageOutput, ToolCallItem
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.testing import MockModel, call_tools, say

PRICES = PriceTable({"m1": ModelPrice(input=1, output=2)})  # $ per million tokens


@tool
def ping(n: int) -> str:
    """Ping.

    Args:
        n: a number.
    """
    return "pong"


def _agent() -> LlmAgent[None]:
    scripts = [
        call_tools(("ping", {"n": 1}), ("ping", {"n": 2}), text="checking", usage=Usage(1000, 100)),
        say("done", usage=Usage(3000, 500)),
    ]
    return LlmAgent(name="a", model=MockModel(scripts, model_id="m1"), tools=[ping])


def _recorded(ctx: RunContext[None]) -> tuple[list[object], Trace]:
    recorder = RecordingInterpreter(LiveInterpreter("run-cost"))
    result = anyio.run(lambda: collect(_agent().run(ctx, "go", interpreter=recorder)))
    return list(result.events), recorder.trace


def test_the_event_closing_each_turn_carries_its_cost() -> None:
    events, _ = _recorded(RunContext.ephemeral(None).with_prices(PRICES))
    items = [e for e in events if isinstance(e, MessageOutput | ToolCallItem)]
    # turn 1: its message and first call carry nothing, its last call the turn's cost
    assert [type(e).__name__ for e in items] == [
        "MessageOutput",
        "ToolCallItem",
        "ToolCallItem",
        "MessageOutput",
    ]
    assert [e.cost for e in items] == [None, None, Decimal("0.0012"), Decimal("0.004")]
    total = events[-1].usage.cost  # type: ignore[attr-defined]
    assert sum(e.cost for e in items if e.cost is not None) == total == Decimal("0.0052")


def test_the_turn_cost_round_trips_through_the_trace_and_replays() -> None:
    events, trace = _recorded(RunContext.ephemeral(None).with_prices(PRICES))
    assert b'"cost":"0.0012"' in trace.to_bytes()
    loaded = Trace.from_bytes(trace.to_bytes())
    assert list(loaded.events) == events
    replayed = anyio.run(
        lambda: collect(
            _agent().run(
                RunContext.ephemeral(None).with_prices(PRICES), "go", interpreter=ReplayInterpreter(loaded)
            )
        )
    )
    assert list(replayed.events) == events


def test_without_a_price_no_event_carries_a_cost_and_the_trace_writes_none() -> None:
    events, trace = _recorded(RunContext.ephemeral(None))
    assert all(getattr(e, "cost", None) is None for e in events)
    assert b'"cost":"' not in trace.to_bytes()
    written = [
        converter().unstructure(e, AgentEvent) for e in events if isinstance(e, MessageOutput | ToolCallItem)
    ]
    assert written and all("cost" not in fields for fields in written)
    priced = ToolCallItem(events_of_calls(events)[-1].item, cost=Decimal("0.5"))
    assert converter().unstructure(priced, AgentEvent)["cost"] == "0.5"
    assert converter().structure(converter().unstructure(priced, AgentEvent), AgentEvent) == priced  # type: ignore[arg-type]


def events_of_calls(events: list[object]) -> list[ToolCallItem]:
    return [e for e in events if isinstance(e, ToolCallItem)]
