"""Usage limits end a run at the first step that would break one, the same
way under every interpreter (issue 36).

A random chain of up to three agents joined by handoffs, each with tools and
random per-turn usage, runs with random root limits (requests, tool calls,
tokens, cost from a price table) under the live interpreter (trio and
asyncio), the scripted interpreter, the step API with the state dumped and loaded at every step,
and the replay of its recording read back from the file. The event streams
are identical, and the run ends exactly where a reference walk of the same
plan says: before the first model call or round of tool calls at which the
whole chain's usage would break a limit, naming that agent's path.

Random trees (agents used as tools, handoffs, sequential, parallel and loop
workflows) with random limits on the run and tighter ones on members run
the same way; there the end is checked against the recorded trace (see
:func:`check_first_breaking_step`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import attrs
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from helikon import (
    AgentAsTool,
    AgentEvent,
    LlmAgent,
    ModelPrice,
    PriceTable,
    RunCompleted,
    RunConfig,
    RunContext,
    RunFailed,
    Trace,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    dump_state,
    load_state,
)
from helikon.effects import AllPerformed, CallModel, ExecuteTools, ModelResponded, PerformAll, Terminate
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.loop import ORDER_OF_LIMITS
from helikon.model import ToolCallChunk, ToolEffect
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, TestInterpreter, call_tools, say
from helikon.workflows import Handoff, LoopAgent, ParallelAgent, SequentialAgent

RUN_ID = "run-limits"
NAMES = ("alpha", "beta", "gamma")
MODEL = "priced-model"
#: $1 per million input tokens, $2 per million output tokens.
PRICES = PriceTable({MODEL: ModelPrice(input=1, output=2)})


class Echo:
    """A tool that answers its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"The {name} tool."
        self.parameters: dict[str, Any] = {"type": "object", "properties": {}}
        self.output_schema = None
        self.effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: Any, args: Any) -> str:
        return f"{self.name} done"

    def plain(self, args: Any) -> str:
        return f"{self.name} done"


usages = st.builds(Usage, input_tokens=st.integers(0, 400), output_tokens=st.integers(0, 100))


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(1, 3))
    agents = []
    for index in range(size):
        name = NAMES[index]
        turns: list[tuple[str, Usage, int]] = []
        for _ in range(draw(st.integers(0, 3))):
            kinds = ["tools"] + (["handoff"] if index + 1 < size else [])
            kind = draw(st.sampled_from(kinds))
            turns.append((kind, draw(usages), draw(st.integers(1, 2)) if kind == "tools" else 0))
            if kind == "handoff":
                break
        if not turns or turns[-1][0] != "handoff":
            turns.append(("say", draw(usages), 0))
        agents.append({"name": name, "turns": turns})
    maybe = st.none() | st.integers(0, 8)
    limits = UsageLimits(
        requests=draw(maybe),
        tool_calls=draw(maybe),
        input_tokens=draw(st.none() | st.integers(0, 2000)),
        output_tokens=draw(st.none() | st.integers(0, 400)),
        total_tokens=draw(st.none() | st.integers(0, 2400)),
        cost=draw(st.none() | st.integers(0, 3000).map(lambda n: Decimal(n) / 1_000_000)),
    )
    return {"agents": agents, "limits": limits}


def script(name: str, turns: list[tuple[str, Usage, int]], chain: list[str]) -> list[list[Any]]:
    made: list[list[Any]] = []
    for kind, usage, calls in turns:
        if kind == "tools":
            made.append(call_tools(*((f"{name}_t{i % 2}", {}) for i in range(calls)), usage=usage))
        elif kind == "handoff":
            made.append(call_tools((f"transfer_to_{chain[chain.index(name) + 1]}", {}), usage=usage))
        else:
            made.append(say(f"{name} is done", usage=usage))
    return made


def build(plan: dict[str, Any]) -> tuple[LlmAgent[Any], RunContext[Any]]:
    chain = [a["name"] for a in plan["agents"]]
    made: LlmAgent[Any] | None = None
    for spec in reversed(plan["agents"]):
        root = spec is plan["agents"][0]
        made = LlmAgent(
            name=spec["name"],
            config=RunConfig(usage_limits=plan["limits"] if root else UsageLimits()),
            model=MockModel(script(spec["name"], spec["turns"], chain), model_id=MODEL),
            tools=[Echo(f"{spec['name']}_t0"), Echo(f"{spec['name']}_t1")],
            handoffs=[Handoff.to(made)] if made is not None else [],
        )
    assert made is not None
    return made, priced()


def _broken(limits: UsageLimits, used: Usage, requests: int, tool_calls: int) -> tuple[str, Any] | None:
    """The reference rule, written out independently of the machine's."""
    values = {
        "requests": used.requests + requests,
        "tool_calls": used.tool_calls + tool_calls,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "total_tokens": used.input_tokens + used.output_tokens,
        "cost": used.cost or Decimal(0),
    }
    for name in ORDER_OF_LIMITS:
        maximum = getattr(limits, name)
        if maximum is not None and values[name] > maximum:
            return name, values[name]
    return None


def reference(plan: dict[str, Any]) -> UsageLimitExceeded | None:
    """Walk the plan's turns in order, checking where the machine checks."""
    limits: UsageLimits = plan["limits"]
    used = Usage()
    path: tuple[str, ...] = ()
    for index, spec in enumerate(plan["agents"]):
        if index:
            path = (*path, spec["name"])
        for kind, usage, calls in spec["turns"]:
            broken = _broken(limits, used, 1, 0)
            if broken is not None:
                return UsageLimitExceeded(
                    broken[0], broken[1], getattr(limits, broken[0]), spec["name"], path
                )
            cost = (Decimal(usage.input_tokens) * 1 + Decimal(usage.output_tokens) * 2) / 1_000_000
            used = used + Usage(usage.input_tokens, usage.output_tokens, requests=1, cost=cost)
            if kind == "tools":
                broken = _broken(limits, used, 0, calls)
                if broken is not None:
                    maximum = getattr(limits, broken[0])
                    return UsageLimitExceeded(broken[0], broken[1], maximum, spec["name"], path)
                used = used + Usage(tool_calls=calls)
            elif kind == "say":
                return None  # the final answer: the run completes
    return None


# -- one run of an agent, four ways (the flat chains and the trees alike) ---------------


def priced() -> RunContext[Any]:
    return RunContext.ephemeral(None).with_prices(PRICES)


def run_live(agent: Any, ctx: RunContext[Any], interpreter: Any, backend: str) -> list[AgentEvent]:
    """The run's events under ``interpreter`` on ``backend``."""

    async def go() -> list[AgentEvent]:
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter)]

    return anyio.run(go, backend=backend)


def run_scripted(agent: Any, ctx: RunContext[Any], root: TestInterpreter) -> list[AgentEvent]:
    """The run's events under the scripted interpreter ``root`` (its ``agents``: the members')."""
    env = prepare(agent, ctx, run_id=RUN_ID)
    machine_spec = env.machine.spec if env.machine is not None else env.spec
    return list(root.run(machine_spec, "go", RUN_ID).events)


def echo_tools(name: str) -> dict[str, Any]:
    """The scripted interpreter's ``tools`` for the member ``name`` (its two :class:`Echo` tools)."""
    return {f"{name}_t{i}": Echo(f"{name}_t{i}").plain for i in range(2)}


def run_stepped(
    agent: Any, ctx: RunContext[Any], interpreter: Callable[[], Any] = lambda: None
) -> list[AgentEvent]:
    """The run's events through the step API, its state dumped and loaded at
    every step; each effect performed by a fresh ``interpreter()`` (None: the default)."""

    async def go() -> list[AgentEvent]:
        out = start(agent, "go", run_id=RUN_ID, ctx=ctx)
        events = list(out.events)
        state, effect = out.state, out.effect
        while type(effect) is not Terminate:
            state = load_state(dump_state(state))
            live_events, result = await perform(agent, effect, ctx, run_id=RUN_ID, interpreter=interpreter())
            events.extend(live_events)
            out = advance(agent, state, result, ctx=ctx)
            events.extend(out.events)
            state, effect = out.state, out.effect
        return events

    return anyio.run(go, backend="trio")


def read_back(trace: Trace) -> Trace:
    """``trace`` written to a file and loaded from it (what a replay reads)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        path.write_bytes(trace.to_bytes())
        return Trace.load(path)


def live(plan: dict[str, Any], interpreter: Any = None, backend: str = "trio") -> list[AgentEvent]:
    agent, ctx = build(plan)
    return run_live(agent, ctx, interpreter or LiveInterpreter(RUN_ID), backend)


def scripted(plan: dict[str, Any]) -> list[AgentEvent]:
    agent, ctx = build(plan)
    chain = [a["name"] for a in plan["agents"]]

    def member(spec: dict[str, Any]) -> TestInterpreter:
        model = script(spec["name"], spec["turns"], chain)
        return TestInterpreter(model=model, tools=echo_tools(spec["name"]), ctx=ctx)

    root = member(plan["agents"][0])
    root.agents = {spec["name"]: member(spec) for spec in plan["agents"][1:]}
    return run_scripted(agent, ctx, root)


def stepped(plan: dict[str, Any]) -> list[AgentEvent]:
    return run_stepped(*build(plan))


def replayed(plan: dict[str, Any]) -> tuple[list[AgentEvent], list[AgentEvent]]:
    recorder = RecordingInterpreter(LiveInterpreter(RUN_ID))
    recorded = live(plan, recorder)
    return recorded, live(plan, ReplayInterpreter(read_back(recorder.trace)))


@settings(max_examples=min((settings.default or settings()).max_examples, 200))
@given(plans())
def test_limits_end_the_run_at_the_first_breaking_step_under_every_interpreter(plan: dict[str, Any]) -> None:
    events = live(plan)
    last = events[-1]
    expected = reference(plan)
    if expected is None:
        assert isinstance(last, RunCompleted), last
    else:
        assert isinstance(last, RunFailed) and last.error == expected, (last, expected)
    event(f"ends {expected.limit if expected else 'completed'}")
    assert live(plan, backend="asyncio") == events
    assert scripted(plan) == events
    assert stepped(plan) == events
    recorded, replay = replayed(plan)
    assert recorded == events and replay == events
    # requests and tool calls are not part of Usage equality: compare them too
    assert [(e.usage.requests, e.usage.tool_calls) for e in (recorded[-1], replay[-1])] == [
        (last.usage.requests, last.usage.tool_calls)
    ] * 2


# -- random trees -----------------------------------------------------------------------
#
# Trees of LLM agents, agents used as tools (a caller asks each of its parts
# once), handoffs (a router hands the conversation to its part) and
# sequential, parallel and loop workflows. The run has random limits, and
# members that run once (none under a loop) may have tighter ones of their
# own. Every interpreter performs whole waves (the live interpreter with
# ``lock_step=True``): which member spends first in a wave is then the
# machine's order, not the scheduler's, so the event streams compare equal.
# The run ends at the first step where a limit is exceeded: checked against
# the recorded trace, walked wave by wave with each limit holder's spending
# counted from the recorded model answers, independently of the machine.

KINDS = ("leaf", "leaf", "sequential", "parallel", "loop", "handoff", "tool")


@attrs.frozen
class Plan:
    """A node of a random tree: its kind, unique name, a leaf's turns, its
    parts, its own limits (None: the run's only) and its routing usage (a
    router's transfer turn, a caller's two turns)."""

    kind: str
    name: str
    turns: tuple[tuple[str, Usage, int], ...] = ()
    parts: tuple[Plan, ...] = ()
    limits: UsageLimits | None = None
    usage: Usage = Usage()
    iterations: int = 1


def member_limits() -> st.SearchStrategy[UsageLimits]:
    small = st.none() | st.integers(0, 4)
    return st.builds(
        UsageLimits,
        requests=small,
        tool_calls=small,
        input_tokens=st.none() | st.integers(0, 800),
        total_tokens=st.none() | st.integers(0, 900),
    )


@st.composite
def tree_plans(draw: st.DrawFn, depth: int = 2, looped: bool = False, names: list[int] | None = None) -> Plan:
    names = names if names is not None else [0]
    names[0] += 1
    kind = draw(st.sampled_from(KINDS if depth else ("leaf",)))
    name = f"{kind}{names[0]}"
    limits = None if looped else draw(st.none() | member_limits() | member_limits())
    usage = draw(usages)
    if kind == "leaf":
        turns = [("tools", draw(usages), draw(st.integers(1, 2))) for _ in range(draw(st.integers(0, 2)))]
        turns.append(("say", draw(usages), 0))
        return Plan(kind, name, tuple(turns), limits=limits, usage=usage)
    count = 1 if kind == "handoff" else draw(st.integers(1, 2))
    iterations = draw(st.integers(1, 2)) if kind == "loop" else 1
    inner = looped or kind == "loop"
    parts = tuple(draw(tree_plans(depth - 1, inner, names)) for _ in range(count))
    return Plan(kind, name, parts=parts, limits=limits, usage=usage, iterations=iterations)


#: Scripts repeat: a member under two nested loops runs up to four times.
REPEAT = 4


def tree_script(plan: Plan) -> list[list[Any]]:
    """One run of ``plan``'s model (a leaf, a router or a caller)."""
    if plan.kind == "leaf":
        return script(plan.name, list(plan.turns), [plan.name])
    if plan.kind == "handoff":
        return [call_tools((f"transfer_to_{plan.parts[0].name}", {}), usage=plan.usage)]
    calls = [(f"ask_{part.name}", {"input": "help"}) for part in plan.parts]
    return [call_tools(*calls, usage=plan.usage), say(f"{plan.name} done", usage=plan.usage)]


def build_tree(plan: Plan, root_limits: UsageLimits | None = None) -> Any:
    limits = root_limits if root_limits is not None else plan.limits or UsageLimits()
    config = RunConfig(usage_limits=limits)
    parts = [build_tree(part) for part in plan.parts]
    keyed = tuple((part.name, agent) for part, agent in zip(plan.parts, parts, strict=True))
    model = (
        MockModel(tree_script(plan) * REPEAT, model_id=MODEL)
        if plan.kind in ("leaf", "handoff", "tool")
        else None
    )
    match plan.kind:
        case "leaf":
            tools = [Echo(f"{plan.name}_t0"), Echo(f"{plan.name}_t1")]
            return LlmAgent(name=plan.name, config=config, model=model, tools=tools)
        case "handoff":
            return LlmAgent(name=plan.name, config=config, model=model, handoffs=[Handoff.to(parts[0])])
        case "tool":
            helpers = [
                AgentAsTool(agent, name=f"ask_{part.name}", description="Ask.")
                for part, agent in zip(plan.parts, parts, strict=True)
            ]
            return LlmAgent(name=plan.name, config=config, model=model, tools=helpers)
        case "sequential":
            return SequentialAgent(plan.name, "", children=keyed, config=config)
        case "parallel":
            return ParallelAgent(plan.name, "", children=keyed, config=config)
        case _:
            return LoopAgent(plan.name, "", plan.iterations, children=keyed, config=config)


def plan_nodes(plan: Plan) -> list[Plan]:
    return [plan, *(node for part in plan.parts for node in plan_nodes(part))]


def lock_step() -> LiveInterpreter:
    """A live interpreter that performs whole waves (the machine's order, not the scheduler's)."""
    return LiveInterpreter(RUN_ID, lock_step=True)


def tree_live(plan: Plan, limits: UsageLimits, backend: str, interpreter: Any = None) -> list[AgentEvent]:
    return run_live(build_tree(plan, limits), priced(), interpreter or lock_step(), backend)


def tree_scripted(plan: Plan, limits: UsageLimits) -> list[AgentEvent]:
    ctx = priced()

    def member(node: Plan) -> TestInterpreter:
        model = tree_script(node) * REPEAT if node.kind in ("leaf", "handoff", "tool") else []
        return TestInterpreter(model=model, tools=echo_tools(node.name), ctx=ctx)

    root = member(plan)
    root.agents = {node.name: member(node) for node in plan_nodes(plan)[1:]}
    return run_scripted(build_tree(plan, limits), ctx, root)


def tree_stepped(plan: Plan, limits: UsageLimits) -> list[AgentEvent]:
    return run_stepped(build_tree(plan, limits), priced(), lock_step)


def _segment_member(segment: str) -> str:
    """The member a path segment runs: a child's or target's key is its
    name; an agent used as a tool is keyed ``ask_<name>:<call id>``."""
    tool, _, call = segment.partition(":")
    return tool.removeprefix("ask_") if call else segment


def _spent(answer: Any) -> Usage:
    """What one recorded model answer spent, counted as the machine counts:
    one request, the reported tokens priced, the tool calls it asks for
    (a transfer is not a tool call)."""
    reported = Usage()
    calls: set[int] = set()
    for item in answer.events:
        if isinstance(item, Usage):
            reported = reported + item
        elif isinstance(item, ToolCallChunk) and item.name and not item.name.startswith("transfer_to_"):
            calls.add(item.index)
    cost = (Decimal(reported.input_tokens) * 1 + Decimal(reported.output_tokens) * 2) / 1_000_000
    return Usage(reported.input_tokens, reported.output_tokens, requests=1, tool_calls=len(calls), cost=cost)


def check_first_breaking_step(plan: Plan, limits: UsageLimits, trace: Trace, last: AgentEvent) -> str:
    """The run went on only while no limit holder (the run; a member with
    limits of its own, over what runs below it) was over its limits as a
    sub-machine below it was about to spend; a usage limit it ended with is
    one its holder really broke, by the count of the recorded answers."""
    holders: dict[str, UsageLimits] = {"": limits}
    holders.update({n.name: n.limits for n in plan_nodes(plan)[1:] if n.limits and not n.limits.unlimited})
    used = {holder: Usage() for holder in holders}

    def owners(path: tuple[str | int, ...]) -> list[str]:
        members = {_segment_member(str(segment)) for segment in path}
        return [""] + [holder for holder in holders if holder and holder in members]

    for step in trace.steps:
        effects = (
            [(a.path, a.effect) for a in step.effect.effects]
            if isinstance(step.effect, PerformAll)
            else [((), step.effect)]
        )
        for holder, holder_limits in holders.items():
            spending = [
                e for path, e in effects if isinstance(e, CallModel | ExecuteTools) and holder in owners(path)
            ]
            if not spending:
                continue
            requests = sum(1 for e in spending if isinstance(e, CallModel))
            broken = _broken(holder_limits, used[holder], requests, 0)
            assert broken is None, (
                f"step {step.index} ran past {holder or 'the run'}'s {broken}",
                step.effect,
            )
        answers = (
            [(a.path, a.result) for a in step.result.results]
            if isinstance(step.result, AllPerformed)
            else [((), step.result)]
        )
        for path, answer in answers:
            if isinstance(answer, ModelResponded):
                spent = _spent(answer)
                for holder in owners(path):
                    used[holder] = used[holder] + spent
    if isinstance(last, RunFailed) and isinstance(last.error, UsageLimitExceeded):
        error = last.error

        def broke(holder: str) -> bool:
            spent_now = used[holder]
            if getattr(holders[holder], error.limit) != error.maximum:
                return False
            if error.limit == "requests":
                return error.value > error.maximum and error.value > spent_now.requests
            value = (
                spent_now.total_tokens if error.limit == "total_tokens" else getattr(spent_now, error.limit)
            )
            # The machine folds a wave's answers one by one and stops at the
            # first that breaks a limit: its value counts the answers folded
            # so far, the trace's count all the wave's answers.
            return error.maximum < error.value <= value

        # the holders it may be (two may share a maximum): one really broke it
        breakers = [holder for holder in owners(error.path) if broke(holder)]
        assert breakers, (error, {h: used[h] for h in owners(error.path)})
        holder = breakers[0]
        return f"{'member' if holder else 'run'} {error.limit}"
    if isinstance(last, RunFailed):
        return f"failed: {type(last.error).__name__}"
    return "completed"


@settings(max_examples=min((settings.default or settings()).max_examples, 120))
@given(tree_plans(), st.just(UsageLimits()) | plans().map(lambda p: p["limits"]))
# A workflow member's own limits (found on code that did not check them).
@example(
    Plan(
        "sequential",
        "sequential1",
        parts=(
            Plan(
                "parallel",
                "parallel2",
                parts=(Plan("leaf", "leaf3", (("tools", Usage(5, 1), 1), ("say", Usage(5, 1), 0))),),
                limits=UsageLimits(requests=1),
            ),
        ),
    ),
    UsageLimits(),
)
# A wave cut short by its first answer that breaks a limit (the second is never folded).
@example(
    Plan(
        "sequential",
        "sequential1",
        parts=(
            Plan(
                "parallel",
                "parallel2",
                parts=(
                    Plan("leaf", "leaf3", (("tools", Usage(), 1), ("say", Usage(), 0))),
                    Plan("leaf", "leaf4", (("tools", Usage(), 1), ("say", Usage(), 0))),
                ),
            ),
        ),
    ),
    UsageLimits(tool_calls=0),
)
def test_limits_on_random_trees_end_the_run_at_the_first_breaking_step_under_every_interpreter(
    plan: Plan, limits: UsageLimits
) -> None:
    recorder = RecordingInterpreter(lock_step())
    events = tree_live(plan, limits, "trio", recorder)
    trace = read_back(recorder.trace)
    event(check_first_breaking_step(plan, limits, trace, events[-1]))
    assert tree_live(plan, limits, "asyncio") == events
    assert tree_scripted(plan, limits) == events
    assert tree_stepped(plan, limits) == events
    replay = tree_live(plan, limits, "trio", ReplayInterpreter(trace))
    assert replay == events
    assert (replay[-1].usage.requests, replay[-1].usage.tool_calls) == (
        events[-1].usage.requests,
        events[-1].usage.tool_calls,
    )
