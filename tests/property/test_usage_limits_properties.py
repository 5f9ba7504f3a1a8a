"""Usage limits end a run at the first step that would break one, the same
way under every interpreter (issue 36).

A random chain of up to three agents joined by handoffs, each with tools and
random per-turn usage, runs with random root limits (requests, tool calls,
tokens, cost from a price table) under the live interpreter, the scripted
interpreter, the step API with the state dumped and loaded at every step,
and the replay of its recording read back from the file. The event streams
are identical, and the run ends exactly where a reference walk of the same
plan says: before the first model call or round of tool calls at which the
whole chain's usage would break a limit, naming that agent's path.
"""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from helikon import (
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
from helikon.effects import Terminate
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.loop import ORDER_OF_LIMITS
from helikon.model import ToolEffect
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, TestInterpreter, call_tools, say
from helikon.workflows import Handoff

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
    return made, RunContext.ephemeral(None).with_prices(PRICES)


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


def live(plan: dict[str, Any], interpreter: Any = None) -> list[AgentEvent]:
    agent, ctx = build(plan)

    async def go() -> list[AgentEvent]:
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter or LiveInterpreter(RUN_ID))]

    return anyio.run(go, backend="trio")


def scripted(plan: dict[str, Any]) -> list[AgentEvent]:
    agent, ctx = build(plan)
    chain = [a["name"] for a in plan["agents"]]

    def member(spec: dict[str, Any]) -> TestInterpreter:
        tools = {f"{spec['name']}_t{i}": Echo(f"{spec['name']}_t{i}").plain for i in range(2)}
        return TestInterpreter(model=script(spec["name"], spec["turns"], chain), tools=tools, ctx=ctx)

    root = member(plan["agents"][0])
    root.agents = {spec["name"]: member(spec) for spec in plan["agents"][1:]}
    env = prepare(agent, ctx, run_id=RUN_ID)
    machine_spec = env.machine.spec if env.machine is not None else env.spec
    return list(root.run(machine_spec, "go", RUN_ID).events)


def stepped(plan: dict[str, Any]) -> list[AgentEvent]:
    agent, ctx = build(plan)

    async def go() -> list[AgentEvent]:
        out = start(agent, "go", run_id=RUN_ID, ctx=ctx)
        events = list(out.events)
        state, effect = out.state, out.effect
        while type(effect) is not Terminate:
            state = load_state(dump_state(state))
            live_events, result = await perform(agent, effect, ctx, run_id=RUN_ID)
            events.extend(live_events)
            out = advance(agent, state, result, ctx=ctx)
            events.extend(out.events)
            state, effect = out.state, out.effect
        return events

    return anyio.run(go, backend="trio")


def replayed(plan: dict[str, Any]) -> tuple[list[AgentEvent], list[AgentEvent]]:
    recorder = RecordingInterpreter(LiveInterpreter(RUN_ID))
    recorded = live(plan, recorder)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        path.write_bytes(recorder.trace.to_bytes())
        trace = Trace.load(path)
    return recorded, live(plan, ReplayInterpreter(trace))


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
    assert scripted(plan) == events
    assert stepped(plan) == events
    recorded, replay = replayed(plan)
    assert recorded == events and replay == events
    # requests and tool calls are not part of Usage equality: compare them too
    assert [(e.usage.requests, e.usage.tool_calls) for e in (recorded[-1], replay[-1])] == [
        (last.usage.requests, last.usage.tool_calls)
    ] * 2
