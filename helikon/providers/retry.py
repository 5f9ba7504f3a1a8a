"""``RetryingModel``: retry transient model failures with backoff.

The agent loop never retries (book, ADR-10): retrying is a composition-layer
choice, made by wrapping a model::

    model = RetryingModel(OpenAIModel.chat("gpt-4o"), RetryPolicy(max_attempts=4, base_delay=0.25))

Only transient failures are retried (rate limits, unavailability, dropped
connections), and only before anything has streamed: once a chunk has been
yielded it cannot be taken back, so a later failure is raised. A rate limit
waits at least the server's retry-after hint. Backoff sleeps stop at once
when the run is cancelled. The jitter's randomness and the sleeping live
here, at the edge — never in the pure core.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import final

import attrs

from helikon.cancel import CancellationToken
from helikon.config import _positive
from helikon.errors import TRANSIENT_MODEL_FAILURES, ConfigError, ModelError, RateLimited
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest
from helikon.protocols import Model


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ConfigError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class RetryPolicy:
    """How to retry.

    Args:
        max_attempts: attempts in all, the first included.
        base_delay: seconds before the first retry; doubles each time.
        max_delay: the cap on one delay, in seconds.
        jitter: the fraction of each delay drawn at random (0 = none).
    """

    max_attempts: int = attrs.field(default=3, validator=_positive)
    base_delay: float = attrs.field(default=0.5, validator=_non_negative)
    max_delay: float = attrs.field(default=30.0, validator=_non_negative)
    jitter: float = attrs.field(default=0.25, validator=_non_negative)

    def delay(self, retry: int, random_fraction: float, retry_after_ms: int | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        >>> RetryPolicy(base_delay=1.0, jitter=0.0).delay(3, 0.5)
        4.0
        >>> RetryPolicy(base_delay=1.0, jitter=0.0).delay(1, 0.5, retry_after_ms=2500)
        2.5
        """
        backoff: float = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        backoff *= 1 - self.jitter * random_fraction
        if retry_after_ms is not None:
            backoff = max(backoff, retry_after_ms / 1000)
        return backoff


@final
class RetryingModel:
    """A model that retries ``model``'s transient failures under ``policy``.

    Args:
        model: the model to wrap.
        policy: how to retry.
        random: the jitter's source of ``[0, 1)`` fractions (seed it in tests).
        on_retry: called with (retry number, error, delay) before each wait.
    """

    def __init__(
        self,
        model: Model,
        policy: RetryPolicy | None = None,
        *,
        random: Callable[[], float] = random.random,
        on_retry: Callable[[int, ModelError, float], object] | None = None,
    ) -> None:
        self.model = model
        self.policy = policy or RetryPolicy()
        self._random = random
        self._on_retry = on_retry

    @property
    def capabilities(self) -> ModelCapabilities:
        return self.model.capabilities

    @property
    def provider(self) -> str:
        return self.model.provider

    @property
    def model_id(self) -> str:
        return self.model.model_id

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        import anyio

        attempt = 1
        while True:
            streamed = False
            try:
                async for event in self.model.invoke(request, cancel):
                    streamed = True
                    yield event
                return
            except ModelError as error:
                transient = isinstance(error.failure, TRANSIENT_MODEL_FAILURES)
                if streamed or not transient or attempt >= self.policy.max_attempts or cancel.cancelled:
                    raise
                hint = error.failure.retry_after_ms if isinstance(error.failure, RateLimited) else None
                delay = self.policy.delay(attempt, self._random(), hint)
                if self._on_retry is not None:
                    self._on_retry(attempt, error, delay)
            with cancel.scope() as scope:
                await anyio.sleep(delay)
            if scope.cancelled_caught:
                return
            attempt += 1


__all__ = ["RetryPolicy", "RetryingModel"]
