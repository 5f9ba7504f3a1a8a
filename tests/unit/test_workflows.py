"""The workflow agents, agent-as-tool and user-defined agents, run for real.

Each composite of :mod:`helikon.workflows` runs here through the live
interpreter with scripted models (:class:`MockModel`), checking the book's
promises for it: what runs, in which order, what ``state[key]`` holds, what
the final output is and how failures aggregate. Tests that depend on real
concurrency run under both trio and asyncio. The pure scheduling rules are
in ``test_workflow_machine.py``; handoffs in ``test_handoffs.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import anyio
import attrs
import pytest

from helikon import (
    Agent,
    AgentAsTool,
    AgentEvent,
    AgentInput,
    AgentUpdated,
    ConfigError,
    GraphAgent,
    HandoffItem,
    LlmAgent,
    LoopAgent,
    MessageOutput,
    ParallelAgent,
    PermissionMode,
    RunCompleted,
    RunConfig,
    RunContext,
    RunError,
    RunFailed,
    RunResult,
    RunStarted,
    SequentialAgent,
    SwarmAgent,
    ToolContext,
    ToolEffect,
    ToolOutputItem,
    ToolResult,
    Usage,
    collect,
    tool,
)
from helikon.context import HookRegistry, TracerHandle
from helikon.errors import (
    ChildFailure,
    ChildrenFailed,
    MaxAgentDepthExceeded,
    MaxHandoffsExceeded,
    MaxIterationsExceeded,
    ModelError,
    ModelFailed,
    OtherError,
    OtherModelFailure,
    TimedOut,
    describe,
)
from helikon.items import AssistantMessage, TextPart, text_of, user_text
from helikon.sessions import MemorySession
from helikon.testing import MockModel, Pause, ScriptItem, call_tools, say
from helikon.workflows import GraphBuildError, SwarmBuildError

BACKENDS = ["trio", "asyncio"]
BOOM = ModelFailed(OtherModelFailure("boom"))
A_SESSION: Any = MemorySession()


def run_on(backend: str, fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn, backend=backend)


def agent(name: str, *scripts: list[ScriptItem], **kw: Any) -> LlmAgent[Any]:
    """An LLM agent answering from ``scripts`` (one list of model events per call)."""
    kw.setdefault("description", f"The {name} agent.")
    return LlmAgent(name=name, model=MockModel(scripts), **kw)


def failing(name: str) -> LlmAgent[Any]:
    return agent(name, [ModelError.other("boom")])


def model_of(llm: LlmAgent[Any]) -> MockModel:
    assert isinstance(llm.model, MockModel)
    return llm.model


def run(
    workflow: Any, ctx: RunContext[Any] | None = None, text: str = "go", backend: str = "trio"
) -> RunResult[str]:
    return run_on(backend, lambda: collect(workflow.run(ctx, text)))  # type: ignore[no-any-return]


def failure(workflow: Any, ctx: RunContext[Any] | None = None, backend: str = "trio") -> RunError:
    with pytest.raises(RunError) as caught:
        run(workflow, ctx, backend=backend)
    return caught.value


def kinds(events: Iterable[object]) -> list[str]:
    return [type(e).__name__ for e in events]


def message(text: str, speaker: str) -> MessageOutput:
    return MessageOutput(AssistantMessage((TextPart(text),), speaker))


class Echo:
    """A user-defined agent: no model, no machine, just an async generator."""

    def __init__(self, name: str = "echo", usage: Usage | None = None) -> None:
        self.name = name
        self.description = "Repeats the last thing it was told."
        self.usage = usage or Usage(2, 1)
        self.seen: list[tuple[RunContext[Any], AgentInput]] = []

    async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
        self.seen.append((ctx, input))
        last = input.items[-1]
        text = text_of(last.content) if hasattr(last, "content") else ""  # type: ignore[arg-type]
        yield RunStarted(self.name, "own-run")  # type: ignore[arg-type]
        yield message(f"echo: {text}", self.name)
        yield RunCompleted(self.usage)


# -- sequential --------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequential_runs_steps_in_order_and_keeps_each_output_in_state(backend: str) -> None:
    research = agent("researcher", say("Rates are 4%.", usage=Usage(10, 3)))
    write = agent("writer", say("Brief: rates are 4%.", usage=Usage(20, 5)))
    pipeline = SequentialAgent("research-then-write", "Research, then draft.").then(research).then(write)
    ctx = RunContext.ephemeral(None)

    result = run(pipeline, ctx, backend=backend)

    assert result.final_output == "Brief: rates are 4%."
    assert ctx.state.values == {"researcher": "Rates are 4%.", "writer": "Brief: rates are 4%."}
    assert result.usage == Usage(30, 8)
    # one outer RunStarted/RunCompleted; each step announced by AgentUpdated
    assert [e for e in result.events if isinstance(e, RunStarted | RunCompleted | AgentUpdated)] == [
        RunStarted("research-then-write", result.events[0].run_id),  # type: ignore[union-attr]
        AgentUpdated("researcher"),
        AgentUpdated("writer"),
        RunCompleted(Usage(30, 8)),
    ]
    # each step gets the workflow's input
    assert model_of(write).requests[0].messages == (user_text("go"),)


def test_sequential_fails_fast_on_the_first_failing_step() -> None:
    first, last = agent("first", say("ok")), agent("last", say("never"))
    pipeline = SequentialAgent("p", "").then(first).then(failing("middle")).then(last)
    ctx = RunContext.ephemeral(None)

    error = failure(pipeline, ctx)

    assert error.error == BOOM
    assert model_of(last).calls == 0
    assert ctx.state.values == {"first": "ok"}
    assert kinds(error.events).count("RunFailed") == 1


def test_dynamic_instructions_read_the_state_an_earlier_step_wrote() -> None:
    def brief_from_notes(ctx: RunContext[Any]) -> str:
        return f"Write a short brief from these notes:\n{ctx.state.get('researcher', '')}"

    writer = agent("writer", say("Brief."), instructions=brief_from_notes)
    pipeline = SequentialAgent("p", "").then(agent("researcher", say("Rates are 4%."))).then(writer)

    run(pipeline)

    (request,) = model_of(writer).requests
    assert request.instructions == "Write a short brief from these notes:\nRates are 4%."


def test_then_keyed_lets_two_steps_share_a_name() -> None:
    pipeline = (
        SequentialAgent("two-drafts", "")
        .then_keyed("first_draft", agent("drafter", say("v1")))
        .then_keyed("second_draft", agent("drafter", say("v2")))
    )
    ctx = RunContext.ephemeral(None)

    run(pipeline, ctx)

    assert ctx.state.values == {"first_draft": "v1", "second_draft": "v2"}


def test_duplicate_step_keys_are_rejected_when_building() -> None:
    drafter = agent("drafter", say("v1"))
    with pytest.raises(ConfigError, match="already has a child keyed 'drafter'"):
        SequentialAgent("p", "").then(drafter).then(agent("drafter"))
    with pytest.raises(ConfigError, match="already has a child keyed 'k'"):
        SequentialAgent("p", "").then_keyed("k", drafter).then_keyed("k", agent("other"))
    with pytest.raises(ConfigError, match="non-empty string"):
        SequentialAgent("p", "").then_keyed("", drafter)
    with pytest.raises(ConfigError, match="not an agent"):
        SequentialAgent("p", "").then_keyed("x", object())


def test_builder_methods_return_new_values() -> None:
    base = SequentialAgent("p", "")
    one = base.then(agent("a"))

    assert base.children == () and [k for k, _ in one.children] == ["a"]
    assert one.then(agent("b")) is not one and len(one.children) == 1


def test_a_workflow_without_sub_agents_cannot_run() -> None:
    with pytest.raises(ConfigError, match="has no sub-agents"):
        SequentialAgent("empty", "").run(None, "go")


def test_an_empty_workflow_nested_in_another_fails_the_run_instead_of_crashing() -> None:
    pipeline = SequentialAgent("outer", "").then(SequentialAgent("inner", ""))

    error = failure(pipeline)

    assert error.error == OtherError("workflow 'inner' has no sub-agents")


# -- parallel ----------------------------------------------------------------------


def test_parallel_output_is_a_sorted_key_json_object_and_each_branch_is_in_state() -> None:
    fan_out = (
        ParallelAgent("multi-lens", "Three independent takes.")
        .branch("optimist", agent("o", say("Up.", usage=Usage(1, 1))))
        .branch("pessimist", agent("p", say("Down.", usage=Usage(2, 2))))
        .branch("realist", agent("r", say("Sideways.", usage=Usage(3, 3))))
    )
    ctx = RunContext.ephemeral(None)

    result = run(fan_out, ctx)

    assert result.final_output == '{"optimist":"Up.","pessimist":"Down.","realist":"Sideways."}'
    assert result.events[-2] == message(result.final_output, "multi-lens")
    assert result.usage == Usage(6, 6)
    assert ctx.state.values == {"optimist": "Up.", "pessimist": "Down.", "realist": "Sideways."}


def test_parallel_keys_are_sorted_not_declared_order() -> None:
    fan_out = ParallelAgent("p", "").branch("zeta", agent("z", say("Z"))).add(agent("alpha", say("A")))

    result = run(fan_out)

    assert result.final_output == '{"alpha":"A","zeta":"Z"}'
    assert list(json.loads(result.final_output)) == ["alpha", "zeta"]


def test_parallel_failure_is_collect_all_with_one_aggregate_run_failed() -> None:
    left, right = agent("left", say("L")), agent("right", say("R"))
    fan_out = ParallelAgent("p", "").add(left).add(failing("middle")).add(right)
    ctx = RunContext.ephemeral(None)

    error = failure(fan_out, ctx)

    assert error.error == ChildrenFailed((ChildFailure("middle", BOOM),), ())
    assert model_of(left).calls == 1 and model_of(right).calls == 1  # siblings finished
    assert ctx.state.values == {"left": "L", "right": "R"}
    assert kinds(error.events).count("RunFailed") == 1 and isinstance(error.events[-1], RunFailed)


def test_duplicate_branch_keys_are_rejected_before_any_branch_starts() -> None:
    first, second = agent("a", say("A")), agent("b", say("B"))

    with pytest.raises(ConfigError, match="already has a child keyed 'k'"):
        ParallelAgent("p", "").branch("k", first).branch("k", second)
    with pytest.raises(ConfigError, match="already has a child keyed 'a'"):
        ParallelAgent("p", "").add(first).add(first)
    assert model_of(first).calls == 0 and model_of(second).calls == 0


class Rendezvous:
    """A user-defined agent that finishes only once ``count`` of them have started."""

    def __init__(self, name: str, started: list[str], count: int, everyone_in: anyio.Event) -> None:
        self.name, self.description = name, "waits for the others"
        self.started, self.count, self.everyone_in = started, count, everyone_in

    async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
        self.started.append(self.name)
        if len(self.started) == self.count:
            self.everyone_in.set()
        with anyio.fail_after(5):
            await self.everyone_in.wait()
        yield message(self.name, self.name)
        yield RunCompleted(Usage())


@pytest.mark.parametrize("backend", BACKENDS)
def test_parallel_branches_run_concurrently(backend: str) -> None:
    async def scenario() -> RunResult[str]:
        started: list[str] = []
        everyone_in = anyio.Event()
        fan_out = ParallelAgent("p", "")
        for name in ("a", "b", "c"):
            fan_out = fan_out.add(Rendezvous(name, started, 3, everyone_in))
        return await collect(fan_out.run(None, "go"))

    # run one at a time, the first branch would wait forever (fail_after ends it)
    assert run_on(backend, scenario).final_output == '{"a":"a","b":"b","c":"c"}'


@pytest.mark.parametrize("backend", BACKENDS)
def test_parallel_branches_move_on_at_their_own_pace(backend: str) -> None:
    def fan_out(slow_first: bool) -> ParallelAgent:
        slow = agent("slow", [Pause(0.05), *say("slow answer")])
        fast = agent("fast", say("fast answer"))
        return (
            ParallelAgent("p", "").add(slow).add(fast)
            if slow_first
            else ParallelAgent("p", "").add(fast).add(slow)
        )

    events = run(fan_out(slow_first=True), backend=backend).events
    updated = [e for e in events if isinstance(e, AgentUpdated | MessageOutput)]

    # The branches are sub-machines, each moving on as soon as its own step
    # is answered (waves are not lock-step): "fast" answers while "slow" still
    # waits; the parallel's output joins them in declaration order all the same.
    assert updated == [
        AgentUpdated("slow"),
        AgentUpdated("fast"),
        attrs.evolve(message("fast answer", "fast"), path=("fast",)),
        attrs.evolve(message("slow answer", "slow"), path=("slow",)),
        message('{"fast":"fast answer","slow":"slow answer"}', "p"),
    ]
    again = run(fan_out(slow_first=False), backend=backend)
    assert again.final_output == '{"fast":"fast answer","slow":"slow answer"}'


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_single_child_streams_its_events_live(backend: str) -> None:
    proceed = anyio.Event()

    class Talker:
        name, description = "talker", "says something, then waits"

        async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
            yield message("first", "talker")
            with anyio.fail_after(5):
                await proceed.wait()  # only set once "first" reached the consumer
            yield message("second", "talker")
            yield RunCompleted(Usage())

    async def scenario() -> list[str]:
        seen: list[str] = []
        async for event in SequentialAgent("p", "").then(Talker()).run(None, "go"):
            if isinstance(event, MessageOutput):
                seen.append(text_of(event.item.content))
                proceed.set()
        return seen

    assert run_on(backend, scenario) == ["first", "second"]


# -- loop --------------------------------------------------------------------------


@tool
async def approve(ctx: ToolContext[Any]) -> str:
    """Approve the draft: no more iterations."""
    ctx.actions.escalate()
    return "approved"


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_escalation_from_a_tool_stops_after_that_sub_agent(backend: str) -> None:
    drafter = agent("drafter", say("draft 1"), say("draft 2"), say("draft 3"))
    critic = agent(
        "critic", say("Too long."), call_tools(("approve", {})), say("Looks good."), tools=[approve]
    )
    polisher = agent("polisher", say("polished 1"), say("polished 2"))
    refine = LoopAgent("draft-and-critique", "Iterate until the critic is satisfied.", max_iterations=5)
    refine = refine.then(drafter).then(critic).then(polisher)
    ctx = RunContext.ephemeral(None)

    result = run(refine, ctx, backend=backend)

    assert result.final_output == "Looks good."
    assert model_of(drafter).calls == 2 and model_of(critic).calls == 3
    assert model_of(polisher).calls == 1  # the second pass stops after the critic
    assert ctx.state.values == {"drafter": "draft 2", "critic": "Looks good.", "polisher": "polished 1"}


def test_loop_exhaustion_fails_with_max_iterations_exceeded_after_exactly_that_many_passes() -> None:
    drafter = agent("drafter", *[say(f"draft {i}") for i in range(10)])
    critic = agent("critic", *[say("Not yet.") for _ in range(10)])
    refine = LoopAgent("refine", "", max_iterations=3).then(drafter).then(critic)

    error = failure(refine)

    assert error.error == MaxIterationsExceeded(3)
    assert model_of(drafter).calls == 3 and model_of(critic).calls == 3


def test_loop_needs_at_least_one_iteration() -> None:
    with pytest.raises(ConfigError, match="max_iterations must be >= 1"):
        LoopAgent("refine", "", max_iterations=0)


def test_loop_then_keyed_keeps_both_steps() -> None:
    refine = (
        LoopAgent("l", "", max_iterations=1).then_keyed("x", agent("a", say("1"))).then(agent("a", say("2")))
    )
    ctx = RunContext.ephemeral(None)

    with pytest.raises(RunError):
        run(refine, ctx)
    assert ctx.state.values == {"x": "1", "a": "2"}


# -- graph -------------------------------------------------------------------------


def finance_report(spending: Any, income: Any, summary: Any) -> GraphAgent:
    return (
        GraphAgent.builder()
        .name("finance_report")
        .description("Fans spending and income analysis into a combined summary.")
        .node("spending", spending)
        .node("income", income)
        .node("summary", summary)
        .edge("spending", "summary")
        .edge("income", "summary")
        .build()
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_successors_get_labelled_context_messages_and_a_single_sink_answers(backend: str) -> None:
    summary = agent("summary", say("You saved $900.", usage=Usage(5, 5)))
    graph = finance_report(
        agent("s", [Pause(0.02), *say("Spent $2,100.", usage=Usage(1, 1))]),
        agent("i", say("Earned $3,000.", usage=Usage(1, 1))),
        summary,
    )
    ctx = RunContext.ephemeral(None)

    result = run(graph, ctx, "Report on December.", backend=backend)

    assert result.final_output == "You saved $900."
    assert result.usage == Usage(7, 7)
    (request,) = model_of(summary).requests
    assert request.messages == (
        user_text("Report on December."),
        user_text("[spending]\nSpent $2,100."),
        user_text("[income]\nEarned $3,000."),
    )
    assert ctx.state.values == {
        "spending": "Spent $2,100.",
        "income": "Earned $3,000.",
        "summary": "You saved $900.",
    }


def test_graph_with_several_sinks_merges_them_into_a_json_object() -> None:
    graph = (
        GraphAgent.builder()
        .name("g")
        .node("data", agent("d", say("rows")))
        .node("prose", agent("p", say("P")))
        .node("charts", agent("c", say("C")))
        .edge("data", "prose")
        .edge("data", "charts")
        .build()
    )

    result = run(graph)

    assert result.final_output == '{"charts":"C","prose":"P"}'
    assert result.events[-2] == message('{"charts":"C","prose":"P"}', "g")


def test_graph_failed_node_skips_its_descendants_while_independent_branches_finish() -> None:
    after_failure, independent, after_independent = (
        agent("c", say("C")),
        agent("b", say("B")),
        agent("d", say("D")),
    )
    graph = (
        GraphAgent.builder()
        .name("g")
        .node("a", failing("a"))
        .node("b", independent)
        .node("c", after_failure)
        .node("d", after_independent)
        .node("e", agent("e", say("E")))
        .edge("a", "c")
        .edge("c", "e")
        .edge("b", "d")
        .build()
    )
    ctx = RunContext.ephemeral(None)

    error = failure(graph, ctx)

    assert error.error == ChildrenFailed((ChildFailure("a", BOOM),), ("c", "e"))
    assert describe(error.error) == "failed: a (model call failed: boom); skipped: c, e"
    assert model_of(after_failure).calls == 0
    assert ctx.state.values == {"b": "B", "d": "D"}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda b: b, "a graph needs a name"),
        (lambda b: b.name("g"), "the graph has no nodes"),
        (lambda b: b.name("g").node("a", agent("a")).node("a", agent("b")), "duplicate nodes: a"),
        (lambda b: b.name("g").node("a", agent("a")).edge("a", "ghost"), "unknown node 'ghost'"),
        (
            lambda b: b.name("g").node("a", agent("a")).node("b", agent("b")).edge("a", "b").edge("b", "a"),
            "cycle through: a, b",
        ),
    ],
    ids=["no name", "empty", "duplicate", "unknown", "cycle"],
)
def test_graph_build_errors(build: Callable[[Any], Any], message: str) -> None:
    with pytest.raises(GraphBuildError, match=message):
        build(GraphAgent.builder()).build()
    assert issubclass(GraphBuildError, ConfigError)


# -- swarm -------------------------------------------------------------------------


def finance_swarm(triage_script: list[list[ScriptItem]], **builder: Any) -> SwarmAgent:
    members = (
        agent("triage", *triage_script, description="Routes personal-finance questions."),
        agent("budgeting", say("Cook at home."), description="Budgets and spending."),
        agent("investing", say("Buy a broad index fund."), description="Investing and retirement."),
    )
    swarm = SwarmAgent.builder().name("support_swarm").description("A finance swarm.")
    for member in members:
        swarm = swarm.member(member)
    for method, value in builder.items():
        swarm = getattr(swarm, method)(value)
    return swarm.build()


def test_swarm_wires_a_transfer_tool_from_every_member_to_every_other() -> None:
    swarm = finance_swarm([say("hi")])

    tools = {name: [t.name for t in m.spec.model_tools] for name, m in swarm.members.items()}

    assert tools == {
        "triage": ["transfer_to_budgeting", "transfer_to_investing"],
        "budgeting": ["transfer_to_triage", "transfer_to_investing"],
        "investing": ["transfer_to_triage", "transfer_to_budgeting"],
    }
    assert swarm.members["triage"].spec.model_tools[1].description == "Investing and retirement."


@pytest.mark.parametrize("backend", BACKENDS)
def test_swarm_starts_at_the_first_member_and_ends_when_one_answers(backend: str) -> None:
    swarm = finance_swarm([call_tools(("transfer_to_investing", {}))])

    result = run(swarm, text="How do I start investing?", backend=backend)

    assert swarm.entry == "triage"
    assert result.final_output == "Buy a broad index fund."
    assert [e for e in result.events if isinstance(e, HandoffItem)] == [HandoffItem("triage", "investing")]


def test_swarm_entry_can_be_chosen() -> None:
    swarm = finance_swarm([say("never")], entry="budgeting")

    assert run(swarm).final_output == "Cook at home."


def test_swarm_max_handoffs_fails_a_ping_pong_with_max_handoffs_exceeded() -> None:
    ping = agent("ping", *[call_tools(("transfer_to_pong", {})) for _ in range(5)])
    pong = agent("pong", *[call_tools(("transfer_to_ping", {})) for _ in range(5)])
    swarm = SwarmAgent.builder().name("table").member(ping).member(pong).max_handoffs(3).build()

    error = failure(swarm)

    assert error.error == MaxHandoffsExceeded(3)
    assert kinds(error.events).count("HandoffItem") == 3  # the fourth is never emitted
    assert isinstance(error.events[-1], RunFailed)


def test_a_swarm_without_max_handoffs_is_bounded_by_max_agent_depth() -> None:
    ping = agent("ping", *[call_tools(("transfer_to_pong", {})) for _ in range(10)])
    pong = agent("pong", *[call_tools(("transfer_to_ping", {})) for _ in range(10)])
    swarm = SwarmAgent.builder().name("table").member(ping).member(pong).build()

    assert failure(swarm).error == MaxAgentDepthExceeded(8)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda b: b.name("s"), "at least one member"),
        (lambda b: b.member(agent("a")).member(agent("a")), "duplicate member names: a"),
        (lambda b: b.member(agent("a")).entry("ghost"), "unknown entry 'ghost'"),
        (lambda b: b.member(agent("a")).member(Echo()), "must be LlmAgents, not Echo"),
    ],
    ids=["empty", "duplicate", "unknown entry", "not an LlmAgent"],
)
def test_swarm_build_errors(build: Callable[[Any], Any], message: str) -> None:
    with pytest.raises(SwarmBuildError, match=message):
        build(SwarmAgent.builder()).build()


def test_swarm_max_handoffs_must_not_be_negative() -> None:
    with pytest.raises(SwarmBuildError, match="max_handoffs must be >= 0"):
        SwarmAgent.builder().max_handoffs(-1)


# -- agent as tool -----------------------------------------------------------------


def test_agent_as_tool_takes_a_single_input_string() -> None:
    summarizer = agent("summarizer", description="Condenses text to three bullet points.")

    as_tool = AgentAsTool(summarizer)

    assert as_tool.name == "summarizer"
    assert as_tool.description == "Condenses text to three bullet points."
    assert as_tool.parameters == {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
        "required": ["input"],
        "additionalProperties": False,
    }
    writer = agent("writer", tools=[as_tool])
    assert [t.name for t in writer.spec.tools] == ["summarizer"]


def test_agent_as_tool_name_and_description_can_be_overridden() -> None:
    as_tool = AgentAsTool(agent("summarizer", description=""))
    renamed = as_tool.with_name("digest").with_description("Summarize a text.")

    assert as_tool.description == "summarizer"  # no description: the name stands in
    assert (renamed.name, renamed.description) == ("digest", "Summarize a text.")
    assert (as_tool.name, renamed.agent) == ("summarizer", as_tool.agent)


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_as_tool_returns_the_sub_agents_answer_to_the_caller(backend: str) -> None:
    summarizer = agent("summarizer", say("- a\n- b\n- c", usage=Usage(50, 50)))
    writer = agent(
        "writer",
        call_tools(("call_1", "summarizer", {"input": "A long text."})),
        say("Here is the digest.", usage=Usage(1, 1)),
        tools=[AgentAsTool(summarizer)],
    )

    result = run(writer, backend=backend)

    assert result.final_output == "Here is the digest."
    outputs = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert [(o.content, o.is_error) for o in outputs] == [("- a\n- b\n- c", False)]
    # the sub-agent sees only its input, and its events stay out of the caller's stream
    assert model_of(summarizer).requests[0].messages == (user_text("A long text."),)
    assert "summarizer" not in {e.agent for e in result.events if isinstance(e, AgentUpdated)}


def test_agent_as_tool_runs_in_isolation_but_inherits_context_cancel_and_depth() -> None:
    probe = Echo("probe")
    caller = agent(
        "caller", call_tools(("probe", {"input": "hello"})), say("done"), tools=[AgentAsTool(probe)]
    )
    ctx: RunContext[str] = RunContext(
        "the user's own context",
        session=A_SESSION,
        tracer=TracerHandle("a tracer"),
        permission_mode=PermissionMode.BYPASS,
        agent_depth=2,
    )
    ctx.state["secret"] = "parent only"

    result = run(caller, ctx)

    ((sub, sub_input),) = probe.seen
    assert sub_input == AgentInput.from_user_text("hello")
    assert sub.user_ctx == "the user's own context"
    assert sub.cancel is ctx.cancel and sub.tracer == ctx.tracer
    assert sub.agent_depth == 3 and sub.permission_mode is PermissionMode.BYPASS
    assert sub.session is not ctx.session and sub.hooks == HookRegistry()
    assert sub.state is not ctx.state and "secret" not in sub.state
    assert ctx.state.values == {"secret": "parent only"}
    assert result.final_output == "done"


def test_plan_mode_crosses_into_the_sub_run() -> None:
    paid: list[int] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: dollars.
        """
        paid.append(amount)
        return "paid"

    payer = agent("payer", call_tools(("pay", {"amount": 5})), say("I could not pay."), tools=[pay])
    as_tool = AgentAsTool(payer, effect=ToolEffect.READ_ONLY)  # the caller may call it under PLAN
    caller = agent("caller", call_tools(("payer", {"input": "Pay $5."})), say("done"), tools=[as_tool])

    run(caller, RunContext(None, permission_mode=PermissionMode.PLAN))

    assert paid == []  # the wrapped agent's side-effecting tool was denied by the caller's mode
    denied = model_of(payer).requests[1].messages[-1]
    assert isinstance(denied, ToolResult) and denied.is_error and "plan mode" in denied.content


def test_a_failed_sub_run_is_a_tool_error_and_the_caller_goes_on() -> None:
    writer = agent(
        "writer",
        call_tools(("summarizer", {"input": "text"})),
        say("I could not summarize it."),
        tools=[AgentAsTool(failing("summarizer"))],
    )

    result = run(writer)

    (output,) = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert output.is_error and output.content == "agent 'summarizer' failed: model call failed: boom"
    assert result.final_output == "I could not summarize it."


def test_agent_as_tool_is_still_capped_by_max_agent_depth() -> None:
    inner = agent("inner", say("deep"), config=RunConfig(max_agent_depth=2))
    caller = agent("caller", call_tools(("inner", {"input": "x"})), say("ok"), tools=[AgentAsTool(inner)])

    result = run(caller, RunContext(None, agent_depth=2))

    (output,) = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert output.is_error and output.content == "agent 'inner' failed: maximum agent depth exceeded (2)"
    assert model_of(inner).calls == 0


def test_a_cancel_inside_the_sub_run_cancels_the_caller() -> None:
    @tool
    async def stop(ctx: ToolContext[Any]) -> str:
        """Cancel everything."""
        ctx.cancel.cancel()
        return "stopping"

    inner = agent("inner", call_tools(("stop", {})), say("never"), tools=[stop])
    caller = agent("caller", call_tools(("inner", {"input": "x"})), say("never"), tools=[AgentAsTool(inner)])

    assert type(failure(caller).error).__name__ == "Cancelled"


# -- user-defined agents -----------------------------------------------------------


def test_a_plain_class_with_name_description_and_run_is_an_agent() -> None:
    assert isinstance(Echo(), Agent)
    assert not isinstance(object(), Agent)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_defined_agent_composes_inside_a_sequential_agent(backend: str) -> None:
    echo = Echo(usage=Usage(2, 1))
    pipeline = SequentialAgent("p", "").then(agent("greeter", say("Hello.", usage=Usage(1, 1)))).then(echo)
    ctx = RunContext.ephemeral("user data")

    result = run(pipeline, ctx, "hi", backend=backend)

    assert result.final_output == "echo: hi"
    assert ctx.state.values == {"greeter": "Hello.", "echo": "echo: hi"}
    assert result.usage == Usage(3, 2)
    ((seen_ctx, seen_input),) = echo.seen
    assert seen_ctx.user_ctx == "user data" and seen_ctx.agent_depth == 1
    assert seen_input == AgentInput.from_user_text("hi")
    # its own RunStarted/RunCompleted are folded into the workflow's
    assert kinds(result.events).count("RunStarted") == 1 and kinds(result.events).count("RunCompleted") == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_defined_agent_composes_inside_a_parallel_agent(backend: str) -> None:
    fan_out = ParallelAgent("p", "").add(Echo()).branch("llm", agent("llm", say("LLM.")))

    result = run(fan_out, text="hi", backend=backend)

    assert result.final_output == '{"echo":"echo: hi","llm":"LLM."}'


def test_a_user_defined_agent_without_a_terminal_event_fails_its_step() -> None:
    class Mute:
        name, description = "mute", "says nothing"

        async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
            yield message("half a thought", "mute")

    error = failure(SequentialAgent("p", "").then(Mute()))

    assert error.error == OtherError("agent 'mute' ended without a terminal event")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_defined_agent_that_raises_is_a_failed_child(backend: str) -> None:
    class Crash:
        name, description = "crash", "raises"

        async def run(self, ctx: RunContext[Any], input: AgentInput) -> AsyncIterator[AgentEvent]:
            yield message("about to fail", "crash")
            raise RuntimeError("kaboom")

    sibling = agent("sibling", say("fine"))
    ctx = RunContext.ephemeral(None)
    error = failure(ParallelAgent("p", "").add(Crash()).add(sibling), ctx, backend=backend)

    crashed = OtherError("agent 'crash' raised RuntimeError: kaboom")
    assert error.error == ChildrenFailed((ChildFailure("crash", crashed),))
    assert model_of(sibling).calls == 1 and ctx.state.values == {"sibling": "fine"}
    # in a sequence, the crash fails the run with that error
    assert failure(SequentialAgent("s", "").then(Crash())).error == crashed


# -- nesting -----------------------------------------------------------------------


def test_research_pipeline_nests_a_parallel_fan_out_inside_a_sequence() -> None:
    def writer_instructions(ctx: RunContext[Any]) -> str:
        return f"Rates: {ctx.state.get('rates')}. Housing: {ctx.state.get('housing')}."

    writer = agent("writer", say("Final brief.", usage=Usage(1, 1)), instructions=writer_instructions)
    research = (
        ParallelAgent("research", "")
        .branch("rates", agent("r", say("4%", usage=Usage(1, 1))))
        .branch("housing", agent("h", say("flat", usage=Usage(1, 1))))
    )
    pipeline = SequentialAgent("pipeline", "").then(research).then(writer)
    ctx = RunContext.ephemeral(None)

    result = run(pipeline, ctx)

    assert result.final_output == "Final brief."
    assert ctx.state.values == {
        "rates": "4%",
        "housing": "flat",
        "research": '{"housing":"flat","rates":"4%"}',
        "writer": "Final brief.",
    }
    assert model_of(writer).requests[0].instructions == "Rates: 4%. Housing: flat."
    assert result.usage == Usage(3, 3)
    assert kinds(result.events).count("RunStarted") == 1 and kinds(result.events).count("RunCompleted") == 1


def test_a_swarm_nested_in_a_workflow_keeps_its_max_handoffs_budget() -> None:
    ping = agent("ping", *[call_tools(("transfer_to_pong", {})) for _ in range(10)])
    pong = agent("pong", *[call_tools(("transfer_to_ping", {})) for _ in range(10)])
    swarm = SwarmAgent.builder().name("table").member(ping).member(pong).max_handoffs(2).build()

    error = failure(SequentialAgent("outer", "").then(swarm))

    assert error.error == MaxHandoffsExceeded(2)


def test_a_workflow_timeout_fails_the_run_with_the_workflows_timeout() -> None:
    slow = agent("slow", [Pause(2), *say("too late")])
    pipeline = SequentialAgent("p", "", config=RunConfig(timeout=0.05)).then(slow)

    assert failure(pipeline).error == TimedOut(0.05)
