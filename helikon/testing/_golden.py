"""Golden traces: a committed recording is a regression test.

:class:`GoldenTraces` replays a trace file against an agent and fails at the
first difference (:class:`~helikon.interpreters.ReplayDivergence`); in
record mode it runs the agent through the live interpreter instead and
(re)writes the file. The pytest plugin exposes it as the ``helikon_golden``
fixture, in record mode under ``pytest --helikon-record`` or
``HELIKON_RECORD=1``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, final

from helikon.context import RunContext
from helikon.errors import HelikonError
from helikon.events import AgentEvent
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter
from helikon.items import AgentInput
from helikon.trace import Trace

T = TypeVar("T")


class GoldenTraceMissing(HelikonError):
    """A golden trace file does not exist (and we are not recording)."""


def _run_async(fn: Callable[[], Awaitable[T]]) -> T:
    import trio

    return trio.run(fn)


@final
class GoldenTraces:
    """Check agents against golden traces, or re-record them.

    Args:
        record: run live and write the traces instead of replaying them.
        strict: replay compares whole effects (see ``ReplayInterpreter``).
    """

    def __init__(self, *, record: bool = False, strict: bool = True) -> None:
        self.record = record
        self.strict = strict

    async def acheck(
        self,
        agent: Any,
        path: str | Path,
        input: AgentInput | str | None = None,
        ctx: RunContext[Any] | None = None,
    ) -> Trace:
        """Replay (or record) the golden trace at ``path``; returns the trace.

        In replay mode ``input`` defaults to the input recorded in the trace.

        Raises:
            GoldenTraceMissing: the file does not exist.
            ReplayDivergence: the agent no longer behaves as recorded.
        """
        target = Path(path)
        if self.record:
            if input is None:
                raise ValueError("recording a golden trace needs the run's input")
            recorder = RecordingInterpreter(LiveInterpreter(f"golden-{target.stem}"))
            async for _ in agent.run(ctx, input, interpreter=recorder):
                pass
            recorder.trace.dump(target)
            return recorder.trace
        if not target.exists():
            raise GoldenTraceMissing(
                f"golden trace {target} does not exist; record it with `pytest --helikon-record` "
                "(or HELIKON_RECORD=1), which runs the agent live and needs the model's credentials"
            )
        trace = Trace.load(target)
        replayed: list[AgentEvent] = []
        run_input = input if input is not None else AgentInput(trace.header.input)
        replay = ReplayInterpreter(trace, strict=self.strict)
        async for event in agent.run(ctx, run_input, interpreter=replay):
            replayed.append(event)
        if tuple(replayed) != trace.events:  # the interpreter checks too; belt and braces
            raise AssertionError(f"replayed events differ from {target}")
        return trace

    def check(
        self,
        agent: Any,
        path: str | Path,
        input: AgentInput | str | None = None,
        ctx: RunContext[Any] | None = None,
    ) -> Trace:
        """:meth:`acheck` from synchronous code (runs under trio)."""
        return _run_async(lambda: self.acheck(agent, path, input, ctx))


__all__ = ["GoldenTraceMissing", "GoldenTraces"]
