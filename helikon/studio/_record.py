"""Every run made through the studio is recorded: its agents are served
wrapped in :class:`Recorded`, which runs the agent under a
:class:`~helikon.interpreters.RecordingInterpreter` around the interpreter
the agent server hands it, and gives the trace to the catalogue when the run
ends (completed, failed, suspended at an approval or cancelled). The trace is
what ``agent.run(..., interpreter=RecordingInterpreter())`` writes: secrets
scrubbed as in every trace.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any, final

from helikon.errors import StepError
from helikon.events import AgentEvent
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.trace import Trace


@final
class Recorded:
    """An agent served by the studio: the same name, description and runs, each recorded."""

    def __init__(self, agent: Any, keep: Callable[[Trace, float], object]) -> None:
        self.agent = agent
        self.name: str = agent.name
        self.description: str = str(getattr(agent, "description", "") or "")
        self._keep = keep

    def run(
        self, ctx: Any, input: Any, *, interpreter: Any = None, **options: Any
    ) -> AsyncIterator[AgentEvent]:
        inner = interpreter if interpreter is not None else LiveInterpreter()
        recorder = RecordingInterpreter(inner)
        return self._recorded(recorder, self.agent.run(ctx, input, interpreter=recorder, **options))

    async def _recorded(
        self, recorder: RecordingInterpreter, stream: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        try:
            async for event in stream:
                yield event
        finally:
            try:
                trace = recorder.trace
            except StepError:  # the run never reached its first step
                pass
            else:
                self._keep(trace, time.time())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)


__all__ = ["Recorded"]
