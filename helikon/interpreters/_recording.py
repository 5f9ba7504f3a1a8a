"""Recording: any interpreter, plus a trace of what it did.

:class:`RecordingInterpreter` wraps another interpreter (the live one by
default) and writes down, for each effect, the result fed back and the
events emitted. After the run, :attr:`RecordingInterpreter.trace` holds the
:class:`~helikon.trace.Trace`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar, final

import attrs

from helikon import codec
from helikon._version import __version__
from helikon.agents import OpaqueState, TreeSpec, TreeState, WorkflowState
from helikon.effects import (
    AllPerformed,
    AtPath,
    Effect,
    EffectResult,
    ExecuteTools,
    PathResult,
    PerformAll,
    Terminate,
)
from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.governance import redact_values
from helikon.ids import RunId
from helikon.interpreters._drive import Interpreter, is_event, is_result
from helikon.interpreters._env import RunEnv
from helikon.interpreters._live import LiveInterpreter
from helikon.interpreters._machine import OutcomeLike, TreeMachine
from helikon.items import Item, UserMessage
from helikon.loop import AgentSpec
from helikon.trace import Trace, TraceHeader, TraceStep, fingerprint, tree_definition

T = TypeVar("T")


@final
class RecordingInterpreter:
    """Performs effects with ``inner`` and records them.

    Args:
        inner: the interpreter that really performs effects; None means a
            new :class:`~helikon.interpreters.LiveInterpreter`.
    """

    def __init__(self, inner: Interpreter | None = None) -> None:
        if inner is None:
            inner = LiveInterpreter()
        self.inner = inner
        self._header: TraceHeader | None = None
        self._steps: list[TraceStep] = []
        self._pending: list[AgentEvent] = []
        self._final: tuple[AgentEvent, ...] | None = None
        self._started: float | None = None
        if getattr(inner, "perform_part", None) is not None:
            # Waves performed part by part: each answer is recorded as drive feeds it.
            self.__dict__["perform_part"] = self._perform_part

    def now(self) -> float | None:
        """The inner interpreter's clock reading, recorded: the run's first
        (before any step) in the header, each later one with its step."""
        clock = getattr(self.inner, "now", None)
        reading: float | None = clock() if clock is not None else None
        self.note_reading(reading)
        return reading

    def note_reading(self, reading: float | None) -> None:
        """Record a clock reading the machine was given (the step API's
        ``now``): the run's first in the header, a later one with the step
        whose result it came with."""
        if self._header is None and not self._steps:
            self._started = reading
        elif self._steps and self._steps[-1].now is None:
            self._steps[-1] = attrs.evolve(self._steps[-1], now=reading)

    @property
    def trace(self) -> Trace:
        """The trace of the last run (complete once the run has ended)."""
        if self._header is None:
            raise StepError("nothing was recorded yet: run an agent with this interpreter first")
        return Trace(self._header, tuple(self._steps), self._final or tuple(self._pending))

    def new_run_id(self) -> RunId:
        self._header = None
        self._steps = []
        self._pending = []
        self._final = None
        self._started = None
        return self.inner.new_run_id()

    def observe(self, env: RunEnv, outcome: OutcomeLike) -> None:
        if self._header is None:
            self._header = TraceHeader(
                agent=env.spec.name,
                run_id=env.run_id,
                fingerprint=fingerprint(env.spec, tree_of(env)),
                input=_input_of(outcome),
                definition=tree_definition(env.spec, tree_of(env)),
                helikon=__version__,
                started=self._started,
            )
        if type(outcome.effect) is Terminate:
            self._final = (*self._pending, *outcome.events)
            self._pending = []
        else:
            self._pending.extend(outcome.events)

    def answered(
        self, env: RunEnv, effect: Effect, result: EffectResult, *, live: tuple[AgentEvent, ...] = ()
    ) -> None:
        """Record ``result`` as the answer to ``effect``, which was not
        performed through this recorder's ``perform``: a human's
        ``ApprovalsGiven`` to the ``AwaitApproval`` a run suspended at, fed
        by ``agent.resume`` or the step API's ``advance`` (so the trace of a
        run suspended and resumed is the trace of one run), or one part's
        answer to a wave (``live``: the live events streamed since the last
        answer), which drive feeds as it comes."""
        if self._header is None:
            return  # nothing observed yet: the resumed run's first outcome opens the trace
        effect, result = scrubbed_step(effect, result, secrets_of(env))
        index = len(self._steps)
        events = (*self._pending, *live)
        self._steps.append(TraceStep(index, effect, result, events, env.path, live))
        self._pending = []

    def _perform_part(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        """One part of a wave, by the inner interpreter; recorded by
        :meth:`answered` when drive feeds its result."""
        perform_part: Callable[[Effect, RunEnv], AsyncIterator[AgentEvent | EffectResult]]
        perform_part = self.inner.perform_part  # type: ignore[attr-defined]
        return perform_part(effect, env)

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        result: EffectResult | None = None
        live: list[AgentEvent] = []
        async for item in self.inner.perform(effect, env):
            if is_result(item):
                result = item
            elif is_event(item):
                live.append(item)
            yield item
        if result is not None:
            events = (*self._pending, *live)
            effect, result = scrubbed_step(effect, result, secrets_of(env))
            self._steps.append(TraceStep(len(self._steps), effect, result, events, env.path, tuple(live)))
            self._pending = []


def scrubbed(value: T, as_type: object, secrets: tuple[str, ...]) -> T:
    """``value`` with every literal occurrence of a secret replaced, so a
    trace never holds one: a tool's raw output reaches the machine, which
    redacts it before the model sees it, and a replay of the scrubbed output
    redacts to the same text."""

    def walk(item: object) -> object:
        if isinstance(item, str):
            return redact_values(item, secrets)
        if isinstance(item, list):
            return [walk(i) for i in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    scrubbed: T = codec.structure(walk(codec.unstructure(value, as_type)), as_type)
    return scrubbed


def secrets_of(env: RunEnv) -> tuple[str, ...]:
    """Every secret the run redacts: its agent's and, in an agent tree, every
    member's (a secret of one member is kept out of the whole trace)."""
    found = list(env.spec.governance.secrets)
    tree = tree_of(env)
    for member in tree.members if tree is not None else ():
        if isinstance(member.spec, AgentSpec):
            found.extend(member.spec.governance.secrets)
    return tuple(dict.fromkeys(found))


def scrubbed_step(
    effect: Effect, result: EffectResult, secrets: tuple[str, ...]
) -> tuple[Effect, EffectResult]:
    """``effect`` and ``result`` as a trace holds them: every tool round's
    (a bare ``ExecuteTools`` or one inside a ``PerformAll`` wave) scrubbed of
    ``secrets``. A round's raw outputs (and what its hooks saw) are the only
    place a secret the machine redacts reaches a step."""
    if not secrets:
        return effect, result
    if type(effect) is ExecuteTools:
        return scrubbed(effect, Effect, secrets), scrubbed(result, EffectResult, secrets)
    if type(effect) is PerformAll:
        rounds = {at.path for at in effect.effects if type(at.effect) is ExecuteTools}
        if not rounds:
            return effect, result
        effect = PerformAll(
            tuple(
                AtPath(a.path, scrubbed(a.effect, Effect, secrets)) if a.path in rounds else a
                for a in effect.effects
            )
        )
        if type(result) is AllPerformed:
            result = AllPerformed(
                tuple(
                    PathResult(r.path, scrubbed(r.result, EffectResult, secrets)) if r.path in rounds else r
                    for r in result.results
                )
            )
    return effect, result


def tree_of(env: RunEnv) -> TreeSpec | None:
    """The agent tree ``env`` runs, if it is one."""
    return env.machine.spec if isinstance(env.machine, TreeMachine) else None


def _input_of(outcome: OutcomeLike) -> tuple[Item, ...]:
    """The run's input: a workflow keeps it in its state; an agent loop's
    first step appends exactly the input items (a resumed run's user
    messages stand in)."""
    state = outcome.state.root.state if isinstance(outcome.state, TreeState) else outcome.state
    if isinstance(state, WorkflowState | OpaqueState):
        return state.input
    if outcome.appended:
        return outcome.appended
    return tuple(i for i in state.conversation if isinstance(i, UserMessage))


__all__ = ["RecordingInterpreter", "scrubbed", "scrubbed_step", "secrets_of", "tree_of"]
