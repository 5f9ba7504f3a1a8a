"""Fork (time travel): a recorded run, continued from any step with an edited answer.

:class:`ForkInterpreter` performs a run of the recorded agent with the
recording at hand. Up to step ``at`` it answers every effect from the
recording (the run retraces the recorded one); at step ``at`` it answers
with the edited result (a model's reply, a tool round's outputs, a human's
approvals: any :class:`~helikon.effects.EffectResult` that answers the
recorded effect). After it:

- ``replay=True``: an effect equal to the recorded effect of the same step
  (the same model request, conversation included; the same tool calls) was
  answered by the recording, so it is answered from there again; the first
  effect that differs is a *divergence* (kept in :attr:`divergences`, with
  the field paths :class:`~helikon.interpreters.ReplayDivergence` names),
  and the run continues live from it. In an agent tree's wave, each
  sub-agent's part is compared on its own: the parts that do not depend on
  the edit keep being replayed, the others go live.
- ``replay=False``: everything after the edit is performed live.

Forking at step ``k`` with the recorded answer unchanged (``answer=None``)
in replay mode gives the recorded run again, effect for effect and event for
event (tested for every step of the golden traces). :attr:`marks` says, for
each step the fork performed, whether it was ``replayed``, ``edited`` or
``live`` (a wave's parts each marked).

The fork is a new run: pass ``run_id`` (the recorded run's id by default,
so that an unchanged fork is the recorded run byte for byte) and wrap the
interpreter in a :class:`~helikon.interpreters.RecordingInterpreter` to
keep its trace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, final

import attrs

from helikon import codec
from helikon.diff import diff
from helikon.effects import (
    AllPerformed,
    AtPath,
    Effect,
    EffectResult,
    ModelCallFailed,
    ModelResponded,
    PathResult,
    PerformAll,
)
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._drive import Interpreter, is_event, is_result
from helikon.interpreters._env import RunEnv
from helikon.interpreters._live import LiveInterpreter
from helikon.interpreters._recording import scrubbed_step, secrets_of
from helikon.interpreters._replay import ReplayDivergence
from helikon.interpreters._tree_env import env_at
from helikon.loop import delta_event
from helikon.trace import Trace, TraceStep

#: How a step of a fork was answered.
How = Literal["replayed", "edited", "live"]


@attrs.frozen
class StepMark:
    """How the fork's step ``index`` was answered: ``how`` for the whole step,
    ``parts`` for each sub-agent's part of a wave (path, how)."""

    index: int
    how: How | Literal["mixed"]
    parts: tuple[tuple[tuple[str, ...], How], ...] = ()


def _same(effect: Effect, step: TraceStep, secrets: tuple[str, ...]) -> bool:
    """Whether ``effect`` is the recorded one (compared as the recording holds it: scrubbed)."""
    return scrubbed_step(effect, step.result, secrets)[0] == step.effect


def _differences(recorded: Effect, actual: Effect) -> list[str]:
    return diff(codec.unstructure(recorded, Effect), codec.unstructure(actual, Effect))


@final
class ForkInterpreter:
    """A run of the recorded agent, forked from ``trace`` at step ``at``.

    Args:
        trace: the recording (the parent run).
        at: the step whose answer is replaced (None: no step is; forking
            the user's message is a run on another input with ``at=None``).
        answer: the new answer to step ``at``; None keeps the recorded one.
        replay: after the edit, answer from the recording what does not
            depend on it (True), or perform everything live (False).
        inner: performs the live effects (a lock-step
            :class:`LiveInterpreter` by default).
        run_id: the fork's run id (the recorded run's by default).
    """

    def __init__(
        self,
        trace: Trace,
        at: int | None,
        answer: EffectResult | None = None,
        *,
        replay: bool = True,
        inner: Interpreter | None = None,
        run_id: str | None = None,
    ) -> None:
        if at is not None and not 0 <= at < len(trace.steps):
            raise ValueError(f"step {at} is not a step of the recording (it has {len(trace.steps)})")
        self.trace = trace
        self.at = at
        self.answer = answer
        self.replay = replay
        self.run_id = run_id if run_id is not None else trace.header.run_id
        self._inner: Interpreter = inner if inner is not None else LiveInterpreter(lock_step=True)
        self._reset()

    def _reset(self) -> None:
        self._next = 0
        #: How each step the fork performed was answered.
        self.marks: list[StepMark] = []
        #: Where the run stopped following the recording (first the whole
        #: run's or a sub-agent's), each with the field paths that differ.
        self.divergences: list[ReplayDivergence] = []
        self._live_all = False
        self._live_paths: set[tuple[str, ...]] = set()
        self._reading: float | None = self.trace.header.started
        self._offset: float | None = None

    def new_run_id(self) -> RunId:
        self._reset()
        return RunId(self.run_id)

    def now(self) -> float | None:
        """The recorded clock readings while the run follows the recording;
        once it goes live, the live clock, shifted to continue from the last
        recorded reading (so deadlines carry on where the recording was)."""
        if not self._live_all:
            return self._reading
        clock = getattr(self._inner, "now", None)
        live: float | None = clock() if clock is not None else None
        if live is None:
            return self._reading
        if self._offset is None:
            self._offset = (self._reading or 0.0) - live if self._reading is not None else 0.0
        return live + self._offset

    def _replayable(self, index: int) -> bool:
        """Whether step ``index`` may still be answered from the recording."""
        if self._live_all or index >= len(self.trace.steps):
            return False
        return self.at is None or index < self.at or self.replay

    def _diverge(self, index: int, headline: str, differences: list[str]) -> None:
        message = f"the fork diverged from the recording at step {index}: {headline}; it continues live"
        self.divergences.append(ReplayDivergence(message, index, tuple(differences)))

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        index = self._next
        self._next += 1
        secrets = secrets_of(env)
        if index == self.at:
            step = self.trace.steps[index]
            if not _same(effect, step, secrets):
                raise ReplayDivergence(
                    f"the run reached step {index} with another effect than the recording "
                    f"({type(effect).__name__}, recorded {type(step.effect).__name__}): "
                    "the edit cannot be applied",
                    index,
                    tuple(_differences(step.effect, effect)),
                )
            answer = self.answer if self.answer is not None else step.result
            self.marks.append(StepMark(index, "edited"))
            self._reading = step.now if step.now is not None else self._reading
            async for item in self._recorded(answer, step):
                yield item
            return
        if not self._replayable(index):
            self._go_live(index, effect, None)
            async for item in self._perform_live(effect, env):
                yield item
            self.marks.append(StepMark(index, "live"))
            return
        step = self.trace.steps[index]
        if not self._live_paths and _same(effect, step, secrets):
            self.marks.append(StepMark(index, "replayed"))
            self._reading = step.now if step.now is not None else self._reading
            async for item in self._recorded(step.result, step):
                yield item
            return
        if (
            type(effect) is PerformAll
            and type(step.effect) is PerformAll
            and type(step.result) is AllPerformed
        ):
            async for item in self._wave(index, effect, step, env, secrets):
                yield item
            return
        self._go_live(index, effect, step)
        async for item in self._perform_live(effect, env):
            yield item
        self.marks.append(StepMark(index, "live"))

    def _go_live(self, index: int, effect: Effect, step: TraceStep | None) -> None:
        """The whole run continues live from step ``index``."""
        if self._live_all:
            return
        self._live_all = True
        if step is None:
            if self.at is not None and index > self.at and not self.replay:
                return  # a live fork: no divergence to report
            self._diverge(index, f"the recording has no step {index} ({type(effect).__name__} asked)", [])
            return
        expected, kind = type(step.effect).__name__, type(effect).__name__
        headline = f"effect {kind} differs" if expected == kind else f"expected effect {expected}, got {kind}"
        self._diverge(index, headline, _differences(step.effect, effect))

    async def _wave(
        self, index: int, effect: PerformAll, step: TraceStep, env: RunEnv, secrets: tuple[str, ...]
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        """A wave whose parts are compared one by one: each part equal to the
        recorded part of its path (and of a path that has not diverged) is
        answered from the recording, the others are performed live."""
        assert isinstance(step.effect, PerformAll) and isinstance(step.result, AllPerformed)
        recorded_effects = {at.path: at.effect for at in step.effect.effects}
        recorded_results = {r.path: r.result for r in step.result.results}
        results: list[PathResult] = []
        parts: list[tuple[tuple[str, ...], How]] = []
        waiting: list[AtPath] = []
        live: list[AtPath] = []
        for at in effect.effects:
            mine = recorded_effects.get(at.path)
            answer = recorded_results.get(at.path)
            if at.path in self._live_paths:
                live.append(at)
            elif mine is not None and scrubbed_step(at.effect, answer or step.result, secrets)[0] == mine:
                if answer is None:
                    waiting.append(at)  # the recording answered this part at a later step
                else:
                    results.append(PathResult(at.path, answer))
                    parts.append((at.path, "replayed"))
            else:
                self._live_paths.add(at.path)
                where = "/".join(at.path)
                if mine is None:
                    self._diverge(index, f"the sub-agent at {where} asked for a step the recording lacks", [])
                else:
                    self._diverge(
                        index,
                        f"effect {type(at.effect).__name__} differs, in the sub-agent at {where}",
                        _differences(mine, at.effect),
                    )
                live.append(at)
        if not results and not live:
            live = waiting  # nothing else would answer: those parts go live too
            self._live_paths.update(at.path for at in waiting)
        for at in live:
            sub = env_at(env, at.path, self._inner)
            result: EffectResult | None = None
            async for item in self._inner.perform(at.effect, sub):
                if is_result(item):
                    result = item
                elif is_event(item):
                    yield item
            if result is not None:
                results.append(PathResult(at.path, result))
            parts.append((at.path, "live"))
        order = {at.path: n for n, at in enumerate(effect.effects)}
        results.sort(key=lambda r: order[r.path])
        parts.sort(key=lambda p: order[p[0]])
        hows = {how for _, how in parts}
        self.marks.append(StepMark(index, hows.pop() if len(hows) == 1 else "mixed", tuple(parts)))
        yield AllPerformed(tuple(results))

    async def _perform_live(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        async for item in self._inner.perform(effect, env):
            yield item

    async def _recorded(
        self, result: EffectResult, step: TraceStep
    ) -> AsyncIterator[AgentEvent | EffectResult]:
        """``result`` with the events a replay emits for it (as :class:`ReplayInterpreter`)."""
        if type(result) is ModelResponded or type(result) is ModelCallFailed:
            for event in result.events:
                delta = delta_event(event)
                if delta is not None:
                    yield delta
        else:
            for forwarded in step.live:
                yield forwarded
        yield result


__all__ = ["ForkInterpreter", "How", "StepMark"]
