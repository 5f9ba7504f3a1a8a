"""Agent trees for the suspend/resume tests, and the script a fresh process runs.

The models answer from the request alone (stateless), so a fresh process
rebuilds the same agents and the run goes on where the state says.

``python resume_tree.py KIND STATE_FILE [APPROVE]`` loads the state, resumes
the run (answering a pending approval with APPROVE = yes/no) and prints each
event as a JSON line.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from helikon import LlmAgent, RunContext, load_state, pending, tool
from helikon.cancel import CancellationToken
from helikon.codec import to_json
from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval
from helikon.events import AgentEvent
from helikon.governance import AskUser
from helikon.items import ToolResult
from helikon.model import (
    Finish,
    FinishReason,
    ModelCapabilities,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
)
from helikon.workflows import Handoff, ParallelAgent, SequentialAgent

ran: list[str] = []


class Scripted:
    """A stateless model: ``steps[n]`` answers the request that holds ``n``
    tool results, handoffs' aside (a tool call ``(name, args)`` or a final text)."""

    provider = "test"
    capabilities = ModelCapabilities.all()

    def __init__(self, name: str, *steps: Any) -> None:
        self.model_id = f"scripted-{name}"
        self.steps = steps

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        done = sum(
            1 for m in request.messages if isinstance(m, ToolResult) and not m.name.startswith("transfer_to_")
        )
        step = self.steps[min(done, len(self.steps) - 1)]

        async def stream() -> AsyncIterator[ModelEvent]:
            if isinstance(step, tuple):
                name, args = step
                yield ToolCallChunk(0, f"call-{name}-{done}", name, args)
                yield Finish(FinishReason.TOOL_CALLS)
            else:
                yield TextChunk(step)
                yield Finish(FinishReason.STOP)

        return stream()


# Idempotent (keyed by its call id): a state stored after its call was
# started resumes by running it again with the same call id (issue 36), so a
# run resumed after any step gives the uninterrupted run's events.
@tool(idempotent=True)
async def refund(amount: int) -> str:
    """Refund money.

    Args:
        amount: dollars.
    """
    ran.append(f"refund {amount}")
    return f"refunded ${amount}"


def agents(kind: str) -> Any:
    billing = LlmAgent(
        name="billing",
        description="Refunds.",
        model=Scripted("billing", ("refund", '{"amount": 5}'), "Refunded $5."),
        tools=[refund],
    )
    if kind == "handoff":
        triage = LlmAgent(
            name="triage",
            model=Scripted("triage", ("transfer_to_billing", "{}"), "unused"),
            handoffs=[Handoff.to(billing)],
        )
        return triage
    notes = LlmAgent(name="notes", description="Notes.", model=Scripted("notes", "Noted."))
    if kind == "sequential":
        return SequentialAgent("desk", "Notes, then billing.").then(notes).then(billing)
    return ParallelAgent("desk", "Both at once.").add(notes).add(billing)


def context(approvals: bool) -> RunContext[None]:
    ctx = RunContext.ephemeral(None)
    if approvals:
        ctx = ctx.with_permission_policy(lambda c, t, a: AskUser("Refund?")).with_suspend_on_approval()
    return ctx


async def _resume(kind: str, state_file: str, approve: str) -> None:
    agent = agents(kind)
    ctx = context(approve != "")
    state = load_state(Path(state_file).read_bytes())
    answer = None
    effect = pending(agent, state, ctx=ctx)
    if isinstance(effect, AwaitApproval):
        answer = ApprovalsGiven(
            tuple(ApprovalDecision(r.call_id, approve == "yes", "no thanks") for r in effect.requests)
        )
    async for event in agent.resume(ctx, state, answer):
        sys.stdout.buffer.write(to_json(event, AgentEvent) + b"\n")
    sys.stdout.buffer.write(b'{"ran": ' + str(len(ran)).encode() + b"}\n")


if __name__ == "__main__":
    trio.run(_resume, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
