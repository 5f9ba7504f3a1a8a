"""Replay: a recorded run, performed again with no IO at all.

:class:`ReplayInterpreter` answers each effect with the recorded result, and
re-emits the recorded model chunks' deltas through the same pure
:func:`~helikon.loop.delta_event` the live interpreter uses, so a replayed
run's events equal the recorded ones. At the first effect that differs from
the recording — or events that differ, or a run that ends early or late — it
raises :class:`ReplayDivergence` with a readable, field-by-field diff.

With ``live_tools=True`` (VCR-style) only the model is replayed: tool calls
(with their hooks and policy) and dynamic instructions run for real, and a
result that differs from the recorded one is a divergence naming the tool.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Generator, Sequence
from itertools import chain
from typing import Any, Final, final

from helikon import codec
from helikon._conversation import Conversation
from helikon.diff import diff, same
from helikon.effects import (
    AllPerformed,
    AskPolicy,
    AtPath,
    AwaitApproval,
    CallModel,
    CallStep,
    Effect,
    EffectResult,
    ExecuteTools,
    FireHook,
    InstructionsRendered,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    PathResult,
    PerformAll,
    ReconcileTool,
    RenderInstructions,
    Terminate,
    ToolsExecuted,
)
from helikon.errors import HelikonError, RunSuspended
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._drive import Interpreter, is_result
from helikon.interpreters._env import RunEnv
from helikon.interpreters._live import LiveInterpreter
from helikon.interpreters._machine import OutcomeLike
from helikon.interpreters._recording import scrubbed, scrubbed_step, secrets_of, tree_of
from helikon.interpreters._tree_env import env_at
from helikon.items import Item
from helikon.loop import delta_event
from helikon.model import ModelRequest
from helikon.trace import Trace, TraceStep, _pathless, _same_head, _since, tree_definition, without_paths

_CONTEXT_STEPS = 3


class ReplayDivergence(HelikonError):
    """The run did something the recording did not.

    ``step`` is the index of the first differing step; ``differences`` the
    field paths that differ.
    """

    def __init__(self, message: str, step: int, differences: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.step = step
        self.differences = differences


def _describe(step: TraceStep) -> str:
    effect = step.effect
    match effect:
        case CallModel(turn=turn):
            detail = f"CallModel(turn={turn})"
        case ExecuteTools(steps=steps):
            detail = "ExecuteTools(" + ", ".join(_step_label(s) for s in steps) + ")"
        case _:
            detail = type(effect).__name__
    return f"  #{step.index}: {detail} -> {type(step.result).__name__}"


def _step_label(step: CallStep) -> str:
    match step:
        case InvokeTool(tool=tool, args=args):
            return f"{tool}({codec.to_json(args).decode()})"
        case FireHook(call_id=call_id, hook=hook, event=event):
            return f"{type(event).__name__} hook #{hook} of {call_id}"
        case AskPolicy(call_id=call_id, tool=tool):
            return f"policy about {tool} ({call_id})"
        case ReconcileTool(call_id=call_id, tool=tool):
            return f"reconcile {tool} ({call_id})"


def _loose(effect: Effect) -> object:
    """What a loose replay compares: kinds, tool names and arguments."""
    match effect:
        case CallModel(turn=turn):
            return ("CallModel", turn)
        case ExecuteTools(steps=steps):
            return ("ExecuteTools", tuple(codec.unstructure(s, CallStep) for s in steps))
        case PerformAll(effects=effects):  # an agent tree's wave: each path's effect, loosely
            return ("PerformAll", tuple((at.path, _loose(at.effect)) for at in effects))
        case _:
            return codec.unstructure(effect, Effect)


@final
class ReplayInterpreter:
    """Replays ``trace``.

    Args:
        trace: the recording.
        strict: effects must equal the recorded ones exactly (the default);
            with ``strict=False`` only effect kinds, tool names and arguments
            are compared, not the full model request — for traces recorded
            before an instructions change.
        live_tools: answer only the model from the recording; run tool calls
            (with their hooks and policy) and dynamic instructions for real,
            and diverge when one gives another result than the recorded one.
            This catches a regression in a tool's implementation, which a
            plain replay (feeding back the recorded results) cannot.
        inner: the interpreter that performs the live effects (a new
            :class:`LiveInterpreter` by default).
    """

    def __init__(
        self,
        trace: Trace,
        *,
        strict: bool = True,
        live_tools: bool = False,
        inner: Interpreter | None = None,
    ) -> None:
        self.trace = trace
        #: This interpreter replays: what it performs was performed before
        #: (an observer marks its spans and records no metrics for it).
        self.replaying = True
        self.strict = strict
        self.live_tools = live_tools
        self._inner = inner if inner is not None else LiveInterpreter(trace.header.run_id)
        self._next = 0
        self._checked = False
        self._events: list[AgentEvent] = []
        self._last: tuple[ModelRequest, ModelRequest] = (_NO_REQUEST, _NO_REQUEST)
        #: The recording's events (read once).
        self._expected: tuple[AgentEvent, ...] | None = None
        #: The secrets of the environment last asked about (its spec and machine, by identity).
        self._secrets: tuple[object, object, tuple[str, ...]] = (None, None, ())

    def _same_call(self, actual: CallModel, recorded: CallModel) -> bool:
        """``actual == recorded``, comparing only what is new since the last
        model call: a conversation only grows, so when both requests start
        with the previous pair's (already compared) messages, equality of
        the rest is equality of the whole (with :func:`_grown`, or
        :func:`~helikon.trace._same_head` for requests that are not
        conversations). The prefix checks are cheap: the
        run reuses its message objects and the trace shares them between
        steps, so ``==`` mostly meets identical objects; tools and settings
        the previous pair held (the same objects) were compared then."""
        a, b = actual.request, recorded.request
        last_a, last_b = self._last
        if actual.turn != recorded.turn:
            return False
        new_a = _grown(a.messages, last_a.messages)
        new_b = _grown(b.messages, last_b.messages) if new_a is not None else None
        if new_b is None and len(a.messages) != len(b.messages):
            return False
        if (a.tools is not last_a.tools or b.tools is not last_b.tools) and a.tools != b.tools:
            return False
        if (
            a.settings is not last_a.settings or b.settings is not last_b.settings
        ) and a.settings != b.settings:
            return False
        if a.instructions != b.instructions:
            return False
        if new_b is not None:
            # both grew the (equal) previous pair: equal whole iff equal growth
            if new_a != new_b:
                return False
            self._last = (a, b)
            return True
        prev_a, prev_b = last_a.messages, last_b.messages
        n = min(len(prev_a), len(a.messages))
        start = n if _same_head(a.messages, prev_a, n) and _same_head(b.messages, prev_b, n) else 0
        if _since(a.messages, start) != _since(b.messages, start):
            return False
        self._last = (a, b)
        return True

    def _secrets_of(self, env: RunEnv) -> tuple[str, ...]:
        """:func:`secrets_of` ``env``, found once per run's environment."""
        spec, machine, secrets = self._secrets
        if spec is not env.spec or machine is not env.machine:
            secrets = secrets_of(env)
            self._secrets = (env.spec, env.machine, secrets)
        return secrets

    def _check_definition(self, env: RunEnv) -> None:
        """The agent must be the one recorded: its instructions, tools, model,
        output schema and governance (strict); a loose replay only warns."""
        recorded = self.trace.header.definition
        if not recorded:
            return
        current = tree_definition(env.spec, tree_of(env))
        if same(recorded, current):  # the usual answer, without making a diff's lines
            return
        differences = diff(recorded, current, "definition")
        if not differences:
            return
        if self.strict:
            raise self._divergence(0, "the agent's definition differs from the recording", differences)
        warnings.warn(
            "replaying a trace of a different agent definition: " + "; ".join(differences[:5]),
            stacklevel=2,
        )

    def now(self) -> float | None:
        """The recorded clock reading: the run's first before any step, then
        the reading taken with the step just replayed."""
        if self._next == 0:
            return self.trace.header.started
        return self.trace.steps[self._next - 1].now

    def new_run_id(self) -> RunId:
        self._checked = False
        self._next = 0
        self._events = []
        self._last = (_NO_REQUEST, _NO_REQUEST)
        return RunId(self.trace.header.run_id)

    def _divergence(self, index: int, headline: str, differences: list[str]) -> ReplayDivergence:
        before = self.trace.steps[max(0, index - _CONTEXT_STEPS) : index]
        lines = [f"replay diverged at step {index}: {headline}"]
        if differences:
            lines.append("differences (expected = recorded, got = this run):")
            lines.extend(f"  {d}" for d in differences[:40])
            if len(differences) > 40:
                lines.append(f"  ... and {len(differences) - 40} more")
        if before:
            lines.append("last steps before it:")
            lines.extend(_describe(s) for s in before)
        return ReplayDivergence("\n".join(lines), index, tuple(differences))

    async def _live(self, effect: Effect, env: RunEnv, step: TraceStep) -> EffectResult:
        """Perform ``effect``'s tool calls and instructions for real and check
        each result against the recording (scrubbed of secrets as the
        recorder scrubs them)."""
        if type(effect) is PerformAll and type(step.result) is AllPerformed:
            recorded = {r.path: r.result for r in step.result.results}
            results: list[PathResult] = []
            for at in effect.effects:
                answer = recorded.get(at.path)
                if answer is not None and _has_user_code(at.effect):
                    sub = env_at(env, at.path, self._inner)
                    where = "/".join(at.path)
                    asked = _answered_part(at.effect, answer)
                    answer = await self._verified(asked, sub, answer, step.index, where, secrets_of(env))
                if answer is not None:
                    results.append(PathResult(at.path, answer))
            return AllPerformed(tuple(results))
        asked = _answered_part(effect, step.result)
        return await self._verified(asked, env, step.result, step.index, None, secrets_of(env))

    async def _verified(
        self,
        effect: Effect,
        env: RunEnv,
        recorded: EffectResult,
        index: int,
        where: str | None,
        secrets: tuple[str, ...],
    ) -> EffectResult:
        actual = await _run_live(self._inner, effect, env)
        seen = scrubbed(actual, EffectResult, secrets) if secrets else actual
        if seen == recorded:
            return actual
        headline = f"{type(effect).__name__} run live gave {_describe_results(recorded, seen, effect)}"
        if where:
            headline += f", in the sub-agent at {where}"
        differences = diff(
            codec.unstructure(recorded, EffectResult), codec.unstructure(seen, EffectResult), "result"
        )
        raise self._divergence(index, headline + " than the recording", differences)

    def select(self, effect: Effect) -> Effect:
        """The part of ``effect`` the recording answers next (a wave's parts
        were answered one by one, see :mod:`helikon.interpreters._waves`):
        what an observer shows as performed by this step."""
        if self._next >= len(self.trace.steps):
            return effect
        return _answered_part(effect, self.trace.steps[self._next].result)

    def observe(self, env: RunEnv, outcome: OutcomeLike) -> None:
        if not self._checked and not env.path:
            self._checked = True
            self._check_definition(env)
        self._events += outcome.events
        if type(outcome.effect) is not Terminate:
            return
        if self._next < len(self.trace.steps):
            raise self._divergence(
                self._next,
                f"the run ended but the recording has {len(self.trace.steps) - self._next} more step(s)",
                [],
            )
        if self._expected is None:
            self._expected = self.trace.events
        expected = self._expected
        actual = tuple(self._events)
        if actual == expected:
            # equal events: equal without paths too (the recording's have none then)
            return
        if _pathless(self.trace, expected):
            # Recorded before events carried the path that emitted them (a
            # format-4 trace, or one upgraded from it): compared without it.
            actual = without_paths(actual)
        if actual != expected:
            differences = _diff_events(expected, actual)
            raise self._divergence(self._next, "the run's events differ from the recording", differences)

    def result_of(self, effect: Effect, env: RunEnv) -> Awaitable[EffectResult] | None:
        """The recorded result of a step that streams nothing (no deltas, no
        forwarded events, nothing run live), checked as :meth:`perform`
        checks it, as one awaitable; None for any other (drive then
        iterates :meth:`perform`)."""
        index = self._next
        steps = self.trace.steps
        if index >= len(steps) or self.live_tools:
            return None
        step = steps[index]
        result = step.result
        if step.live or type(result) is ModelResponded or type(result) is ModelCallFailed:
            return None
        self._check(effect, env, step, index)
        self._next = index + 1
        return _Ready(result)

    def answer_of(self, effect: Effect, env: RunEnv) -> tuple[tuple[AgentEvent, ...], EffectResult] | None:
        """The live events and recorded result of the next step, checked as
        :meth:`perform` checks it, at once (no generator, no awaitable): a
        model call's deltas made from the recorded chunks as :meth:`perform`
        makes them, a step's forwarded events as recorded. None when the
        recording has ended or tools run live (drive then asks
        :meth:`result_of`, then iterates :meth:`perform`)."""
        index = self._next
        steps = self.trace.steps
        if index >= len(steps) or self.live_tools:
            return None
        step = steps[index]
        self._check(effect, env, step, index)
        self._next = index + 1
        result = step.result
        kind = type(result)
        if kind is ModelResponded or kind is ModelCallFailed:
            deltas: list[AgentEvent] = []
            for event in result.events:  # type: ignore[union-attr]
                delta = delta_event(event)
                if delta is not None:
                    deltas.append(delta)
            if not deltas:
                return (), result
            self._events += deltas
            return tuple(deltas), result
        if step.live:
            self._events += step.live
        return step.live, result

    def _check(self, effect: Effect, env: RunEnv, step: TraceStep, index: int) -> None:
        """Raise :class:`ReplayDivergence` unless ``effect`` is step ``index``'s."""
        if not self.strict:
            same = _loose(effect) == _loose(step.effect)
        elif type(effect) is CallModel and type(step.effect) is CallModel:
            same = self._same_call(effect, step.effect)
        else:
            # The recording holds tool rounds scrubbed of secrets: compare what it would hold.
            secrets = self._secrets_of(env)
            if secrets:
                same = scrubbed_step(effect, step.result, secrets)[0] == step.effect
            elif type(effect) is ExecuteTools and type(step.effect) is ExecuteTools:
                # ``==`` of a dict class's one field, without attrs' Python ``__eq__`` frame
                same = effect.__dict__ == step.effect.__dict__
            else:
                same = effect == step.effect
        if not same:
            differences = diff(codec.unstructure(step.effect, Effect), codec.unstructure(effect, Effect))
            expected_kind, kind = type(step.effect).__name__, type(effect).__name__
            headline = (
                f"effect {kind} differs from the recording"
                if expected_kind == kind
                else f"expected effect {expected_kind}, got {kind}"
            )
            where = _where(step.effect, effect)
            if where is not None:
                headline += f", in the sub-agent at {where}"
            raise self._divergence(index, headline, differences)

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        index = self._next
        if index >= len(self.trace.steps) and type(effect) is AwaitApproval:
            # The recording ends where the run suspended: so does its replay.
            raise RunSuspended(effect.requests)
        if index >= len(self.trace.steps):
            raise self._divergence(
                index, f"the run asked for {type(effect).__name__} but the recording has ended", []
            )
        step = self.trace.steps[index]
        self._check(effect, env, step, index)
        self._next = index + 1
        result = step.result
        if self.live_tools and _has_user_code(effect):
            result = await self._live(effect, env, step)
        if type(result) is ModelResponded or type(result) is ModelCallFailed:
            # Deltas come from the recorded chunks through the live path's
            # own function, so a change in it shows up as a divergence.
            for event in result.events:
                delta = delta_event(event)
                if delta is not None:
                    self._events.append(delta)
                    yield delta
        else:
            # Child agents' forwarded events are replayed as recorded.
            for forwarded in step.live:
                self._events.append(forwarded)
                yield forwarded
        yield result


class _Ready:
    """An awaitable whose value is already there (a recorded result)."""

    __slots__ = ("value",)

    def __init__(self, value: EffectResult) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, EffectResult]:
        return self.value
        yield  # a generator that returns at once: nothing is awaited


def _grown(messages: Sequence[Item], previous: Sequence[Item]) -> tuple[Item, ...] | None:
    """The items ``messages`` holds after all of ``previous``'s, when both
    are conversations and ``messages`` starts with ``previous``, found as
    :func:`~helikon.trace._same_head` finds it (the previous chunks, then the
    previous open chunk, by identity first); None otherwise. It reads no
    ``len`` of a conversation (each a Python call) and copies only the
    growth, so a replay's check of a request costs what its turn added."""
    if type(messages) is not Conversation or type(previous) is not Conversation:
        return None
    chunks, before = messages._chunks, previous._chunks
    k = len(before)
    if chunks is not before and (len(chunks) < k or (k and chunks[:k] != before)):
        return None
    tail = previous._tail
    n = len(tail)
    if len(chunks) == k:  # the previous open chunk is still open: the hot path
        own = messages._tail
        return own[n:] if not n or own[:n] == tail else None
    if n and chunks[k][:n] != tail:
        return None
    return tuple(chain(chunks[k][n:], *chunks[k + 1 :], messages._tail))


#: The previous request of a replay that has compared none yet.
_NO_REQUEST: Final = ModelRequest(())


def _answered_part(effect: Effect, recorded: EffectResult) -> Effect:
    """The part of ``effect`` the recorded result answers: a tool round's
    steps answered one by one (see :mod:`helikon.interpreters._waves`) are
    run live one by one, in the order the recording answered them."""
    if type(effect) is ExecuteTools and type(recorded) is ToolsExecuted:
        by_call = {s.call_id: s for s in effect.steps}
        return ExecuteTools(tuple(by_call[r.call_id] for r in recorded.results if r.call_id in by_call))
    if type(effect) is PerformAll and type(recorded) is AllPerformed:
        by_path = {at.path: at for at in effect.effects}
        return PerformAll(
            tuple(
                AtPath(r.path, _answered_part(by_path[r.path].effect, r.result))
                for r in recorded.results
                if r.path in by_path
            )
        )
    return effect


def _has_user_code(effect: Effect) -> bool:
    """Whether a live-tools replay performs ``effect`` (or part of it) for real."""
    if type(effect) is PerformAll:
        return any(_has_user_code(at.effect) for at in effect.effects)
    return type(effect) is ExecuteTools or type(effect) is RenderInstructions


def _describe_results(recorded: EffectResult, actual: EffectResult, effect: Effect) -> str:
    """Which tool calls (or instructions) answered differently."""
    if type(recorded) is InstructionsRendered:
        return "the dynamic instructions rendered another text"
    if type(recorded) is ToolsExecuted and type(actual) is ToolsExecuted and type(effect) is ExecuteTools:
        labels = [
            _step_label(step)
            for step, before, after in zip(effect.steps, recorded.results, actual.results, strict=False)
            if before != after
        ]
        if labels:
            return "another result from " + ", ".join(labels)
    return "another result"


async def _run_live(inner: Interpreter, effect: Effect, env: RunEnv) -> EffectResult:
    result: EffectResult | None = None
    async for item in inner.perform(effect, env):
        if is_result(item):
            result = item
    if result is None:
        raise ReplayDivergence(f"{type(effect).__name__} was performed live without a result", -1)
    return result


def _where(recorded: Effect, actual: Effect) -> str | None:
    """The path of the first sub-machine whose effect differs (agent trees)."""
    mine = {a.path: a.effect for a in actual.effects} if isinstance(actual, PerformAll) else {(): actual}
    theirs = (
        {a.path: a.effect for a in recorded.effects} if isinstance(recorded, PerformAll) else {(): recorded}
    )
    for path in (*theirs, *(p for p in mine if p not in theirs)):
        if mine.get(path) != theirs.get(path):
            return "/".join(path) if path else None
    return None


def _diff_events(expected: tuple[AgentEvent, ...], actual: tuple[AgentEvent, ...]) -> list[str]:
    return diff(
        [codec.unstructure(e, AgentEvent) for e in expected],
        [codec.unstructure(e, AgentEvent) for e in actual],
        "events",
    )


__all__ = ["ReplayDivergence", "ReplayInterpreter"]
