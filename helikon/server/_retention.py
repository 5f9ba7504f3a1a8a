"""How long finished runs are kept: a pure decision over (id, finished at)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from helikon.errors import ConfigError


@attrs.frozen
class Retention:
    """Keep a finished run at most ``max_age`` seconds, and at most
    ``max_runs`` finished runs (the oldest go first). Runs still in flight are
    never dropped. ``sweep_every`` is the background sweeper's period."""

    max_age: float = 3600.0
    max_runs: int = 1000
    sweep_every: float = 30.0

    def __attrs_post_init__(self) -> None:
        if self.max_age <= 0 or self.max_runs < 0 or self.sweep_every <= 0:
            raise ConfigError(f"retention needs max_age > 0, max_runs >= 0, sweep_every > 0: {self!r}")


def expired(finished: Iterable[tuple[str, float]], now: float, retention: Retention) -> set[str]:
    """The ids of finished runs to drop: too old, or beyond the count (oldest first)."""
    by_age = sorted(finished, key=lambda run: run[1])
    old = {run_id for run_id, at in by_age if now - at > retention.max_age}
    kept = [run_id for run_id, _ in by_age if run_id not in old]
    surplus = max(len(kept) - retention.max_runs, 0)
    return old | set(kept[:surplus])


__all__ = ["Retention", "expired"]
