"""RetryingModel: transient failures retried before streaming, with backoff."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError, Refused
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest, TextChunk
from helikon.providers.retry import RetryingModel, RetryPolicy


class Flaky:
    """Fails with the scripted errors, in order, then streams "ok"."""

    def __init__(self, *errors: ModelError, fail_after_chunk: bool = False) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.fail_after_chunk = fail_after_chunk

    capabilities = ModelCapabilities()
    provider = "flaky"
    model_id = "flaky-1"

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        if self.fail_after_chunk:
            yield TextChunk("partial")
        if self.errors:
            raise self.errors.pop(0)
        yield TextChunk("ok")


def drain(model: RetryingModel, cancel: CancellationToken | None = None) -> list[ModelEvent]:
    async def go() -> list[ModelEvent]:
        return [e async for e in model.invoke(ModelRequest(()), cancel or CancellationToken())]

    return anyio.run(go)


FAST = RetryPolicy(max_attempts=4, base_delay=0.001, jitter=0.0)


def test_transient_failures_are_retried_until_success() -> None:
    inner = Flaky(ModelError.unavailable("503"), ModelError.transport("reset"))
    waits: list[float] = []

    events = drain(RetryingModel(inner, FAST, on_retry=lambda n, e, d: waits.append(d)))

    assert events == [TextChunk("ok")] and inner.calls == 3
    assert waits == [0.001, 0.002]


def test_attempts_are_capped() -> None:
    inner = Flaky(*[ModelError.unavailable("503")] * 5)

    with pytest.raises(ModelError):
        drain(RetryingModel(inner, FAST))

    assert inner.calls == 4


def test_permanent_failures_are_not_retried() -> None:
    inner = Flaky(ModelError.refused("no"))

    with pytest.raises(ModelError) as info:
        drain(RetryingModel(inner, FAST))

    assert isinstance(info.value.failure, Refused) and inner.calls == 1


def test_a_failure_after_content_streamed_is_raised_not_retried() -> None:
    inner = Flaky(ModelError.unavailable("503"), fail_after_chunk=True)

    with pytest.raises(ModelError):
        drain(RetryingModel(inner, FAST))

    assert inner.calls == 1


def test_rate_limits_wait_at_least_the_retry_after_hint() -> None:
    inner = Flaky(ModelError.rate_limited("429", retry_after_ms=50))
    waits: list[float] = []
    t0 = time.perf_counter()

    drain(RetryingModel(inner, FAST, on_retry=lambda n, e, d: waits.append(d)))

    assert waits == [0.05] and time.perf_counter() - t0 >= 0.05


def test_jitter_shortens_the_delay_by_a_random_fraction() -> None:
    policy = RetryPolicy(base_delay=1.0, jitter=0.5)
    assert policy.delay(1, 0.0) == 1.0
    assert policy.delay(1, 1.0) == 0.5
    assert policy.delay(10, 0.0) == policy.max_delay


def test_backoff_stops_at_once_when_cancelled() -> None:
    inner = Flaky(ModelError.unavailable("503"))
    cancel = CancellationToken()
    model = RetryingModel(inner, RetryPolicy(base_delay=30, jitter=0.0))

    async def go() -> float:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as group:

            async def fire() -> None:
                await anyio.sleep(0.05)
                cancel.cancel()

            group.start_soon(fire)
            assert [e async for e in model.invoke(ModelRequest(()), cancel)] == []
        return time.perf_counter() - t0

    assert anyio.run(go) < 2


def test_bad_policies_are_rejected() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigError):
        RetryPolicy(base_delay=-1)
