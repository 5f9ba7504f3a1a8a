"""Agent trees suspend and resume like single agents: dumped at any step
boundary, resumed in a fresh process, the events are the uninterrupted run's;
an approval needed inside a child suspends the whole run, which resumes there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from helikon import AgentEvent, Allow, AskUser, Deny, advance, dump_state, perform, start
from helikon.agents import TreeState
from helikon.codec import from_json
from helikon.effects import AwaitApproval, Terminate
from helikon.interpreters import LiveInterpreter

sys.path.insert(0, str(Path(__file__).parent))
import resume_tree
from resume_tree import agents, context

from tests.property.strategies import per_path

SCRIPT = Path(__file__).parent / "resume_tree.py"

pytestmark = pytest.mark.integration


def uninterrupted(kind: str, approvals: bool = False, approve: bool = True) -> list[AgentEvent]:
    """The run in one go; with ``approvals``, the same question answered in-process."""
    ctx = context(False)
    if approvals:
        ctx = ctx.with_permission_policy(lambda c, t, a: AskUser("Refund?"))
        ctx = ctx.with_approval_handler(lambda r: Allow() if approve else Deny("no thanks"))

    async def go() -> list[AgentEvent]:
        return [e async for e in agents(kind).run(ctx, "refund me", interpreter=LiveInterpreter("r"))]

    return trio.run(go)


def stepped(kind: str, stop_after: int | None, approvals: bool = False) -> tuple[list[AgentEvent], Any]:
    """Step a run until ``stop_after`` steps (or a suspension); its events and outcome."""
    agent, ctx = agents(kind), context(approvals)
    outcome = start(agent, "refund me", run_id="r", ctx=ctx)
    events: list[AgentEvent] = list(outcome.events)
    count = 0
    while not isinstance(outcome.effect, Terminate | AwaitApproval) and count != stop_after:
        live, result = trio.run(lambda e=outcome.effect: perform(agent, e, ctx, run_id="r"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
        events += [*live, *outcome.events]
        count += 1
    return events, outcome


def resumed(kind: str, state: Any, tmp_path: Path, approve: str = "") -> tuple[list[AgentEvent], int]:
    state_file = tmp_path / "run.state"
    state_file.write_bytes(dump_state(state))
    lines = subprocess.run(
        [sys.executable, str(SCRIPT), kind, str(state_file), approve], capture_output=True, check=True
    ).stdout.splitlines()
    ran = json.loads(lines[-1])["ran"]
    return [from_json(line, AgentEvent) for line in lines[:-1]], ran


def boundaries(kind: str) -> int:
    count = 0
    agent, ctx = agents(kind), context(False)
    outcome = start(agent, "refund me", run_id="r", ctx=ctx)
    while not isinstance(outcome.effect, Terminate):
        _, result = trio.run(lambda e=outcome.effect: perform(agent, e, ctx, run_id="r"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
        count += 1
    return count


@pytest.mark.parametrize(
    ("kind", "stop_after"),
    [(kind, n) for kind in ("sequential", "handoff") for n in range(boundaries(kind) + 1)],
)
def test_a_tree_resumes_in_a_fresh_process_after_any_step(kind: str, stop_after: int, tmp_path: Path) -> None:
    events, outcome = stepped(kind, stop_after)
    if isinstance(outcome.effect, Terminate):
        assert events == uninterrupted(kind)
        return
    assert isinstance(outcome.state, TreeState)
    after, _ = resumed(kind, outcome.state, tmp_path)

    assert events + after == uninterrupted(kind)
    assert type(after[-1]).__name__ == "RunCompleted"


@pytest.mark.parametrize("kind", ["handoff", "parallel"])
@pytest.mark.parametrize("approve", ["yes", "no"])
def test_an_approval_inside_a_child_suspends_the_run_and_resumes_there(
    kind: str, approve: str, tmp_path: Path
) -> None:
    resume_tree.ran.clear()
    events, outcome = stepped(kind, None, approvals=True)
    assert isinstance(outcome.effect, AwaitApproval)
    (request,) = outcome.effect.requests
    assert request.tool == "refund"
    assert resume_tree.ran == []  # nothing ran before the human decided

    after, ran = resumed(kind, outcome.state, tmp_path, approve)

    assert ran == (1 if approve == "yes" else 0)
    assert type(after[-1]).__name__ == "RunCompleted"
    # The suspended branch waited at the barrier; the in-process run's branches
    # moved on as their own steps were answered: each member says the same.
    reference = uninterrupted(kind, approvals=True, approve=approve == "yes")
    assert per_path(events + after) == per_path(reference)
    assert (events + after)[-2:] == reference[-2:]
