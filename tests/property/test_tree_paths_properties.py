"""Random agent trees, driven one effect per job, equal one in-process run (issue 27).

Trees mix handoffs, agents used as tools, sequential, parallel, loop and
graph workflows and swarms; members share names (distinct agents called alike), models
reuse call ids (within a turn and across branches) and tools return a
secret. Each tree runs twice:

- in one process, with ``agent.run`` (the reference), recorded;
- through the step API as a job queue would: a fresh agent definition and a
  fresh ``RunContext`` for every effect, the state dumped and loaded
  between jobs, the wave's effects completed by the live interpreter in
  whatever order they finish.

Tool calls may need a human: answered by an approval handler in both runs,
or, in the job run, by suspending and feeding the human's ``ApprovalsGiven``
as a job of its own.

The final output, each member's events (by the path that emitted them), the
usage and what the session holds are the same (branches interleave
differently: in process each moves on as its own step is answered, and a
suspended question waits at the tree's barrier); both recordings (the job
run's holds its suspensions and the human's answers) replay strictly from
their bytes; no secret is in either.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import trio
from hypothesis import HealthCheck, event, given
from hypothesis import strategies as st

from helikon import (
    AgentAsTool,
    LlmAgent,
    RunContext,
    Trace,
    Usage,
    advance,
    dump_state,
    load_state,
    pending,
    perform,
    start,
    tool,
)
from helikon.effects import ApprovalsGiven, AwaitApproval, Terminate
from helikon.events import RunCompleted, RunFailed
from helikon.governance import Allow, AskUser
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.sessions import MemorySession
from helikon.testing import MockModel, Pause, call_tools, say
from helikon.workflows import GraphAgent, Handoff, LoopAgent, ParallelAgent, SequentialAgent, SwarmAgent
from tests.property.strategies import per_path, scaled

SECRET = "sk-prop-0f1e2d3c4b5a6978"


@tool
async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: the query.
    """
    return f"found {q} with key {SECRET}"


@attrs.frozen
class Leaf:
    """An LLM agent: its name, its answer, whether it calls the tool (and
    with which call ids: a reused id, or two calls sharing one)."""

    name: str
    answer: str
    calls: tuple[str, ...]
    pause: float


@attrs.frozen
class Node:
    """A tree: a leaf, or a composite of ``kind`` over ``parts``."""

    kind: str
    leaf: Leaf | None = None
    parts: tuple[Node, ...] = ()


NAMES = st.sampled_from(["writer", "writer", "critic", "scout"])  # names repeat on purpose
CALL_IDS = st.lists(st.sampled_from(["c1", "c1", "c2"]), max_size=2).map(tuple)


@st.composite
def leaves(draw: st.DrawFn) -> Node:
    leaf = Leaf(
        draw(NAMES),
        draw(st.sampled_from(["yes", "no", "maybe"])) + f" {draw(st.integers(0, 9))}",
        draw(CALL_IDS),
        draw(st.sampled_from([0.0, 0.0, 0.001])),
    )
    return Node("leaf", leaf)


def trees(depth: int = 2) -> st.SearchStrategy[Node]:
    if depth == 0:
        return leaves()
    sub = trees(depth - 1)
    composite = st.tuples(
        st.sampled_from(["sequential", "parallel", "loop", "graph", "handoff", "tool"]),
        st.lists(sub, min_size=1, max_size=3),
    ).map(lambda pair: Node(pair[0], parts=tuple(pair[1])))
    # A swarm's members are LLM agents: its parts are leaves.
    swarm = st.lists(leaves(), min_size=1, max_size=3).map(lambda parts: Node("swarm", parts=tuple(parts)))
    return st.one_of(leaves(), composite, swarm)


def _turns(leaf: Leaf, first: list[Any] | None = None) -> list[list[Any]]:
    pause = [Pause(leaf.pause)] if leaf.pause else []
    if first is not None:  # a swarm member handing off: that is its run
        return [[*pause, *first]]
    turns: list[list[Any]] = []
    if leaf.calls:
        calls = [(cid, "lookup", {"q": f"{leaf.name}{n}"}) for n, cid in enumerate(leaf.calls)]
        turns.append([*pause, *call_tools(*calls, usage=Usage(10, 1))])
    turns.append([*pause, *say(leaf.answer, usage=Usage(100, 10))])
    return turns


def _llm(leaf: Leaf, name: str | None = None, first: list[Any] | None = None, **kw: Any) -> LlmAgent[Any]:
    return LlmAgent(
        name=name or leaf.name,
        instructions=f"You are {leaf.name} answering {leaf.answer}.",
        model=MockModel(_turns(leaf, first)),
        tools=[lookup] if leaf.calls else [],
        **kw,
    )


def build(node: Node, prefix: str = "n") -> Any:
    """The agent of ``node`` (a fresh definition each call, as a fresh worker builds it)."""
    if node.leaf is not None:
        return _llm(node.leaf)
    parts = [build(part, f"{prefix}{i}") for i, part in enumerate(node.parts)]
    keyed = [(f"{prefix}k{i}", agent) for i, agent in enumerate(parts)]
    match node.kind:
        case "sequential":
            return SequentialAgent(f"{prefix}seq", children=tuple(keyed))
        case "parallel":
            return ParallelAgent(f"{prefix}par", children=tuple(keyed))
        case "loop":
            return LoopAgent(f"{prefix}loop", "", 1, children=tuple(keyed))
        case "graph":
            builder = GraphAgent.builder().name(f"{prefix}graph").description("")
            for key, agent in keyed:
                builder = builder.node(key, agent)
            for (a, _), (b, _) in itertools.pairwise(keyed):
                builder = builder.edge(a, b)
            return builder.build()
        case "handoff":
            target = SequentialAgent(f"{prefix}desk", children=tuple(keyed))
            router = Leaf(f"{prefix}router", "unused", (), 0.0)
            first = call_tools((f"transfer_to_{target.name}", {}))
            return LlmAgent(
                name=router.name,
                model=MockModel([first]),
                handoffs=[Handoff.to(target)],
            )
        case "swarm":  # a handoff chain through its members; the last one answers
            names = [f"{prefix}s{i}" for i in range(len(node.parts))]
            builder = SwarmAgent.builder().name(f"{prefix}swarm").description("")
            for i, part in enumerate(node.parts):
                assert part.leaf is not None
                handing = [call_tools((f"transfer_to_{names[i + 1]}", {}))] if i + 1 < len(names) else None
                builder = builder.member(_llm(part.leaf, names[i], handing[0] if handing else None))
            return builder.entry(names[0]).max_handoffs(len(names)).build()
        case _:  # "tool": a caller using each part as a tool, one call each
            helpers = [AgentAsTool(agent, name=f"ask_{key}", description="Ask.") for key, agent in keyed]
            calls = [(f"t{i}", helper.name, {"input": "help"}) for i, helper in enumerate(helpers)]
            return LlmAgent(
                name=f"{prefix}caller",
                model=MockModel(
                    [call_tools(*calls, usage=Usage(1, 1)), say("caller done", usage=Usage(1, 1))]
                ),
                tools=helpers,
            )


def context(session: MemorySession | None = None, approvals: str = "") -> RunContext[None]:
    """The run's context; with ``approvals``, every tool call asks a human:
    ``"handler"`` answers in-process (yes), ``"suspend"`` suspends the run."""
    ctx = RunContext.ephemeral(None).with_session(session).with_extra_secrets([SECRET])
    if approvals:
        ctx = ctx.with_permission_policy(lambda c, t, a: AskUser("May I?"))
    if approvals == "handler":
        ctx = ctx.with_approval_handler(lambda request: Allow())
    if approvals == "suspend":
        ctx = ctx.with_suspend_on_approval()
    return ctx


def run(agent: Any, ctx: RunContext[None], interpreter: Any) -> list[Any]:
    """Every event of a run (a loop that never escalates fails: that is an outcome too)."""

    async def go() -> list[Any]:
        return [e async for e in agent.run(ctx, "go", interpreter=interpreter)]

    return trio.run(go)


def in_process(node: Node, approvals: str) -> tuple[list[Any], Trace, tuple[Any, ...]]:
    session = MemorySession()
    recorder = RecordingInterpreter(LiveInterpreter("r"))
    events = run(build(node), context(session, "handler" if approvals else ""), recorder)
    return events, recorder.trace, trio.run(session.snapshot)


def one_effect_per_job(node: Node, mode: str) -> tuple[list[Any], Usage, Trace]:
    """The run driven one effect per job (waves performed whole), recorded:
    the recorder stands for the trace store every job appends to; a
    suspension's answer is recorded as a step of its own."""
    recorder = RecordingInterpreter(LiveInterpreter("r"))
    outcome = start(build(node), "go", run_id="r", ctx=context(approvals=mode), recorder=recorder)
    stored, events = dump_state(outcome.state), list(outcome.events)
    carried: Any = None
    while not isinstance(outcome.effect, Terminate):
        agent, ctx = build(node), context(approvals=mode)  # a fresh worker
        state = load_state(stored)
        # An effect that starts tool steps is performed by the job whose step
        # asked for it: the stored state marks them started (issue 36).
        effect = pending(agent, state, ctx=ctx) if carried is None else carried
        if isinstance(effect, AwaitApproval):  # the human's job: approve each call it names
            event(f"suspended with {len(effect.requests)} request(s)")
            live: tuple[Any, ...] = ()
            result: Any = ApprovalsGiven(tuple(r.decide(True) for r in effect.requests))
        else:
            live, result = trio.run(
                lambda a=agent, e=effect, c=ctx: perform(a, e, c, run_id="r", interpreter=recorder)
            )
        outcome = advance(agent, state, result, ctx=ctx, recorder=recorder)
        stored = dump_state(outcome.state)
        events += [*live, *outcome.events]
        asked = outcome.effect
        carried = None if asked == pending(agent, outcome.state, ctx=ctx) else asked
    end = events[-1]
    assert isinstance(end, RunCompleted | RunFailed)
    return events, end.usage, Trace.from_bytes(recorder.trace.to_bytes())


@scaled(0.6, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # >= 300 in ci
@given(trees(), st.sampled_from(["", "handler", "suspend"]))
def test_a_random_tree_driven_one_effect_per_job_equals_one_in_process_run(
    node: Node, approvals: str
) -> None:
    for kind in ("swarm", "tool", "handoff", "parallel"):
        if f"kind='{kind}'" in repr(node):
            event(f"has a {kind}")
    reference, trace, history = in_process(node, approvals)
    events, usage, job_trace = one_effect_per_job(node, approvals)

    assert usage == reference[-1].usage
    assert events[-1] == reference[-1]  # the end
    if isinstance(reference[-1], RunCompleted):
        assert events[-2] == reference[-2]  # the final output (a failed run's last
        # message is whichever branch happened to end last)
    # Waves are not lock-step in process (each branch moves on as its own
    # step is answered) and whole in the job run; a suspended question
    # waits at a barrier until every other branch waits too, where the
    # handler answered it at once. Branches interleave differently; every
    # member says the same things in the same order.
    assert per_path(events) == per_path(reference)
    for data in (trace.to_bytes(), job_trace.to_bytes()):
        assert SECRET.encode() not in data
    for item in history:  # the session holds the root's conversation, redacted
        assert SECRET not in repr(item)
    replay = ReplayInterpreter(Trace.from_bytes(trace.to_bytes()))
    assert run(build(node), context(approvals="handler" if approvals else ""), replay) == reference
    # The job run's recording, suspensions and their answers included,
    # replays strictly from its bytes as one run.
    job_replay = ReplayInterpreter(job_trace)
    assert run(build(node), context(approvals=approvals), job_replay) == events
