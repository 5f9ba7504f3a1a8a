"""Usage limits: the one rule deciding whether a run may spend more.

A run's :class:`~helikon.config.UsageLimits` are checked from the usage the
providers reported, at the two points where spending starts:

- before each model call: the call would be one request more, so
  ``usage.requests + 1`` must stay within ``requests``; the tokens and the
  cost spent so far must stay within theirs;
- before each round of tool calls (the model's turn is in the usage by
  then): ``usage.tool_calls + calls`` must stay within ``tool_calls``, and
  tokens and cost again.

The first limit broken, in the order of :data:`ORDER`, is the one named.
A cost limit over a cost that is unknown (a model without a price spent
tokens) is broken too: the run cannot show it stays within it. An agent
tree applies the same rule to every member's usage together
(:mod:`helikon.agents._tree`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

import attrs

from helikon.config import UsageLimits
from helikon.errors import UsageLimitExceeded
from helikon.loop._hot import set_usage
from helikon.model import Usage
from helikon.pricing import ModelPrice, priced

#: The order limits are checked in (so one run always names the same one).
ORDER: Final = ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens", "cost")


def exceeded(
    limits: UsageLimits,
    usage: Usage,
    *,
    requests: int = 0,
    tool_calls: int = 0,
    agent: str = "",
    path: tuple[str, ...] = (),
) -> UsageLimitExceeded | None:
    """The limit ``usage`` breaks if ``requests`` model calls and
    ``tool_calls`` tool calls start now, or None.

    >>> exceeded(UsageLimits(requests=1), Usage(requests=1), requests=1, agent="a")
    UsageLimitExceeded(limit='requests', value=2, maximum=1, agent='a', path=())
    >>> exceeded(UsageLimits(total_tokens=10), Usage(input_tokens=4, output_tokens=6)) is None
    True
    """
    if limits.unlimited:
        return None
    counts: tuple[tuple[str, int | None, int], ...] = (
        ("requests", limits.requests, usage.requests + requests),
        ("tool_calls", limits.tool_calls, usage.tool_calls + tool_calls),
        ("input_tokens", limits.input_tokens, usage.input_tokens),
        ("output_tokens", limits.output_tokens, usage.output_tokens),
        ("total_tokens", limits.total_tokens, usage.total_tokens),
    )
    for name, maximum, value in counts:
        if maximum is not None and value > maximum:
            return UsageLimitExceeded(name, value, maximum, agent, path)
    if limits.cost is not None:
        if usage.unpriced:
            return UsageLimitExceeded("cost", None, limits.cost, agent, path)
        spent = usage.cost if usage.cost is not None else Decimal(0)
        if spent > limits.cost:
            return UsageLimitExceeded("cost", usage.cost, limits.cost, agent, path)
    return None


def turn_usage(reported: Usage, price: ModelPrice | None) -> Usage:
    """A model call's usage: what the provider reported, priced, one request.

    >>> turn_usage(Usage(input_tokens=2), None)
    Usage(input_tokens=2, output_tokens=0, cached_input_tokens=0, reasoning_tokens=0, \
cache_creation_input_tokens=0, requests=1, tool_calls=0, cost=None)
    """
    if price is None:  # the hot path: one new usage, not two ``attrs.evolve`` copies
        return Usage(
            reported.input_tokens,
            reported.output_tokens,
            reported.cached_input_tokens,
            reported.reasoning_tokens,
            reported.cache_creation_input_tokens,
            reported.requests + 1,
            reported.tool_calls,
            None,
        )
    return attrs.evolve(priced(reported, price), requests=reported.requests + 1)


def spend(
    total: Usage, reported: Usage, price: ModelPrice | None, tool_calls: int = 0
) -> tuple[Decimal | None, Usage]:
    """A model call's cost and the run's usage after it: ``(turn.cost, total +
    turn)`` where ``turn = turn_usage(reported, price)``, with one new
    :class:`~helikon.model.Usage` on the hot path (no price), not two;
    ``tool_calls`` more tool calls counted in it (the hot path's one call).

    >>> spend(Usage(1, 1, requests=1, cost=Decimal(0)), Usage(input_tokens=2), None)
    (None, Usage(input_tokens=3, output_tokens=1, cached_input_tokens=0, reasoning_tokens=0, \
cache_creation_input_tokens=0, requests=2, tool_calls=0, cost=None))
    """
    if price is not None:
        spent = turn_usage(reported, price)
        after = total + spent
        if tool_calls:
            after = attrs.evolve(after, tool_calls=after.tool_calls + tool_calls)
        return spent.cost, after
    i, o, c, r, w = (
        reported.input_tokens,
        reported.output_tokens,
        reported.cached_input_tokens,
        reported.reasoning_tokens,
        reported.cache_creation_input_tokens,
    )
    if type(total) is not Usage:  # a subclass's instance: made the general way
        after = Usage(
            total.input_tokens + i,
            total.output_tokens + o,
            total.cached_input_tokens + c,
            total.reasoning_tokens + r,
            total.cache_creation_input_tokens + w,
            total.requests + reported.requests + 1,
            total.tool_calls + reported.tool_calls + tool_calls,
            None if (i or o or c or r or w) else total.cost,
        )
        return None, after
    # ``Usage(...)`` of the sums, its ``__dict__`` set at once (see
    # :data:`~helikon.loop._hot.BUILT_RAW`): a copy of ``total``'s fields, in order.
    fields = total.__dict__.copy()
    if i or o or c or r or w:
        fields["input_tokens"] = total.input_tokens + i
        fields["output_tokens"] = total.output_tokens + o
        fields["cached_input_tokens"] = total.cached_input_tokens + c
        fields["reasoning_tokens"] = total.reasoning_tokens + r
        fields["cache_creation_input_tokens"] = total.cache_creation_input_tokens + w
        fields["cost"] = None  # ``total + turn``'s cost: the turn is unpriced as soon as it spent tokens
    fields["requests"] = total.requests + reported.requests + 1
    fields["tool_calls"] = total.tool_calls + reported.tool_calls + tool_calls
    after = _new(Usage)
    set_usage(after, fields)
    return None, after


_new: Final = object.__new__

__all__ = ["ORDER", "exceeded", "spend", "turn_usage"]
