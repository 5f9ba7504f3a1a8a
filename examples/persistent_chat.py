"""A two-turn chat that survives a process restart, on SQLite.

Run it twice (the database path is optional; it defaults to ./chat.db):

    python examples/persistent_chat.py /tmp/chat.db "My name is Ada."
    python examples/persistent_chat.py /tmp/chat.db "What is my name?"

The second process loads the first turn from the session before it runs
(agent.run loads the session before the run and appends the new events after).
The model here is scripted (MockModel) and answers from what it is sent, so
the example runs offline; swap in OpenAIModel / AnthropicModel for a real one.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import anyio

from helikon import LlmAgent, RunContext, collect
from helikon.cancel import CancellationToken
from helikon.items import UserMessage, text_of
from helikon.model import Finish, FinishReason, ModelCapabilities, ModelEvent, ModelRequest, TextChunk
from helikon.sessions import SqliteSession


class EchoMemoryModel:
    """Answers with what it remembers: the user's earlier messages."""

    capabilities = ModelCapabilities(streaming=True)
    provider = "example"
    model_id = "echo-memory"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        said = [text_of(m.content) for m in request.messages if type(m) is UserMessage]
        return self._stream(f"I remember {len(said) - 1} earlier message(s): {said[:-1]}")

    async def _stream(self, text: str) -> AsyncIterator[ModelEvent]:
        yield TextChunk(text)
        yield Finish(FinishReason.STOP)


async def main(path: str, text: str) -> None:
    async with SqliteSession.open(path, "chat-1") as session:
        ctx = RunContext.ephemeral(None).with_session(session)
        agent = LlmAgent(name="assistant", model=EchoMemoryModel())
        result = await collect(agent.run(ctx, text))
        print(result.final_output)
        print(f"({len(await session.events())} events in the log)")


if __name__ == "__main__":
    args = sys.argv[1:] or ["My name is Ada."]
    path, text = (args[0], args[1]) if len(args) > 1 else ("chat.db", args[0])
    anyio.run(main, path, text)
