"""Handoffs: one agent hands the conversation to another, which finishes the run.

After the book's triage example: a ``triage`` agent that never answers
itself, with handoffs to a budgeting and an investing specialist. The
pure rules (slugs, the transfer tools, the first transfer call winning, the
handoff effect) are checked on the machine; the rest through the live
interpreter with scripted models, under trio and asyncio.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
import pytest
from returns.result import Failure

from helikon import (
    AgentEvent,
    AgentInput,
    AgentUpdated,
    ConfigError,
    HandoffItem,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunConfig,
    RunError,
    RunFailed,
    RunStarted,
    ToolOutputItem,
    Usage,
    collect,
    tool,
)
from helikon.effects import Handoff as HandoffEffect
from helikon.effects import HandoffCompleted, ModelResponded
from helikon.errors import MaxAgentDepthExceeded, ModelError, ModelFailed, OtherModelFailure, StepError
from helikon.events import TokenDelta, ToolCallItem, TurnStarted
from helikon.ids import CallId, RunId
from helikon.interpreters import LiveInterpreter
from helikon.items import AssistantMessage, TextPart, ToolCall, ToolResult, user_text
from helikon.loop import (
    AgentSpec,
    ApplyingHandoff,
    Done,
    Failed,
    HandoffSpec,
    handoff_slug,
    resume,
    start,
    transition,
)
from helikon.model import ModelRequest, ToolCallChunk, ToolDef
from helikon.testing import MockModel, ScriptItem, call_tools, say
from helikon.workflows import Handoff, ParallelAgent

BACKENDS = ["trio", "asyncio"]
QUESTION = "How should I start investing $5,000?"
TRANSFER = "transfer_to_investing_specialist"


def run_on(backend: str, fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn, backend=backend)


def specialist(name: str, *scripts: list[ScriptItem], **kw: Any) -> LlmAgent[None]:
    kw.setdefault("description", f"Answers {name} questions.")
    kw.setdefault("instructions", f"You are the {name}.")
    return LlmAgent(name=name, model=MockModel(scripts), **kw)


def triage(*scripts: list[ScriptItem], targets: tuple[LlmAgent[None], ...], **kw: Any) -> LlmAgent[None]:
    return LlmAgent(
        name="triage",
        model=MockModel(scripts),
        instructions="Route the question; never answer yourself.",
        handoffs=handoffs_to(*targets),
        **kw,
    )


def handoffs_to(*targets: Any) -> Any:
    # Typed ``Any``: mypy cannot solve LlmAgent's ``converter=tuple`` for a list argument.
    return [Handoff.to(t) for t in targets]


def requests_of(agent: LlmAgent[None]) -> list[ModelRequest]:
    model = agent.model
    assert isinstance(model, MockModel)
    return model.requests


# -- slugs and transfer tools ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("investing specialist", "transfer_to_investing_specialist"),  # the book's example
        ("Budgeting Specialist", "transfer_to_budgeting_specialist"),
        ("support-desk", "transfer_to_support_desk"),
        ("Q&A -- Desk!", "transfer_to_q_a_desk_"),
        ("agent42", "transfer_to_agent42"),
        ("  padded  ", "transfer_to__padded_"),
        ("café", "transfer_to_caf_"),
    ],
)
def test_the_slug_lowercases_and_collapses_non_alphanumeric_runs(name: str, slug: str) -> None:
    assert handoff_slug(name) == slug


def test_each_handoff_becomes_a_transfer_tool_described_by_its_target() -> None:
    @tool
    async def lookup(topic: str) -> str:
        """Look something up.

        Args:
            topic: what to look up.
        """
        return topic

    budgeting = specialist("budgeting specialist", description="Answers questions about monthly budgets.")
    nameless: LlmAgent[None] = LlmAgent(name="investing specialist", model=MockModel())
    agent = triage(targets=(budgeting, nameless), tools=[lookup])

    names = [t.name for t in agent.spec.model_tools]
    assert names == ["lookup", "transfer_to_budgeting_specialist", "transfer_to_investing_specialist"]
    transfer = agent.spec.model_tools[1]
    assert transfer == ToolDef(
        "transfer_to_budgeting_specialist",
        "Answers questions about monthly budgets.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    )
    # a target without a description still gets a usable one
    assert agent.spec.model_tools[2].description == "Transfer the conversation to investing specialist."


def test_two_handoffs_with_the_same_slug_are_rejected_at_construction() -> None:
    first = specialist("Budgeting Specialist")
    second = specialist("budgeting-specialist")

    with pytest.raises(ConfigError, match="both become the tool 'transfer_to_budgeting_specialist'"):
        triage(targets=(first, second))
    assert requests_of(first) == [] and requests_of(second) == []


def test_a_handoff_whose_slug_is_a_tool_name_is_rejected() -> None:
    @tool
    async def transfer_to_billing() -> str:
        """A tool that happens to look like a transfer."""
        return "?"

    with pytest.raises(ConfigError, match="transfer_to_billing"):
        triage(targets=(specialist("billing"),), tools=[transfer_to_billing])


# -- the pure rules --------------------------------------------------------------

SPEC = AgentSpec(
    "triage",
    handoffs=(
        HandoffSpec("transfer_to_budgeting", "budgeting", "Budgets."),
        HandoffSpec("transfer_to_investing", "investing", "Investing."),
    ),
)


def responded(*calls: tuple[str, str]) -> ModelResponded:
    """A model turn asking for ``(call_id, tool name)`` calls, with no arguments."""
    chunks = [ToolCallChunk(i, call_id, name, "{}") for i, (call_id, name) in enumerate(calls)]
    return ModelResponded((*chunks, Usage(30, 5)))


def test_a_transfer_call_hands_off_with_the_transcript_one_level_deeper() -> None:
    out = start(SPEC, AgentInput.from_user_text(QUESTION), RunId("r"), depth=2)

    nxt = transition(out.state, responded(("c1", "transfer_to_investing")), SPEC).unwrap()

    call = ToolCall(CallId("c1"), "transfer_to_investing", "{}")
    result = ToolResult(CallId("c1"), "transfer_to_investing", "Transferred to investing.")
    transcript = (user_text(QUESTION), call, result)
    assert nxt.effect == HandoffEffect("investing", transcript, depth=3)
    assert nxt.state.phase == ApplyingHandoff("investing", transcript)
    assert nxt.events == (
        ToolCallItem(call),
        ToolOutputItem(result),
        HandoffItem("triage", "investing"),
        AgentUpdated("investing"),
    )
    # the pending effect is a function of the state, so a saved run resumes into it
    assert resume(nxt.state, SPEC).unwrap().effect == nxt.effect


def test_the_first_transfer_call_of_a_turn_wins_and_the_others_are_not_run() -> None:
    out = start(SPEC, AgentInput.from_user_text(QUESTION), RunId("r"))
    reply = responded(("c1", "lookup"), ("c2", "transfer_to_budgeting"), ("c3", "transfer_to_investing"))

    nxt = transition(out.state, reply, SPEC).unwrap()

    outputs = [e.item for e in nxt.events if isinstance(e, ToolOutputItem)]
    assert [(r.call_id, r.is_error) for r in outputs] == [("c1", True), ("c2", False), ("c3", True)]
    assert outputs[0].content == "Not run: the conversation was handed off to budgeting."
    assert isinstance(nxt.effect, HandoffEffect) and nxt.effect.target == "budgeting"
    assert [e for e in nxt.events if isinstance(e, HandoffItem)] == [HandoffItem("triage", "budgeting")]


def test_the_targets_end_ends_the_run_with_usage_summed() -> None:
    out = start(SPEC, AgentInput.from_user_text(QUESTION), RunId("r"))
    handing = transition(out.state, responded(("c1", "transfer_to_investing")), SPEC).unwrap()

    done = transition(handing.state, HandoffCompleted("Buy an index fund.", Usage(12, 7)), SPEC).unwrap()
    assert done.events == (RunCompleted(Usage(42, 12)),)
    assert done.state.phase == Done("Buy an index fund.")

    error = ModelFailed(OtherModelFailure("down"))
    broken = transition(handing.state, HandoffCompleted("", Usage(2, 0), error), SPEC).unwrap()
    assert broken.events == (RunFailed(error, Usage(32, 5)),)
    assert broken.state.phase == Failed(error)


def test_a_handoff_result_outside_a_handoff_is_a_step_error() -> None:
    out = start(SPEC, AgentInput.from_user_text(QUESTION), RunId("r"))

    result = transition(out.state, HandoffCompleted("x", Usage()), SPEC)

    assert isinstance(result, Failure) and isinstance(result.failure(), StepError)


# -- live runs -------------------------------------------------------------------


def book_triage() -> tuple[LlmAgent[None], LlmAgent[None], LlmAgent[None]]:
    budgeting = specialist("budgeting specialist", say("Cook at home."))
    investing = specialist("investing specialist", say("Start with a broad index fund.", usage=Usage(12, 7)))
    router = triage(
        call_tools(("call_1", "transfer_to_investing_specialist", {}), usage=Usage(30, 5)),
        targets=(budgeting, investing),
    )
    return router, budgeting, investing


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_handoff_emits_handoff_item_then_agent_updated_then_the_targets_events(backend: str) -> None:
    router, budgeting, _ = book_triage()

    async def scenario() -> list[AgentEvent]:
        return [e async for e in router.run(None, QUESTION, interpreter=LiveInterpreter("run-1"))]

    events = run_on(backend, scenario)

    result = ToolResult(CallId("call_1"), TRANSFER, "Transferred to investing specialist.")
    handoff_at = events.index(HandoffItem("triage", "investing specialist"))
    assert events[handoff_at - 1] == ToolOutputItem(result)
    assert events[handoff_at + 1] == AgentUpdated("investing specialist")
    target_events = events[handoff_at + 2 :]
    where = ("investing specialist",)  # every target event names the path that emitted it
    assert target_events[0] == TurnStarted(1, path=where)  # the target's own RunStarted is not forwarded
    assert [type(e) for e in target_events[1:]] == [TokenDelta] * 6 + [MessageOutput, RunCompleted]
    answer = AssistantMessage((TextPart("Start with a broad index fund."),), "investing specialist")
    assert target_events[-2] == MessageOutput(answer, path=where)
    assert [e for e in events if isinstance(e, RunStarted)] == [RunStarted("triage", RunId("run-1"))]
    assert requests_of(budgeting) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_transcript_is_threaded_into_the_targets_first_model_request(backend: str) -> None:
    router, _, investing = book_triage()

    run_on(backend, lambda: collect(router.run(None, QUESTION)))

    (request,) = requests_of(investing)
    call = ToolCall(CallId("call_1"), TRANSFER, "{}")
    result = ToolResult(CallId("call_1"), TRANSFER, "Transferred to investing specialist.")
    # the target's own instructions, then the conversation so far (not triage's instructions)
    assert request.instructions == "You are the investing specialist."
    assert request.messages == (user_text(QUESTION), call, result)


def test_run_completed_usage_sums_the_parent_and_the_target() -> None:
    router, _, _ = book_triage()

    result = run_on("trio", lambda: collect(router.run(None, QUESTION)))

    assert result.final_output == "Start with a broad index fund."
    assert result.events[-1] == RunCompleted(Usage(42, 12))
    assert result.usage == Usage(42, 12)


def test_a_failing_target_fails_the_run_with_its_error_and_the_usage_so_far() -> None:
    investing = specialist("investing specialist", [ModelError.other("overloaded")])
    router = triage(call_tools((TRANSFER, {}), usage=Usage(30, 5)), targets=(investing,))

    with pytest.raises(RunError) as caught:
        run_on("trio", lambda: collect(router.run(None, QUESTION)))

    assert caught.value.error == ModelFailed(OtherModelFailure("overloaded"))
    assert caught.value.events[-1] == RunFailed(ModelFailed(OtherModelFailure("overloaded")), Usage(30, 5))


def test_only_the_first_transfer_runs_live_and_the_other_calls_never_execute() -> None:
    looked_up: list[str] = []

    @tool
    async def lookup(topic: str) -> str:
        """Look something up.

        Args:
            topic: what to look up.
        """
        looked_up.append(topic)
        return topic

    budgeting = specialist("budgeting", say("Budget answer."))
    investing = specialist("investing", say("Investing answer."))
    router = triage(
        call_tools(
            ("lookup", {"topic": "rates"}), ("transfer_to_investing", {}), ("transfer_to_budgeting", {})
        ),
        targets=(budgeting, investing),
        tools=[lookup],
    )

    result = run_on("trio", lambda: collect(router.run(None, QUESTION)))

    assert result.final_output == "Investing answer."
    assert looked_up == [] and requests_of(budgeting) == []
    errors = [e.item.is_error for e in result.events if isinstance(e, ToolOutputItem)]
    assert errors == [True, False, True]


def chain(length: int, config: RunConfig | None = None) -> LlmAgent[None]:
    """``a0 -> a1 -> ... -> a{length-1}``: each hands off to the next, the last answers."""
    config = config or RunConfig()
    agent = specialist(f"a{length - 1}", say("the end"), config=config)
    for index in reversed(range(length - 1)):
        transfer = call_tools((f"transfer_to_a{index + 1}", {}))
        agent = specialist(f"a{index}", transfer, handoffs=[Handoff.to(agent)], config=config)
    return agent


def test_a_chain_of_handoffs_within_max_agent_depth_completes() -> None:
    result = run_on("trio", lambda: collect(chain(3, RunConfig(max_agent_depth=2)).run(None, "go")))

    assert result.final_output == "the end"
    handoffs = [e for e in result.events if isinstance(e, HandoffItem)]
    assert [attrs.evolve(h, path=()) for h in handoffs] == [HandoffItem("a0", "a1"), HandoffItem("a1", "a2")]
    assert [h.path for h in handoffs] == [(), ("a1",)]  # each said by the member handing off


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chain_of_handoffs_deeper_than_max_agent_depth_fails(backend: str) -> None:
    with pytest.raises(RunError) as caught:
        run_on(backend, lambda: collect(chain(4, RunConfig(max_agent_depth=2)).run(None, "go")))

    assert caught.value.error == MaxAgentDepthExceeded(2)
    handoffs = [e for e in caught.value.events if isinstance(e, HandoffItem)]
    said = [attrs.evolve(h, path=()) for h in handoffs]
    assert said == [HandoffItem("a0", "a1"), HandoffItem("a1", "a2"), HandoffItem("a2", "a3")]


def test_the_default_depth_bound_of_eight_stops_a_long_chain() -> None:
    with pytest.raises(RunError) as caught:
        run_on("trio", lambda: collect(chain(11).run(None, "go")))

    assert caught.value.error == MaxAgentDepthExceeded(8)


def test_max_agent_depth_given_to_run_bounds_the_whole_chain() -> None:
    with pytest.raises(RunError) as caught:
        run_on("trio", lambda: collect(chain(4).run(None, "go", config=RunConfig(max_agent_depth=1))))

    assert caught.value.error == MaxAgentDepthExceeded(1)


def test_a_handoff_target_can_be_a_workflow_agent() -> None:
    lenses = (
        ParallelAgent("second opinions", "Two independent takes on the question.")
        .branch("bull", specialist("bull", say("Up.")))
        .branch("bear", specialist("bear", say("Down.")))
    )
    router: LlmAgent[None] = LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_second_opinions", {}))]),
        handoffs=handoffs_to(lenses),
    )

    result = run_on("trio", lambda: collect(router.run(None, "Where is the market going?")))

    assert result.final_output == '{"bear":"Down.","bull":"Up."}'
    assert router.spec.model_tools[0].description == "Two independent takes on the question."
