"""``EvalRun``: a dataset through an agent, scored, as an :class:`EvalReport`.

Rules:

- Every case gets a fresh agent (``agent_factory(case)``), a fresh run
  context (``ctx_factory(case)``, ``RunContext.ephemeral(None)`` by default)
  and a fresh interpreter (``interpreter(case)``, the live one by default),
  so a stateful scripted model is never shared between cases.
- At most ``concurrency`` cases run at once (1 by default: one after the
  other). Results are put back in dataset order, whatever order the cases
  finish in, and each case's run id is ``<run id>:<case id>``: the report
  does not depend on the concurrency.
- Every case's run is recorded as a helikon trace
  (:class:`~helikon.interpreters.RecordingInterpreter` around the chosen
  interpreter) and as session events (the
  :class:`~helikon.sessions.SessionRecorder` fold).
- Evaluators run, in order, only on runs that completed; a failed run is
  the case's error. An evaluator that raises fails the case with the message.
- :meth:`EvalRun.rescore` scores a saved run again from its traces, with no
  agent and no model; :meth:`EvalRun.replay` replays each saved trace
  against the (changed) agent and reports where a case diverges.
- Sinks record the report once the whole run is done, in dataset order.
- A progress bar is drawn on stderr when it is a terminal, never otherwise.
"""

from __future__ import annotations

import inspect
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TextIO

import anyio
import attrs

from helikon.config import RunConfig
from helikon.context import RunContext
from helikon.effects import Effect, EffectResult
from helikon.errors import ConfigError
from helikon.evals._dataset import EvalCase, EvalDataset
from helikon.evals._progress import Progress
from helikon.evals._report import EvalReport
from helikon.evals._results import FAILING, CaseResult, Divergence
from helikon.evals._scores import CaseOutcome, CaseScore, Evaluator, Score
from helikon.events import AgentEvent
from helikon.ids import CallId, RunId
from helikon.interpreters import (
    Interpreter,
    LiveInterpreter,
    RecordingInterpreter,
    ReplayDivergence,
    ReplayInterpreter,
    RunEnv,
)
from helikon.items import AgentInput, ToolCall
from helikon.sessions import SessionRecorder, now_ms
from helikon.trace import Trace


class TraceSink(Protocol):
    """Records a finished run (called once, after the last case, off the event loop)."""

    def record(self, report: EvalReport) -> None: ...


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ConfigError(f"EvalRun.{attribute.name} must be at least 1, got {value}")


def _unique_names(_: object, __: object, evaluators: tuple[Evaluator, ...]) -> None:
    names = [e.name for e in evaluators]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two evaluators are named {name!r}; give one another name")


@attrs.frozen
class EvalRun:
    """A dataset, an agent and evaluators: :meth:`run` it for an :class:`EvalReport`.

    Args:
        dataset: the cases.
        evaluators: the evaluators, run in this order on each completed case.
        agent_factory: ``case -> agent`` (may be async): a fresh agent per
            case. Use it whenever the model is scripted.
        agent: one agent shared by every case, instead of ``agent_factory``
            (for stateless agents only).
        ctx_factory: ``case -> RunContext``; a fresh ephemeral context by default.
        concurrency: how many cases run at once (default 1).
        interpreter: ``case -> interpreter`` performing each case's effects;
            a :class:`~helikon.interpreters.LiveInterpreter` by default.
        config: overrides the agents' run config.
        sinks: trace sinks that record the finished report.
        run_id: the run's id; a random ``eval-...`` id by default.
        name: a label for the report.
        progress: draw a progress bar when ``progress_stream`` (stderr by
            default) is a terminal; never drawn on anything else.
        clock: milliseconds since the epoch, for timestamps.
    """

    dataset: EvalDataset
    evaluators: tuple[Evaluator, ...] = attrs.field(default=(), converter=tuple, validator=_unique_names)
    agent_factory: Callable[[EvalCase], Any] | None = None
    agent: Any = None
    ctx_factory: Callable[[EvalCase], RunContext[Any]] | None = None
    concurrency: int = attrs.field(default=1, validator=_positive)
    interpreter: Callable[[EvalCase], Interpreter] | None = None
    config: RunConfig | None = None
    sinks: tuple[TraceSink, ...] = attrs.field(default=(), converter=tuple)
    run_id: str | None = None
    name: str = ""
    progress: bool = True
    progress_stream: TextIO | None = attrs.field(default=None, eq=False)
    clock: Callable[[], int] = attrs.field(default=now_ms, eq=False)

    async def run(self) -> EvalReport:
        """Run every case and score it.

        Raises:
            ConfigError: neither ``agent_factory`` nor ``agent`` was given.
        """
        self._need_agent("run")
        return await self._execute("run", None, self._run_case)

    async def rescore(self, saved: EvalReport | str | os.PathLike[str]) -> EvalReport:
        """Score a saved run again with this run's evaluators and dataset (no agent, no model).

        ``saved`` is a report or a directory :meth:`EvalReport.save` wrote.
        Each dataset case is matched to the saved case of the same id; its
        outcome comes from the saved trace. A dataset case the saved run
        does not have is an error case.
        """
        report = saved if isinstance(saved, EvalReport) else EvalReport.load(saved)
        by_id = {c.case.id: c for c in report.cases}

        async def work(run_id: str, index: int, case: EvalCase) -> CaseResult:
            old = by_id.get(case.id)
            if old is None:
                return CaseResult(index, case, error=f"the saved run {report.run_id} has no case {case.id!r}")
            if old.trace is not None:
                outcome = CaseOutcome.from_events(old.trace.events, old.error)
            else:
                calls = tuple(
                    ToolCall(CallId(f"saved-{n}"), name, "{}") for n, name in enumerate(old.tool_calls)
                )
                outcome = CaseOutcome(old.final_output, calls, old.error, old.usage)
            scores = await self._score(case, outcome) if outcome.error is None else ()
            return attrs.evolve(
                old, index=index, case=case, scores=scores, error=outcome.error, divergence=None
            )

        return await self._execute("rescore", report.run_id, work)

    async def replay(self, saved: EvalReport | str | os.PathLike[str], *, strict: bool = True) -> EvalReport:
        """Replay each saved case's trace against this run's agent, then score it.

        A case whose run asks for something other than its recording (a
        changed model request, tool call, definition or event) is reported
        as diverged, with the step and the differing fields; the others are
        scored as :meth:`run` would. ``strict=False`` compares only effect
        kinds, tool names and arguments (see
        :class:`~helikon.interpreters.ReplayInterpreter`).
        """
        self._need_agent("replay")
        report = saved if isinstance(saved, EvalReport) else EvalReport.load(saved)
        by_id = {c.case.id: c for c in report.cases}

        async def work(run_id: str, index: int, case: EvalCase) -> CaseResult:
            old = by_id.get(case.id)
            if old is None or old.trace is None:
                problem = "no such case" if old is None else "no trace"
                return CaseResult(
                    index, case, error=f"the saved run {report.run_id} has {problem} for {case.id!r}"
                )
            trace = old.trace
            return await self._case(index, case, lambda _: ReplayInterpreter(trace, strict=strict), trace)

        return await self._execute("replay", report.run_id, work)

    def run_sync(self) -> EvalReport:
        """:meth:`run` from synchronous code (under trio)."""
        import trio

        return trio.run(self.run)

    def rescore_sync(self, saved: EvalReport | str | os.PathLike[str]) -> EvalReport:
        """:meth:`rescore` from synchronous code (under trio)."""
        import trio

        return trio.run(self.rescore, saved)

    def replay_sync(self, saved: EvalReport | str | os.PathLike[str], *, strict: bool = True) -> EvalReport:
        """:meth:`replay` from synchronous code (under trio)."""
        import trio

        async def main() -> EvalReport:
            return await self.replay(saved, strict=strict)

        return trio.run(main)

    # -- the engine ------------------------------------------------------------

    def _need_agent(self, what: str) -> None:
        if (self.agent_factory is None) == (self.agent is None):
            raise ConfigError(f"EvalRun.{what} needs exactly one of agent_factory= and agent=")

    async def _execute(
        self,
        mode: str,
        source_run: str | None,
        work: Callable[[str, int, EvalCase], Awaitable[CaseResult]],
    ) -> EvalReport:
        run_id = self.run_id or f"eval-{uuid.uuid4().hex[:12]}"
        started, clock = self.clock(), time.perf_counter()
        cases = self.dataset.cases
        results: list[CaseResult | None] = [None] * len(cases)
        progress = Progress.open(self.progress, self.progress_stream, len(cases))
        next_index = 0

        async def worker() -> None:
            # A fixed pool pulling the next index: at most ``concurrency``
            # cases in flight, and no task per case waiting on a limiter.
            nonlocal next_index
            while next_index < len(cases):
                index = next_index
                next_index += 1
                case_started, case_clock = self.clock(), time.perf_counter()
                result = await work(run_id, index, cases[index])
                if result.started_at == 0:
                    result = attrs.evolve(result, started_at=case_started)
                result = attrs.evolve(result, duration_ms=(time.perf_counter() - case_clock) * 1000)
                results[index] = result
                if progress is not None:
                    progress.advance(result.status in FAILING)

        try:
            async with anyio.create_task_group() as group:
                for _ in range(min(self.concurrency, len(cases))):
                    group.start_soon(worker)
        finally:
            if progress is not None:
                progress.close()
        done = tuple(r for r in results if r is not None)
        report = EvalReport(
            run_id=run_id,
            evaluators=tuple(e.name for e in self.evaluators),
            cases=done,
            name=self.name,
            mode=mode,
            source_run=source_run,
            started_at=started,
            duration_ms=(time.perf_counter() - clock) * 1000,
        )
        for sink in self.sinks:
            await anyio.to_thread.run_sync(sink.record, report)
        return report

    async def _run_case(self, run_id: str, index: int, case: EvalCase) -> CaseResult:
        chosen = self.interpreter
        case_run_id = f"{run_id}:{case.id}"

        def interpreter(c: EvalCase) -> Interpreter:
            inner = chosen(c) if chosen is not None else LiveInterpreter(case_run_id)
            return RecordingInterpreter(_WithRunId(inner, case_run_id))

        return await self._case(index, case, interpreter, None)

    async def _case(
        self,
        index: int,
        case: EvalCase,
        make_interpreter: Callable[[EvalCase], Interpreter],
        recording: Trace | None,
    ) -> CaseResult:
        """Run one case with the interpreter ``make_interpreter`` builds, then score it.

        With ``recording`` (a replay), a divergence is reported and the
        case's trace stays the recording; otherwise the trace is what the
        (recording) interpreter wrote.
        """
        started = self.clock()
        sessions = SessionRecorder(AgentInput.from_user_text(case.input).items, clock=self.clock)
        try:
            agent = self.agent if self.agent is not None else self.agent_factory(case)  # type: ignore[misc]
            if inspect.isawaitable(agent):
                agent = await agent
            ctx = self.ctx_factory(case) if self.ctx_factory is not None else RunContext.ephemeral(None)
            interpreter = make_interpreter(case)
        except Exception as exc:
            return CaseResult(
                index,
                case,
                error=f"could not set up the case: {type(exc).__name__}: {exc}",
                started_at=started,
            )
        events: list[AgentEvent] = []
        raised: Exception | None = None
        try:
            async for event in agent.run(ctx, case.input, config=self.config, interpreter=interpreter):
                events.append(event)
                sessions.observe(event)
        except Exception as exc:  # the run raised: a divergence, or a bug in an interpreter or agent
            raised = exc
        trace = recording if recording is not None else _trace_of(interpreter)
        if isinstance(raised, ReplayDivergence):
            # What the run did up to the divergence, for the report; nothing is scored.
            partial = CaseOutcome.from_events(events, "diverged")
            return CaseResult(
                index,
                case,
                final_output=partial.final_output,
                tool_calls=partial.tool_names,
                divergence=_divergence(raised),
                usage=partial.usage,
                run_id=_run_id(trace),
                started_at=started,
                events=sessions.drain(),
                trace=trace,
            )
        error = None if raised is None else f"{type(raised).__name__}: {raised}"
        outcome = CaseOutcome.from_events(events, error)
        scores = await self._score(case, outcome) if outcome.error is None else ()
        return CaseResult(
            index,
            case,
            final_output=outcome.final_output,
            tool_calls=outcome.tool_names,
            scores=scores,
            error=outcome.error,
            usage=outcome.usage,
            run_id=_run_id(trace),
            started_at=started,
            events=sessions.drain(),
            trace=trace,
        )

    async def _score(self, case: EvalCase, outcome: CaseOutcome) -> tuple[CaseScore, ...]:
        scores: list[CaseScore] = []
        for evaluator in self.evaluators:
            try:
                score = await evaluator.evaluate(case, outcome)
            except Exception as exc:
                score = Score.failed(reason=f"the evaluator raised {type(exc).__name__}: {exc}")
            if not isinstance(score, Score):
                score = Score.failed(reason=f"the evaluator returned {type(score).__name__}, not a Score")
            scores.append(CaseScore(evaluator.name, score))
        return tuple(scores)


class _WithRunId:
    """``inner``, with every run it starts given the id ``run_id`` (so ids do not depend on scheduling)."""

    def __init__(self, inner: Interpreter, run_id: str) -> None:
        self.inner = inner
        self.run_id = run_id
        observe = getattr(inner, "observe", None)
        if observe is not None:
            self.observe = observe
        perform_part = getattr(inner, "perform_part", None)
        if perform_part is not None:  # waves performed part by part, as ``inner`` does
            self.perform_part = perform_part

    def new_run_id(self) -> RunId:
        self.inner.new_run_id()
        return RunId(self.run_id)

    def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        return self.inner.perform(effect, env)


def _trace_of(interpreter: Interpreter) -> Trace | None:
    if isinstance(interpreter, RecordingInterpreter):
        try:
            return interpreter.trace
        except Exception:  # nothing recorded: the run failed before its first step
            return None
    return None


def _run_id(trace: Trace | None) -> str:
    return trace.header.run_id if trace is not None else ""


def _divergence(exc: ReplayDivergence) -> Divergence:
    first = str(exc).splitlines()[0] if str(exc) else "replay diverged"
    headline = (
        first.split(": ", 1)[1] if first.startswith("replay diverged at step") and ": " in first else first
    )
    return Divergence(exc.step, headline, tuple(exc.differences), str(exc))


__all__ = ["EvalRun", "TraceSink"]
