"""Agent trees over random shapes and completion orders.

For random workflows (sequential, parallel, graph, loop) and handoff chains of
LLM agents, some calling a tool, whose model turns finish after random pauses
(so the live interpreter sees the children complete in random orders):

- the final output is the reference semantics': the last step's text
  (sequential), the sorted-key JSON object of the branches (parallel), the
  sink's text or the sinks' object (graph), the last handoff target's text;
- each member's events (by the path that emitted them) are the same whatever
  order the children finished in, and under the scripted (synchronous,
  lock-step) interpreter; branches interleave as their steps finish (waves
  are not lock-step), and a replay of the recording gives exactly the
  recorded stream.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helikon import LlmAgent, prepare, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter, TestInterpreter
from helikon.testing import MockModel, Pause, call_tools, say
from helikon.workflows import GraphAgent, Handoff, ParallelAgent, SequentialAgent
from tests.property.strategies import per_path


@tool
async def note(text: str) -> str:
    """Take a note.

    Args:
        text: what to note.
    """
    return f"noted {text}"


@attrs.frozen
class Child:
    name: str
    answer: str
    uses_tool: bool
    pauses: tuple[float, ...]  # one per model turn


@attrs.frozen
class Shape:
    kind: str
    children: tuple[Child, ...]
    edges: tuple[tuple[str, str], ...] = ()


pause = st.sampled_from([0.0, 0.0005, 0.001, 0.002])


@st.composite
def children(draw: st.DrawFn, count: int) -> tuple[Child, ...]:
    found = []
    for index in range(count):
        uses_tool = draw(st.booleans())
        found.append(
            Child(
                f"c{index}",
                draw(st.sampled_from(["yes", "no", "maybe", "later"])) + f" {index}",
                uses_tool,
                tuple(draw(st.lists(pause, min_size=2, max_size=2))),
            )
        )
    return tuple(found)


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    kind = draw(st.sampled_from(["sequential", "parallel", "graph", "handoff"]))
    kids = draw(children(draw(st.integers(1, 3))))
    edges: tuple[tuple[str, str], ...] = ()
    if kind == "graph" and len(kids) > 1:
        names = [c.name for c in kids]
        candidates = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
        edges = tuple(draw(st.lists(st.sampled_from(candidates), unique=True, max_size=len(candidates))))
    return Shape(kind, kids, edges)


def llm(child: Child, handoff_to: Any = None, with_pauses: bool = True) -> LlmAgent[Any]:
    def paused(turn: list[Any], index: int) -> list[Any]:
        delay = child.pauses[index] if with_pauses else 0.0
        return [Pause(delay), *turn] if delay else turn

    turns: list[list[Any]] = []
    if handoff_to is not None:
        turns.append(paused(call_tools((f"transfer_to_{handoff_to.name}", {})), 0))
    else:
        if child.uses_tool:
            turns.append(paused(call_tools(("note", {"text": child.name})), 0))
        turns.append(paused(say(child.answer), 1))
    return LlmAgent(
        name=child.name,
        description=f"Child {child.name}.",
        model=MockModel(turns),
        tools=[note] if child.uses_tool and handoff_to is None else [],
        handoffs=[Handoff.to(handoff_to)] if handoff_to is not None else [],
    )


def build(shape: Shape, with_pauses: bool) -> Any:
    agents = [llm(c, with_pauses=with_pauses) for c in shape.children]
    match shape.kind:
        case "sequential":
            pipeline = SequentialAgent("tree", "")
            for agent in agents:
                pipeline = pipeline.then(agent)
            return pipeline
        case "parallel":
            fan = ParallelAgent("tree", "")
            for agent in agents:
                fan = fan.add(agent)
            return fan
        case "graph":
            builder = GraphAgent.builder().name("tree").description("")
            for agent in agents:
                builder = builder.node(agent.name, agent)
            for a, b in shape.edges:
                builder = builder.edge(a, b)
            return builder.build()
        case _:
            chain = agents[-1]
            for child in reversed(shape.children[:-1]):
                chain = llm(child, handoff_to=chain, with_pauses=with_pauses)
            return chain


def reference(shape: Shape) -> str:
    answers = {c.name: c.answer for c in shape.children}
    match shape.kind:
        case "sequential" | "handoff":
            return shape.children[-1].answer
        case "parallel":
            return json.dumps(answers, sort_keys=True, separators=(",", ":"))
        case _:
            sources = {a for a, _ in shape.edges}
            sinks = [c.name for c in shape.children if c.name not in sources]
            if len(sinks) == 1:
                return answers[sinks[0]]
            return json.dumps({s: answers[s] for s in sinks}, sort_keys=True, separators=(",", ":"))


def scripted(shape: Shape) -> list[Any]:
    """The same run under the scripted interpreter: each member of the tree
    answers from its own scripts (its agent's turns, without the pauses)."""
    tree = build(shape, with_pauses=False)
    env = prepare(tree, run_id="r")

    def scripts_of(agent: LlmAgent[Any]) -> TestInterpreter:
        assert isinstance(agent.model, MockModel)
        turns = [list(turn) for turn in agent.model.remaining]
        return TestInterpreter(turns, tools={"note": lambda a: f"noted {a['text']}"})

    if env.machine is None:  # a single agent: the plain agent loop
        return list(scripts_of(tree).run(env.spec, "go", run_id="r").events)
    spec = env.machine.spec
    agents = {m.name: scripts_of(a) for m in spec.members if (a := _agent_named(tree, m.name)) is not None}
    return list(TestInterpreter(agents=agents).run(spec, "go", run_id="r").events)


def _agent_named(tree: Any, name: str) -> Any:
    """The LLM agent called ``name`` in ``tree`` (children, handoff targets)."""
    seen: list[Any] = [tree]
    while seen:
        current = seen.pop()
        if getattr(current, "name", None) == name and isinstance(current, LlmAgent):
            return current
        seen.extend(agent for _, agent in getattr(current, "children", ()))
        seen.extend(h.resolve() for h in getattr(current, "handoffs", ()))
    return None


def run(agent: Any, interpreter: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in agent.run(None, "go", interpreter=interpreter)]

    return anyio.run(go)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(shapes())
def test_a_tree_gives_the_reference_output_and_each_members_events_whatever_finishes_first(
    shape: Shape,
) -> None:
    recorder = RecordingInterpreter(LiveInterpreter("r"))
    paused = run(build(shape, with_pauses=True), recorder)
    straight = run(build(shape, with_pauses=False), LiveInterpreter("r"))
    replayed = run(build(shape, with_pauses=False), ReplayInterpreter(recorder.trace))

    assert type(paused[-1]).__name__ == "RunCompleted"
    final = [e for e in paused if type(e).__name__ == "MessageOutput"][-1]
    assert "".join(p.text for p in final.item.content) == reference(shape)
    # Waves are not lock-step: branches interleave as their steps finish, but
    # every member says the same things in the same order, the run ends the
    # same, and a replay gives exactly the recorded stream.
    assert replayed == paused
    assert per_path(paused) == per_path(straight) == per_path(scripted(shape))
    assert paused[-1] == straight[-1]
