"""Sequential + parallel: research three angles at once, then write a brief.

``ParallelAgent`` runs its branches concurrently; each branch's final text
goes to ``ctx.state[branch]`` and the parallel step's output is a sorted-key
JSON object of all of them. ``SequentialAgent`` then runs the writer, whose
*dynamic instructions* (a function of the run context) read those state
entries. Scripted models make it runnable anywhere:
``python examples/research_pipeline.py``.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

from helikon import (
    AgentUpdated,
    LlmAgent,
    MessageOutput,
    ParallelAgent,
    RunCompleted,
    RunContext,
    RunFailed,
    SequentialAgent,
)
from helikon.items import text_of
from helikon.testing import MockModel, say


def researcher(name: str, finding: str) -> LlmAgent[None]:
    return LlmAgent(
        name=name, model=MockModel([say(finding)]), instructions=f"Research {name} for the user's question."
    )


def brief_instructions(ctx: RunContext[Any]) -> str:
    """Rendered before each of the writer's model turns, from what research left in state."""
    notes = "\n".join(f"- {key}: {ctx.state.get(key, '(missing)')}" for key in ("rates", "housing", "jobs"))
    return f"Write a three-sentence brief for a first-time buyer from these notes:\n{notes}"


research = (
    ParallelAgent("research", "Three independent research angles.")
    .branch("rates", researcher("rates", "Mortgage rates eased to 6.1% in December."))
    .branch("housing", researcher("housing", "Median prices are flat year over year."))
    .branch("jobs", researcher("jobs", "Local unemployment is steady at 3.9%."))
)
BRIEF = "Rates are easing and prices are flat, so buyers gain leverage. Jobs look steady. Get pre-approved."
writer_model = MockModel([say(BRIEF)])
writer = LlmAgent(name="writer", model=writer_model, instructions=brief_instructions)
pipeline = SequentialAgent("research-then-write", "Research, then draft.").then(research).then(writer)


async def main() -> int:
    ctx = RunContext.ephemeral(None)
    async for event in pipeline.run(ctx, "Is this a good time to buy a home?"):
        match event:
            case AgentUpdated(agent=agent):
                print(f"[{agent}]")
            case MessageOutput(item=message):
                print(f"  {message.agent}: {text_of(message.content)}")
            case RunCompleted():
                print("[done]")
            case RunFailed(error=error):
                print(f"[run failed: {error}]", file=sys.stderr)
                return 1
    print("\nthe writer's instructions, rendered from ctx.state:")
    print(writer_model.requests[0].instructions)
    print("\nstate['research'] =", ctx.state["research"])
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
