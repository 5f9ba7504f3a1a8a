"""Prices from the maintained ``genai-prices`` data (the ``prices`` extra).

:class:`GenaiPrices` is a :class:`~helikon.pricing.PriceSource`: it finds a
model in the ``genai-prices`` snapshot installed with the package (no
network) by the provider the model reports (``gen_ai.provider.name``) and
its id, and turns the price in force at ``at`` (default: when the run
starts) into a :class:`~helikon.pricing.ModelPrice`. A model it does not
know, or one whose price has parts helikon cannot apply, costs None.

Usage::

    ctx = RunContext.ephemeral(None).with_prices(GenaiPrices())
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

import attrs

from helikon.errors import ConfigError
from helikon.pricing import ModelPrice, Rate, Tier

#: helikon's ``gen_ai.provider.name`` values to ``genai-prices`` provider ids.
PROVIDER_IDS: Final = {
    "openai": "openai",
    "azure.ai.openai": "azure",
    "anthropic": "anthropic",
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "aws.bedrock": "aws",
}

#: Price parts that make a price unknown to helikon: charged on every call
#: by a measure helikon does not count. (Parts whose usage helikon never
#: reports, audio, images, searches, cost nothing here, as in genai-prices.)
_APPLIED: Final = (
    "input_mtok",
    "output_mtok",
    "cache_read_mtok",
    "cache_write_mtok",
    "output_reasoning_mtok",
)
_UNKNOWN: Final = ("input_mchars",)


def _rate(value: Any) -> Rate | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return Rate(value)
    tiers = tuple(Tier(t.start, t.price) for t in value.tiers)
    return Rate(value.base, tiers)


@attrs.frozen
class GenaiPrices:
    """Model prices from ``genai-prices``.

    Args:
        at: the moment whose prices apply (providers change them); None: now.
    """

    at: datetime | None = None

    def price(self, provider: str, model: str) -> ModelPrice | None:
        try:
            from genai_prices import data_snapshot
        except ImportError:
            raise ConfigError(
                "GenaiPrices needs the genai-prices package: pip install 'helikon[prices]'"
            ) from None
        snapshot = data_snapshot.get_snapshot()
        try:
            _, info = snapshot.find_provider_model(model, None, PROVIDER_IDS.get(provider), None)
        except LookupError:
            return None
        found = info.get_prices(self.at or datetime.now(UTC))
        if any(getattr(found, key, None) is not None for key in _UNKNOWN):
            return None
        input_rate = _rate(getattr(found, "input_mtok", None))
        output_rate = _rate(getattr(found, "output_mtok", None))
        if input_rate is None and output_rate is None:
            return None
        per_k = getattr(found, "requests_kcount", None)
        return ModelPrice(
            input=input_rate or Rate(Decimal(0)),
            output=output_rate or Rate(Decimal(0)),
            cached_input=_rate(getattr(found, "cache_read_mtok", None)),
            cache_write=_rate(getattr(found, "cache_write_mtok", None)),
            reasoning=_rate(getattr(found, "output_reasoning_mtok", None)),
            request=None if per_k is None else per_k / 1000,
        )


def default_prices() -> GenaiPrices | None:
    """:class:`GenaiPrices` when ``genai-prices`` is installed, else None
    (what ``helikon run`` prices its runs with)."""
    return GenaiPrices() if importlib.util.find_spec("genai_prices") is not None else None


__all__ = ["PROVIDER_IDS", "GenaiPrices", "default_prices"]
