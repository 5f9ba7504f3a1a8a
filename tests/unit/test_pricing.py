"""Cost: prices as data, one pure function applying them, Decimal money that
round-trips strictly, and agreement with ``genai-prices`` for a model of
every provider helikon ships an adapter for."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anyio
import pytest
from cattrs.errors import ClassValidationError

from helikon import LlmAgent, ModelPrice, PriceTable, RunContext, Usage, collect, tool
from helikon.codec import from_json, to_json
from helikon.events import RunCompleted
from helikon.pricing import Rate, Tier, cost_of, priced
from helikon.providers.prices import PROVIDER_IDS, GenaiPrices
from helikon.snapshots import dump_state, load_state
from helikon.testing import MockModel, call_tools, say

genai_prices = pytest.importorskip("genai_prices")

#: When the prices below were checked (providers change prices over time).
AT = datetime(2026, 6, 1, tzinfo=UTC)

#: One model per provider adapter: (helikon provider name, model id).
MODELS = [
    ("openai", "gpt-4o"),
    ("azure.ai.openai", "gpt-4o-mini"),
    ("anthropic", "claude-sonnet-4-5"),
    ("gcp.gemini", "gemini-2.5-pro"),
    ("gcp.vertex_ai", "gemini-2.5-flash"),
    ("aws.bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0"),
    ("aws.bedrock", "amazon.nova-pro-v1:0"),
]

USAGES = [
    Usage(input_tokens=1234, output_tokens=567),
    Usage(input_tokens=5000, output_tokens=800, cached_input_tokens=3000, reasoning_tokens=300),
    Usage(input_tokens=9000, output_tokens=10, cached_input_tokens=1000, cache_creation_input_tokens=2000),
    Usage(input_tokens=250_000, output_tokens=2000, cached_input_tokens=100_000),  # past a 200k tier
]


def _genai_usage(usage: Usage) -> Any:
    return genai_prices.Usage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        output_tokens=usage.output_tokens,
    )


@pytest.mark.parametrize(("provider", "model"), MODELS)
@pytest.mark.parametrize("usage", USAGES, ids=range(len(USAGES)))
def test_cost_agrees_with_genai_prices(provider: str, model: str, usage: Usage) -> None:
    price = GenaiPrices(at=AT).price(provider, model)
    assert price is not None, f"{provider} {model} has no price"
    expected = genai_prices.calc_price(
        _genai_usage(usage), model, provider_id=PROVIDER_IDS[provider], genai_request_timestamp=AT
    ).total_price
    assert cost_of(usage, price) == expected


def test_a_model_nobody_prices_costs_none() -> None:
    assert GenaiPrices(at=AT).price("openai", "no-such-model-xyz") is None
    assert PriceTable({"m": ModelPrice(input=1, output=1)}).price("mock", "other") is None
    assert priced(Usage(input_tokens=5), None).cost is None


def test_a_sum_with_an_unpriced_part_has_no_cost() -> None:
    known = Usage(input_tokens=1, cost=Decimal("0.1"))
    assert (known + Usage(requests=1)).cost == Decimal("0.1")  # no tokens: nothing unpriced
    assert (known + Usage(input_tokens=1)).cost is None
    assert (known + known).cost == Decimal("0.2")


def test_tiers_apply_to_every_token_past_the_threshold() -> None:
    rate = Rate("1", (Tier(10, "2"),))
    price = ModelPrice(input=rate, output=rate)
    assert cost_of(Usage(input_tokens=10, output_tokens=0), price) == Decimal("0.00001")
    assert cost_of(Usage(input_tokens=11, output_tokens=0), price) == Decimal("0.000022")


def test_reasoning_and_request_prices_where_a_provider_has_them() -> None:
    price = ModelPrice(input=0, output=10, reasoning=20, request="0.005")
    usage = Usage(output_tokens=1000, reasoning_tokens=400)
    assert cost_of(usage, price) == Decimal("600") * 10 / 1_000_000 + Decimal(
        "400"
    ) * 20 / 1_000_000 + Decimal("0.005")


def test_money_round_trips_strictly() -> None:
    usage = Usage(input_tokens=3, cost=Decimal("0.000012500"))
    data = to_json(usage)
    assert b'"cost":"0.000012500"' in data
    assert from_json(data, Usage) == usage and to_json(from_json(data, Usage)) == data
    for bad in (b'{"cost":0.5}', b'{"cost":"5E-1x"}', b'{"cost":"Infinity"}', b'{"cost":"0.50E0"}'):
        with pytest.raises(ClassValidationError):
            from_json(bad, Usage)


@tool
def lookup(q: str) -> str:
    """Look up.

    Args:
        q: what.
    """
    return "found"


def _priced_run() -> Any:
    table = PriceTable({"m1": ModelPrice(input="2.5", output="10", cached_input="1.25")})
    model = MockModel(
        [
            call_tools(("lookup", {"q": "x"}), usage=Usage(input_tokens=1000, output_tokens=100)),
            say("done", usage=Usage(input_tokens=2000, output_tokens=50, cached_input_tokens=1000)),
        ],
        model_id="m1",
    )
    agent = LlmAgent(name="a", model=model, tools=[lookup])
    ctx = RunContext.ephemeral(None).with_prices(table)
    return agent, ctx


def test_the_run_result_and_its_terminal_event_carry_the_cost() -> None:
    agent, ctx = _priced_run()
    result = anyio.run(lambda: collect(agent.run(ctx, "go")))
    # turn 1: 1000 x 2.5 + 100 x 10 = 3500; turn 2: 1000 x 2.5 + 1000 x 1.25 + 50 x 10 = 4250
    assert result.usage.cost == Decimal("0.00775")
    assert result.usage.requests == 2 and result.usage.tool_calls == 1
    (done,) = [e for e in result.events if isinstance(e, RunCompleted)]
    assert done.usage.cost == Decimal("0.00775")


def test_a_snapshot_keeps_the_cost_exact() -> None:
    from helikon import steps

    agent, ctx = _priced_run()
    outcome = steps.start(agent, "go", ctx=ctx, run_id="r1")
    _, result = anyio.run(lambda: steps.perform(agent, outcome.effect, ctx, run_id="r1"))
    after = steps.advance(agent, outcome.state, result, ctx=ctx)
    assert after.state.usage.cost == Decimal("0.0035")
    again = load_state(dump_state(after.state))
    assert again == after.state and again.usage.cost == Decimal("0.0035")


# -- an agent used as a tool outside a tree -------------------------------------------


def _tool_context(prices: Any) -> Any:
    from helikon.cancel import CancellationToken
    from helikon.context import Actions, SessionState, ToolContext, TracerHandle
    from helikon.ids import CallId, RunId

    return ToolContext(
        None,
        SessionState(),
        Actions(),
        CancellationToken(),
        TracerHandle(),
        CallId("c1"),
        RunId("r"),
        "boss",
        prices=prices,
    )


def test_an_agent_used_as_a_tool_outside_a_tree_is_priced_like_its_caller() -> None:
    """``AgentAsTool.invoke`` (the sub-agent run whole, as a caller outside a
    tree runs it) passes its caller's prices on: a sub-agent with a cost
    limit can show it stays within it."""
    import anyio

    from helikon import AgentAsTool, LlmAgent, RunConfig, ToolError, UsageLimits

    @tool
    def look() -> str:
        """Look."""
        return "seen"

    def helper() -> AgentAsTool:
        # two turns: the limits are checked before the second
        script = [call_tools(("look", {}), usage=Usage(1000, 100)), say("helped", usage=Usage(1000, 100))]
        agent = LlmAgent(
            name="helper",
            model=MockModel(script, model_id="m1"),
            tools=[look],
            config=RunConfig(usage_limits=UsageLimits(cost="0.01")),
        )
        return AgentAsTool(agent)

    table = PriceTable({"m1": ModelPrice(input=1, output=2)})
    answer = anyio.run(lambda: helper().invoke(_tool_context(table), {"input": "x"}))
    assert answer == "helped"
    # without prices the cost is unknown, and a cost limit over it is broken
    with pytest.raises(ToolError, match="cost"):
        anyio.run(lambda: helper().invoke(_tool_context(None), {"input": "x"}))
