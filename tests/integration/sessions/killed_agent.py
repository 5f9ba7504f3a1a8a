"""A child process for ``test_sessions_killed.py``: one turn of a chat whose
session is SQLite, appending each session event as soon as it happens.

Usage: ``python killed_agent.py DB SESSION_ID MODE BACKEND`` where MODE is

- ``greet``: the agent answers "Hello!" and the process exits;
- ``hang``: the agent calls two tools, one of which prints ``IN_TOOL`` and
  then sleeps for an hour (the parent kills the process there);
- ``resume``: the agent answers from the history it loaded, and the process
  prints the model's request as JSON and exits.

It drives :class:`~helikon.sessions.SessionRecorder` by hand, appending after
every event, as a runner that persists incrementally would.
"""

from __future__ import annotations

import sys

import anyio

from helikon import AgentInput, LlmAgent, tool
from helikon.codec import to_json
from helikon.items import Item, user_text
from helikon.sessions import SessionRecorder, SqliteSession, load_history, now_ms, persist_run
from helikon.testing import MockModel, call_tools, say


@tool
async def quick_lookup(query: str) -> str:
    """Look something up at once.

    Args:
        query: what to look up.
    """
    return f"quick answer to {query}"


@tool
async def slow_lookup(query: str) -> str:
    """Look something up, slowly.

    Args:
        query: what to look up.
    """
    print("IN_TOOL", flush=True)
    await anyio.sleep(3600)
    return "never"


SCRIPTS = {
    "greet": ("hi", [say("Hello!")]),
    "hang": (
        "find x",
        [
            call_tools(
                ("call-quick", "quick_lookup", {"query": "x"}),
                ("call-slow", "slow_lookup", {"query": "x"}),
                text="Looking it up.",
            ),
            say("never reached"),
        ],
    ),
    "resume": ("are you there?", [say("Yes; the lookup was interrupted.")]),
}


async def main(path: str, session_id: str, mode: str) -> None:
    text, scripts = SCRIPTS[mode]
    model = MockModel(scripts)
    agent: LlmAgent[None] = LlmAgent(name="researcher", model=model, tools=[quick_lookup, slow_lookup])
    async with SqliteSession.open(path, session_id) as session:
        history = await load_history(session)
        recorder = SessionRecorder([user_text(text)], clock=now_ms, agent=agent.name)
        await session.append(recorder.take())
        async for event in agent.run(None, AgentInput((*history, user_text(text)))):
            recorder.observe(event)
            pending = recorder.take()
            if pending:
                await session.append(pending)
        await persist_run(session, recorder)
    if mode == "resume":
        print(to_json(model.requests[0].messages, tuple[Item, ...]).decode(), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], backend=sys.argv[4])
