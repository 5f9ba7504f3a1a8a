"""``EvalRun``: a fresh agent per case, dataset order whatever the concurrency, errors, traces, progress."""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs
import pytest
import trio
from evals_support import agent_for, dataset, scripts

from helikon import LlmAgent, RunContext, collect
from helikon.effects import Effect, EffectResult
from helikon.errors import ConfigError
from helikon.evals import (
    CaseOutcome,
    CaseStatus,
    EvalCase,
    EvalDataset,
    EvalReport,
    EvalRun,
    ExactMatch,
    Score,
    ScriptFile,
    ToolUseTrajectory,
)
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter, ReplayInterpreter, RunEnv
from helikon.sessions._events import event_tag
from helikon.testing import MockModel, Pause, say

EVALUATORS = (ExactMatch(), ToolUseTrajectory.exact())


def run(evals: EvalRun) -> EvalReport:
    return trio.run(evals.run)


@attrs.frozen
class Spy:
    """An evaluator that notes the order cases reach it and always passes."""

    seen: list[str] = attrs.field(factory=list)
    name: str = "spy"

    async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
        self.seen.append(case.id)
        return Score.passed(reason=outcome.final_output)


def test_a_run_scores_every_case_in_dataset_order() -> None:
    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="r"))
    assert [c.case.id for c in report.cases] == ["shipped", "greeting", "wrong-answer", "json", "case-6"]
    statuses = {c.case.id: c.status for c in report.cases}
    assert statuses == {
        "shipped": CaseStatus.PASSED,
        "greeting": CaseStatus.PASSED,
        "wrong-answer": CaseStatus.FAILED,
        "json": CaseStatus.PASSED,
        "case-6": CaseStatus.SKIPPED,
    }
    shipped = report.case("shipped")
    assert shipped.final_output == "Order A1 has shipped." and shipped.tool_calls == ("lookup_order",)
    assert shipped.run_id == "r:shipped" and shipped.index == 0
    assert report.evaluators == ("exact_match", "tool_trajectory") and report.mode == "run"
    assert not report.passed()


def slow_scripts() -> ScriptFile:
    """The support scripts, with the first cases' first turn paused longest (they finish last)."""
    base = scripts()
    cases = []
    for n, case in enumerate(dataset()):
        first, *rest = base.scripts_for(case.id)
        cases.append((case.id, ((Pause(0.05 * (5 - n)), *first), *rest)))
    return ScriptFile(base.default, tuple(cases))


def test_results_come_back_in_dataset_order_whatever_order_cases_finish_in() -> None:
    spy = Spy()
    file = slow_scripts()
    report = run(EvalRun(dataset(), [spy], agent_factory=lambda c: agent_for(c, file), concurrency=5))
    assert spy.seen != [c.id for c in dataset()]  # they did finish out of order...
    assert [c.case.id for c in report.cases] == [c.id for c in dataset()]  # ...and came back in order
    assert [c.index for c in report.cases] == [0, 1, 2, 3, 4]


def test_concurrency_4_gives_the_same_report_as_1() -> None:
    file = slow_scripts()
    reports = [
        run(
            EvalRun(
                dataset(),
                EVALUATORS,
                agent_factory=lambda c: agent_for(c, file),
                concurrency=n,
                run_id="same",
            )
        )
        for n in (1, 4)
    ]
    one, four = (r.without_timings() for r in reports)
    assert one == four
    assert one.to_dict() == four.to_dict()
    assert one.render_table() == four.render_table()
    for a, b in zip(one.cases, four.cases, strict=True):
        assert a.trace is not None and b.trace is not None
        assert a.trace.to_bytes() == b.trace.to_bytes()


def test_the_report_is_the_same_under_asyncio() -> None:
    evals = EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, concurrency=3, run_id="same")
    under_trio = run(evals).without_timings()
    under_asyncio = anyio.run(evals.run, backend="asyncio").without_timings()
    assert under_trio.to_dict() == under_asyncio.to_dict()


def test_each_case_gets_its_own_agent_context_and_interpreter() -> None:
    built: list[str] = []
    contexts: list[str] = []
    interpreters: list[str] = []

    async def agent_factory(case: EvalCase) -> LlmAgent[None]:  # an async factory works too
        built.append(case.id)
        return agent_for(case)

    def ctx_factory(case: EvalCase) -> RunContext[str]:
        contexts.append(case.id)
        return RunContext.ephemeral(f"user of {case.id}")

    def interpreter(case: EvalCase) -> LiveInterpreter:
        interpreters.append(case.id)
        return LiveInterpreter()

    evals = EvalRun(
        dataset(), EVALUATORS, agent_factory=agent_factory, ctx_factory=ctx_factory, interpreter=interpreter
    )
    report = run(evals)
    ids = [c.id for c in dataset()]
    assert built == contexts == interpreters == ids
    assert report.case("shipped").status is CaseStatus.PASSED


class CountingInterpreter:
    """A user's interpreter: the live one, counting what it performs."""

    def __init__(self) -> None:
        self.inner = LiveInterpreter()
        self.performed: list[str] = []

    def new_run_id(self) -> RunId:
        return RunId("ignored")

    async def perform(self, effect: Effect, env: RunEnv) -> AsyncIterator[AgentEvent | EffectResult]:
        self.performed.append(type(effect).__name__)
        async for item in self.inner.perform(effect, env):
            yield item


def test_the_chosen_interpreter_performs_and_the_run_is_still_recorded() -> None:
    chosen: dict[str, CountingInterpreter] = {}

    def interpreter(case: EvalCase) -> CountingInterpreter:
        chosen[case.id] = CountingInterpreter()
        return chosen[case.id]

    report = run(
        EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, interpreter=interpreter, run_id="mine")
    )
    assert chosen["shipped"].performed == ["CallModel", "ExecuteTools", "CallModel"]
    shipped = report.case("shipped")
    assert shipped.trace is not None and len(shipped.trace.steps) == 3
    assert shipped.trace.header.run_id == "mine:shipped"  # ids come from the eval run, not the interpreter


def test_every_case_is_recorded_as_a_trace_that_replays() -> None:
    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="t"))
    for result in report.cases:
        trace = result.trace
        assert trace is not None and trace.header.agent == "support"

        async def replay(case: EvalCase = result.case, recorded: Any = trace) -> tuple[AgentEvent, ...]:
            agent = agent_for(case, ScriptFile())  # a model with no scripts: replay needs none
            out = await collect(agent.run(None, case.input, interpreter=ReplayInterpreter(recorded)))
            return out.events

        assert trio.run(replay) == trace.events


def test_each_case_is_also_kept_in_the_session_event_form() -> None:
    clock = iter(range(1000, 2000))
    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, clock=lambda: next(clock)))
    events = report.case("shipped").events
    assert [event_tag(e) for e in events] == [
        "user_message",
        "tool_called",
        "tool_returned",
        "assistant_message",
    ]
    assert events[-1].agent == "support"  # type: ignore[union-attr]
    assert all(1000 <= e.at < 2000 for e in events)


def test_a_failed_run_is_an_error_and_no_evaluator_scores_it() -> None:
    spy = Spy()
    file = ScriptFile.from_json('{"default": [[{"type": "error", "message": "model is down"}]]}')
    data = EvalDataset.from_cases([EvalCase("down", "hi", expected="hello")])
    report = run(EvalRun(data, [spy], agent_factory=lambda c: agent_for(c, file)))
    (case,) = report.cases
    assert case.status is CaseStatus.ERROR and case.scores == () and spy.seen == []
    assert case.error is not None and "model is down" in case.error
    assert case.trace is not None  # the failed run is recorded too
    assert not report.passed()


def test_running_out_of_scripts_is_an_error_not_a_loop() -> None:
    file = ScriptFile.from_json(
        '{"default": [{"call": [{"name": "lookup_order", "arguments": {"order": "A1"}}]}]}'
    )
    data = EvalDataset.from_cases([EvalCase("short", "where is A1?")])
    (case,) = run(EvalRun(data, EVALUATORS, agent_factory=lambda c: agent_for(c, file))).cases
    assert case.status is CaseStatus.ERROR and "no script left" in (case.error or "")


def test_a_factory_that_raises_is_an_error_case_and_the_others_run() -> None:
    def agent_factory(case: EvalCase) -> LlmAgent[None]:
        if case.id == "greeting":
            raise RuntimeError("no agent today")
        return agent_for(case)

    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_factory))
    greeting = report.case("greeting")
    assert greeting.status is CaseStatus.ERROR and greeting.trace is None
    assert greeting.error == "could not set up the case: RuntimeError: no agent today"
    assert report.case("shipped").status is CaseStatus.PASSED


def test_an_evaluator_that_raises_fails_the_case_with_its_message() -> None:
    @attrs.frozen
    class Broken:
        name: str = "broken"

        async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Score:
            raise ValueError("cannot read the answer")

    @attrs.frozen
    class NotAScore:
        name: str = "not_a_score"

        async def evaluate(self, case: EvalCase, outcome: CaseOutcome) -> Any:
            return 1.0

    report = run(EvalRun(dataset(), [Broken(), NotAScore()], agent_factory=agent_for))
    shipped = report.case("shipped")
    assert shipped.status is CaseStatus.FAILED
    broken, not_a_score = (s.score for s in shipped.scores)
    assert broken.reason == "the evaluator raised ValueError: cannot read the answer"
    assert not_a_score.reason == "the evaluator returned float, not a Score"


def test_a_shared_agent_for_stateless_cases() -> None:
    class Parrot:
        """A stateless model: answers every call with the same text."""

        model_id, provider = "parrot", "test"
        capabilities = MockModel().capabilities

        def invoke(self, request: Any, cancel: Any) -> Any:
            return MockModel([say("Hi! How can I help?")]).invoke(request, cancel)

    agent = LlmAgent(name="parrot", model=Parrot())
    report = run(EvalRun(dataset(), [ExactMatch()], agent=agent, concurrency=3))
    assert report.case("greeting").status is CaseStatus.PASSED
    assert report.case("shipped").status is CaseStatus.FAILED


def test_misconfigured_runs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="exactly one of agent_factory= and agent="):
        run(EvalRun(dataset(), EVALUATORS))
    with pytest.raises(ConfigError, match="exactly one of agent_factory= and agent="):
        run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, agent=object()))
    with pytest.raises(ConfigError, match="two evaluators are named 'exact_match'"):
        EvalRun(dataset(), [ExactMatch(), ExactMatch()])
    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        EvalRun(dataset(), EVALUATORS, concurrency=0)


def test_sinks_record_the_finished_report_once() -> None:
    recorded: list[EvalReport] = []

    class Sink:
        def record(self, report: EvalReport) -> None:
            recorded.append(report)

    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, sinks=[Sink(), Sink()]))
    assert recorded == [report, report]


def test_an_empty_dataset_gives_an_empty_passing_report() -> None:
    report = run(EvalRun(EvalDataset(()), EVALUATORS, agent_factory=agent_for))
    assert report.cases == () and report.passed() and report.mean is None


# -- the progress bar --------------------------------------------------------------------


def read_all(leader: int) -> str:
    """Everything written to the terminal (a read returns one chunk at a time)."""
    os.set_blocking(leader, False)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EAGAIN: nothing more; EIO: the terminal was closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return b"".join(chunks).decode()


def test_a_progress_bar_is_drawn_on_a_terminal() -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, progress_stream=terminal))
    drawn = read_all(leader)
    assert "\reval [" in drawn
    assert "5/5  1 failing" in drawn and "0/5" in drawn


def test_no_progress_bar_when_not_a_terminal_or_turned_off() -> None:
    captured = io.StringIO()
    run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, progress_stream=captured))
    assert captured.getvalue() == ""
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, progress=False, progress_stream=terminal))
    os.set_blocking(leader, False)
    with pytest.raises(OSError):  # nothing to read: EAGAIN, or EIO once the terminal is closed
        os.read(leader, 65536)
    os.close(leader)


def test_a_priced_run_reports_each_cases_cost_and_the_total() -> None:
    from decimal import Decimal

    from helikon import ModelPrice, PriceTable
    from helikon.evals._table import render_table

    prices = PriceTable({"mock-model": ModelPrice(input="1", output="1")})
    report = run(
        EvalRun(
            dataset(),
            EVALUATORS,
            agent_factory=agent_for,
            ctx_factory=lambda case: RunContext.ephemeral(None).with_prices(prices),
            run_id="r",
        )
    )
    costs = [c.usage.cost for c in report.cases]
    priced = [c for c in report.cases if c.usage.cost is not None]
    assert priced, "the scripted cases spend estimated tokens at a known price"
    for case in priced:
        tokens = case.usage.input_tokens + case.usage.output_tokens
        assert case.usage.cost == Decimal(tokens) / 1_000_000
    assert report.usage.cost == sum((c.usage.cost or Decimal(0) for c in report.cases), Decimal(0))
    again = EvalReport.from_json(report.to_json())
    assert [c.usage.cost for c in again.cases] == costs
    assert again.to_dict()["summary"]["usage"]["cost"] == str(report.usage.cost)
    table = render_table(report)
    assert f"cost: ${report.usage.cost:f} in total" in table


def test_an_unpriced_run_shows_no_cost() -> None:
    from helikon.evals._table import render_table

    report = run(EvalRun(dataset(), EVALUATORS, agent_factory=agent_for, run_id="r"))
    assert report.usage.cost is None
    assert "cost" not in render_table(report)
