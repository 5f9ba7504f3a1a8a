"""Every interpreter gives the same run for the same answers of user code (issue 26).

A random agent tree (up to three agents joined by handoffs) with hooks,
input guardrails and tools that answer, answer junk or raise, random model
scripts, a random timeout (the run's, and the handoff targets' own) and random
clock readings, runs under the live interpreter (trio and asyncio), the
scripted interpreter, the step API with ``dump_state``/``load_state`` at
every step, and the replay of the recording read back from its file: the
event streams are identical, and so are the final states the scripted run
and the step API end in. What each answer means is the machine's answer
table, so no interpreter can differ.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from helikon import AgentEvent, LlmAgent, RunConfig, RunContext, ToolError, Trace, dump_state, load_state
from helikon._json import JsonObject, JsonValue
from helikon.context import HookRegistry, ToolContext
from helikon.effects import Terminate
from helikon.governance import (
    Allow,
    Deny,
    InjectSystemMessage,
    InputPolicy,
    OnRunStart,
    OnTurnStart,
    Pass,
    PostToolUse,
    PreToolUse,
    Tripwire,
)
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.model import ToolEffect
from helikon.steps import advance, perform, prepare, start
from helikon.testing import MockModel, TestInterpreter, call_tools, say
from helikon.workflows import Handoff

RUN_ID = "run-agree"
NAMES = ("alpha", "beta", "gamma")
ANSWERS = ("none", "allow", "deny", "junk", "raise", "inject")
TOOL_ANSWERS = ("text", "json", "no-json", "tool-error", "raise")
GUARDRAILS = ("absent", "pass", "none", "trip", "junk", "raise")


def answer(kind: str) -> object:
    """What a hook answers (or raises)."""
    match kind:
        case "none":
            return None
        case "allow":
            return Allow()
        case "deny":
            return Deny("not now")
        case "junk":
            return ["not", "a", "decision"]
        case "inject":
            return InjectSystemMessage("be brief")
    raise RuntimeError("the hook is down")


def tool_value(kind: str, name: str) -> Any:
    """What a tool returns (or raises)."""
    match kind:
        case "text":
            return f"{name} done"
        case "json":
            return {"tool": name, "n": [1, 2]}
        case "no-json":
            return object()
        case "tool-error":
            raise ToolError(f"{name} cannot")
    raise RuntimeError(f"{name} crashed")


class BehavingTool:
    """A tool whose answer is drawn."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.description = f"The {name} tool."
        self.parameters: JsonObject = {"type": "object", "properties": {}}
        self.output_schema = None
        self.effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        value: JsonValue = tool_value(self.kind, self.name)
        return value

    def plain(self, args: JsonValue) -> Any:
        return tool_value(self.kind, self.name)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    """A random agent tree and how every piece of its user code answers."""
    size = draw(st.integers(1, 3))
    agents = []
    for index in range(size):
        name = NAMES[index]
        tools = {f"{name}_t{i}": draw(st.sampled_from(TOOL_ANSWERS)) for i in range(draw(st.integers(0, 2)))}
        turns: list[list[Any]] = []
        for _ in range(draw(st.integers(0, 2))):
            choices = [["say"]] + ([["tools"]] if tools else []) + ([["handoff"]] if index + 1 < size else [])
            kind = draw(st.sampled_from(choices))[0]
            if kind == "tools":
                called = draw(st.lists(st.sampled_from(sorted(tools)), min_size=1, max_size=2))
                turns.append(call_tools(*((t, {}) for t in called)))
            elif kind == "handoff":
                turns.append(call_tools((f"transfer_to_{NAMES[index + 1]}", {})))
            else:
                turns.append(say(f"{name} says hi"))
        turns.append(say(f"{name} is done"))
        agents.append({"name": name, "tools": tools, "turns": turns})
    hooks = {
        event: draw(st.sampled_from(ANSWERS))
        for event in ("OnRunStart", "OnTurnStart", "PreToolUse", "PostToolUse", "observing")
    }
    return {
        "agents": agents,
        "hooks": hooks if draw(st.booleans()) else None,
        "guardrail": draw(st.sampled_from(GUARDRAILS)),
        "timeout": draw(st.sampled_from([None, 0.5, 2.0, 4.0])),
        "member_timeout": draw(st.sampled_from([None, None, 1.0, 3.0])),
        "ticks": draw(st.lists(st.floats(0.0, 1.5, allow_nan=False), min_size=1, max_size=6)),
    }


def clock_of(plan: dict[str, Any]) -> Any:
    """A fresh clock that reads ``ticks`` apart, in turn (random readings)."""
    ticks: list[float] = plan["ticks"]
    reads = [0]

    def clock() -> float:
        reads[0] += 1
        return 1000.0 + sum(ticks[i % len(ticks)] for i in range(reads[0]))

    return clock


def hook_of(plan: dict[str, Any]) -> Any:
    hooks = plan["hooks"]

    def hook(ctx: Any, event: object) -> object:
        match event:
            case OnRunStart():
                return answer(hooks["OnRunStart"])
            case OnTurnStart():
                return answer(hooks["OnTurnStart"])
            case PreToolUse():
                return answer(hooks["PreToolUse"])
            case PostToolUse():
                return answer(hooks["PostToolUse"])
        return answer(hooks["observing"])

    return hook


def guardrail_of(plan: dict[str, Any]) -> Any:
    kind = plan["guardrail"]

    def guardrail(ctx: Any, subject: object) -> object:
        match kind:
            case "pass":
                return Pass()
            case "none":
                return None
            case "trip":
                return Tripwire(InputPolicy(), {"why": "drawn"})
            case "junk":
                return 42
        raise ValueError("the guardrail is down")

    return guardrail


def build(
    plan: dict[str, Any], *, on_agents: bool = False
) -> tuple[LlmAgent[Any], RunContext[Any], dict[str, list[BehavingTool]]]:
    """The agent tree of ``plan`` (fresh models) and the run context; the
    hook and guardrail are the context's, or with ``on_agents`` every
    agent's own hook and the root's own guardrail (a Temporal worker serves
    agents, not contexts)."""
    made: LlmAgent[Any] | None = None
    own_hooks = [hook_of(plan)] if on_agents and plan["hooks"] is not None else []
    tools: dict[str, list[BehavingTool]] = {}
    for spec in reversed(plan["agents"]):
        own = [BehavingTool(n, k) for n, k in spec["tools"].items()]
        tools[spec["name"]] = own
        root = spec is plan["agents"][0]
        made = LlmAgent(
            name=spec["name"],
            config=RunConfig(timeout=plan["timeout"] if root else plan.get("member_timeout")),
            model=MockModel([list(t) for t in spec["turns"]]),
            tools=own,
            handoffs=[Handoff.to(made)] if made is not None else [],
            hooks=own_hooks,
        )
    assert made is not None
    if on_agents:
        guarded = [guardrail_of(plan)] if plan["guardrail"] != "absent" else []
        return attrs.evolve(made, input_guardrails=guarded), RunContext.ephemeral(None), tools
    registry = HookRegistry()
    if plan["hooks"] is not None:
        registry = registry.with_hook(hook_of(plan))
    if plan["guardrail"] != "absent":
        registry = registry.with_input_guardrail(guardrail_of(plan))
    return made, RunContext.ephemeral(None).with_hooks(registry), tools


def live(
    plan: dict[str, Any], backend: str, interpreter: Any = None, *, on_agents: bool = False
) -> list[AgentEvent]:
    agent, ctx, _ = build(plan, on_agents=on_agents)

    async def go() -> list[AgentEvent]:
        # Whole waves, as the scripted and Temporal interpreters perform them:
        # part by part, the live interpreter takes a clock reading per part, so
        # the same readings would fall elsewhere (waves answered part by part
        # are the tree properties' subject).
        default = LiveInterpreter(RUN_ID, clock=clock_of(plan), lock_step=True)
        run = agent.run(ctx, "go", interpreter=interpreter or default)
        return [event async for event in run]

    return anyio.run(go, backend=backend)


def scripted(plan: dict[str, Any]) -> tuple[list[AgentEvent], Any]:
    agent, ctx, tools = build(plan)
    hooks = [hook_of(plan)] if plan["hooks"] is not None else []

    def member(spec: dict[str, Any]) -> TestInterpreter:
        return TestInterpreter(
            model=[list(t) for t in spec["turns"]],
            tools={t.name: t.plain for t in tools[spec["name"]]},
            hooks=hooks,
            ctx=ctx,
        )

    root = member(plan["agents"][0])
    root.clock = clock_of(plan)
    root.agents = {spec["name"]: member(spec) for spec in plan["agents"][1:]}
    env = prepare(agent, ctx, run_id=RUN_ID)
    machine_spec = env.machine.spec if env.machine is not None else env.spec
    run = root.run(machine_spec, "go", RUN_ID)
    return list(run.events), run.state


def stepped(plan: dict[str, Any], backend: str) -> tuple[list[AgentEvent], Any]:
    """The step API, the state dumped and loaded back at every step."""
    agent, ctx, _ = build(plan)
    clock = clock_of(plan)

    # the machine wants a reading where a deadline is kept: the run's, or a
    # member's own (then with every result)
    members = plan.get("member_timeout") is not None and len(plan["agents"]) > 1

    async def go() -> tuple[list[AgentEvent], Any]:
        began = clock() if plan["timeout"] is not None or members else None
        out = start(agent, "go", run_id=RUN_ID, ctx=ctx, now=began)
        events = list(out.events)
        state: Any = out.state
        effect = out.effect
        while type(effect) is not Terminate:
            state = load_state(dump_state(state))
            live_events, result = await perform(agent, effect, ctx, run_id=RUN_ID)
            events.extend(live_events)
            timed = members or state.deadline is not None
            out = advance(agent, state, result, ctx=ctx, now=clock() if timed else None)
            events.extend(out.events)
            state, effect = out.state, out.effect
        return events, state

    return anyio.run(go, backend=backend)


def replayed(plan: dict[str, Any]) -> tuple[list[AgentEvent], list[AgentEvent]]:
    """The recording, and its replay from the file it was saved to."""
    recorder = RecordingInterpreter(LiveInterpreter(RUN_ID, clock=clock_of(plan), lock_step=True))
    recorded = live(plan, "trio", recorder)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        path.write_bytes(recorder.trace.to_bytes())
        trace = Trace.load(path)
    return recorded, live(plan, "trio", ReplayInterpreter(trace))


def without_definition(state: Any) -> Any:
    return attrs.evolve(state, definition="")


# The ci profile runs 320 examples (well under a minute), the dev one its own.
@settings(max_examples=min((settings.default or settings()).max_examples, 320))
@given(plans())
def test_every_interpreter_gives_the_same_run(plan: dict[str, Any]) -> None:
    trio_events = live(plan, "trio")
    last = trio_events[-1]
    event(f"ends {type(getattr(last, 'error', last)).__name__}")
    assert live(plan, "asyncio") == trio_events

    scripted_events, scripted_state = scripted(plan)
    assert scripted_events == trio_events

    stepped_events, stepped_state = stepped(plan, "trio")
    assert stepped_events == trio_events
    assert without_definition(stepped_state) == without_definition(scripted_state)

    recorded, replay = replayed(plan)
    assert recorded == trio_events and replay == trio_events
