"""What a model's tokens cost: prices as data, and the pure function applying them.

A :class:`ModelPrice` is a model's price list in US dollars per million
tokens, as providers publish them: input, cached input (a cache read),
cache write and output, each a :class:`Rate` that may step up with the
prompt's size (a :class:`Tier` applies to *every* token once the prompt's
input tokens exceed its start, the "cliff" model providers use). Money is
:class:`~decimal.Decimal` throughout: a price or a cost is exact, and it is
written to JSON as a string (``"0.00125"``) that reads back equal.

A price source answers "what does this model cost?" (:class:`PriceSource`):
a user's own :class:`PriceTable`, or the maintained ``genai-prices`` data
(:class:`helikon.providers.prices.GenaiPrices`, the ``prices`` extra). A
model nobody has a price for costs None, never a guess.

The run resolves its model's price once, at its edge, and the machine prices
each turn's usage with :func:`priced` (pure): helikon's usage convention is
that cached and cache-write tokens are part of ``input_tokens`` and
reasoning tokens part of ``output_tokens``, so

    cost = (input - cached - cache_write) x input rate
         + cached x cached-input rate (the input rate when none)
         + cache_write x cache-write rate (the input rate when none)
         + output x output rate                    (per million tokens)

(reasoning tokens at their own rate where a price has one), plus a price
per request where a provider charges one.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from decimal import Decimal
from typing import Final, Protocol, runtime_checkable

import attrs

from helikon.errors import ConfigError
from helikon.model import Usage

#: Exact decimal arithmetic with an explicit context (no ambient setting).
_MONEY: Final = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN, traps=[decimal.InvalidOperation])
_MILLION: Final = Decimal(1_000_000)


def _money(value: object) -> Decimal:
    """A price as a Decimal: a Decimal, an int or a numeric string (a float is
    refused: ``0.1`` is not the price anyone published)."""
    if type(value) is Decimal:
        result = value
    elif type(value) is int or type(value) is str:
        try:
            result = Decimal(value)
        except ArithmeticError:
            raise ConfigError(f"a price must be a number, got {value!r}") from None
    else:
        raise ConfigError(f"a price must be a Decimal, an int or a numeric string, got {value!r}")
    if not result.is_finite() or result < 0:
        raise ConfigError(f"a price must be finite and >= 0, got {value!r}")
    return result


@attrs.frozen
class Tier:
    """A price per million tokens that applies once the prompt's input tokens exceed ``start``."""

    start: int
    price: Decimal = attrs.field(converter=_money)


def _tiers(value: object) -> tuple[Tier, ...]:
    tiers = tuple(value) if isinstance(value, list | tuple) else ()
    if not all(type(t) is Tier for t in tiers):
        raise ConfigError(f"tiers must be Tier values, got {value!r}")
    return tuple(sorted(tiers, key=lambda t: t.start))


@attrs.frozen
class Rate:
    """A price per million tokens: ``base``, or the highest tier the prompt reaches."""

    base: Decimal = attrs.field(converter=_money)
    tiers: tuple[Tier, ...] = attrs.field(default=(), converter=_tiers)

    def at(self, input_tokens: int) -> Decimal:
        """The price for a call whose prompt had ``input_tokens``.

        >>> Rate(Decimal("1.25"), (Tier(200_000, Decimal("2.5")),)).at(200_001)
        Decimal('2.5')
        """
        for tier in reversed(self.tiers):
            if input_tokens > tier.start:
                return tier.price
        return self.base


def _rate(value: object) -> Rate:
    return value if type(value) is Rate else Rate(_money(value))


def _rate_or_none(value: object) -> Rate | None:
    return None if value is None else _rate(value)


@attrs.frozen
class ModelPrice:
    """A model's prices in US dollars per million tokens.

    Each takes a :class:`Rate`, or a plain price (a Decimal, an int or a
    numeric string) for a rate without tiers.

    Args:
        input: input tokens not read from or written to a prompt cache.
        output: output tokens (reasoning included).
        cached_input: tokens read from the prompt cache (None: as input).
        cache_write: tokens written to the prompt cache (None: as input).
        reasoning: reasoning tokens, where a provider prices them apart
            (None: as output).
        request: US dollars per model call, on top (not per million).
    """

    input: Rate = attrs.field(converter=_rate)
    output: Rate = attrs.field(converter=_rate)
    cached_input: Rate | None = attrs.field(default=None, converter=_rate_or_none)
    cache_write: Rate | None = attrs.field(default=None, converter=_rate_or_none)
    reasoning: Rate | None = attrs.field(default=None, converter=_rate_or_none)
    request: Decimal | None = attrs.field(default=None, converter=attrs.converters.optional(_money))


def cost_of(usage: Usage, price: ModelPrice) -> Decimal:
    """What ``usage`` (one model call's) costs at ``price``, in US dollars.

    >>> price = ModelPrice(input="2.5", output="10", cached_input="1.25")
    >>> cost_of(Usage(input_tokens=1000, output_tokens=100, cached_input_tokens=400), price)
    Decimal('0.003')
    """
    n = usage.input_tokens
    read = usage.cached_input_tokens
    write = usage.cache_creation_input_tokens
    plain = max(n - read - write, 0)
    cached = price.cached_input or price.input
    written = price.cache_write or price.input
    total = Decimal(0)
    output = usage.output_tokens
    thinking = 0
    if price.reasoning is not None:
        thinking = min(usage.reasoning_tokens, output)
        output -= thinking
    parts = (
        (plain, price.input),
        (read, cached),
        (write, written),
        (output, price.output),
        (thinking, price.reasoning or price.output),
    )
    for count, rate in parts:
        if count:
            total = _MONEY.add(total, _MONEY.multiply(Decimal(count), rate.at(n)))
    cost = _MONEY.divide(total, _MILLION)
    return cost if price.request is None else _MONEY.add(cost, price.request)


def priced(usage: Usage, price: ModelPrice | None) -> Usage:
    """``usage`` with its ``cost`` at ``price`` (None without a price).

    >>> priced(Usage(input_tokens=10), None).cost is None
    True
    """
    cost = None if price is None else cost_of(usage, price)
    return attrs.evolve(usage, cost=cost)


def money(cost: Decimal | None) -> str:
    """A cost for people: exact dollars (``$0.00125``), or ``unknown``.

    >>> money(Decimal("0.00125")), money(None)
    ('$0.00125', 'unknown')
    """
    return "unknown" if cost is None else f"${cost:f}"


@runtime_checkable
class PriceSource(Protocol):
    """Where prices come from: the price of ``model`` served by ``provider``
    (a GenAI ``gen_ai.provider.name`` such as ``"openai"``), or None."""

    def price(self, provider: str, model: str) -> ModelPrice | None: ...


def _entries(value: object) -> tuple[tuple[str, ModelPrice], ...]:
    items: list[object]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ConfigError(f"a price table takes a mapping of model id to ModelPrice, got {value!r}")
    entries: list[tuple[str, ModelPrice]] = []
    for entry in items:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ConfigError(f"a price table entry must be (model id, ModelPrice), got {entry!r}")
        model, price = entry
        if type(model) is not str or type(price) is not ModelPrice:
            raise ConfigError(f"a price table entry must be (model id, ModelPrice), got {entry!r}")
        entries.append((model, price))
    return tuple(sorted(entries, key=lambda e: e[0]))


@attrs.frozen
class PriceTable:
    """A user's own prices: model id to :class:`ModelPrice`.

    A key ``"provider/model"`` prices a model of one provider only; a plain
    ``"model"`` key prices it whoever serves it. Unknown models cost None.

    >>> table = PriceTable({"my-model": ModelPrice(input=1, output=2)})
    >>> table.price("openai", "my-model").output.base
    Decimal('2')
    >>> table.price("openai", "gpt-4o") is None
    True
    """

    prices: tuple[tuple[str, ModelPrice], ...] = attrs.field(default=(), converter=_entries)

    def price(self, provider: str, model: str) -> ModelPrice | None:
        exact = f"{provider}/{model}"
        found = None
        for key, price in self.prices:
            if key == exact:
                return price
            if key == model:
                found = price
        return found


__all__ = ["ModelPrice", "PriceSource", "PriceTable", "Rate", "Tier", "cost_of", "money", "priced"]
