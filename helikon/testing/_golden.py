"""Golden traces: a committed recording is a regression test.

:class:`GoldenTraces` replays a trace file against an agent and fails at the
first difference (:class:`~helikon.interpreters.ReplayDivergence`); in
record mode it runs the agent through the live interpreter instead and
(re)writes the file. The pytest plugin exposes it as the ``helikon_golden``
fixture, in record mode under ``pytest --helikon-record`` or
``HELIKON_RECORD=1``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, final

import trio

from helikon.context import RunContext
from helikon.errors import HelikonError
from helikon.events import AgentEvent
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayDivergence, ReplayInterpreter
from helikon.items import AgentInput
from helikon.trace import Trace, without_paths

T = TypeVar("T")

#: How to re-record, when the test's own command line is not known.
RECORD_HINT = "pytest --helikon-record (or HELIKON_RECORD=1 pytest)"


class GoldenTraceMissing(HelikonError):
    """A golden trace file does not exist (and we are not recording)."""


class GoldenMismatch(ReplayDivergence, AssertionError):
    """An agent no longer behaves as its golden trace recorded.

    A :class:`~helikon.interpreters.ReplayDivergence` (``step``,
    ``differences``) whose message also names the golden file and the command
    that re-records it; an ``AssertionError``, so pytest reports a failed
    test, not an error.
    """

    def __init__(self, message: str, step: int, differences: tuple[str, ...], path: Path) -> None:
        super().__init__(message, step, differences)
        self.path = path


def _in_event_loop() -> bool:
    """Whether this thread is inside a running trio or asyncio loop."""
    try:
        trio.lowlevel.current_trio_token()
        return True
    except RuntimeError:
        pass
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def _run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` under trio: here, or, from inside a running event loop (a
    trio or asyncio test), on a thread of its own (the loop waits)."""
    __tracebackhide__ = True
    if not _in_event_loop():
        return trio.run(fn)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="helikon-golden") as pool:
        return pool.submit(trio.run, fn).result()


@final
class GoldenTraces:
    """Check agents against golden traces, or re-record them.

    Args:
        record: run live and write the traces instead of replaying them.
        strict: replay compares whole effects (see ``ReplayInterpreter``).
        live_tools: replay only the model; run tools and dynamic
            instructions for real and fail when one gives another result
            than the recorded one (see ``ReplayInterpreter``).
        record_command: the command that re-records the current test's
            golden, shown in failures (the pytest fixture fills it in).
    """

    def __init__(
        self,
        *,
        record: bool = False,
        strict: bool = True,
        live_tools: bool = False,
        record_command: str = RECORD_HINT,
    ) -> None:
        self.record = record
        self.strict = strict
        self.live_tools = live_tools
        self.record_command = record_command

    async def acheck(
        self,
        agent: Any,
        path: str | Path,
        input: AgentInput | str | None = None,
        ctx: RunContext[Any] | None = None,
        *,
        live_tools: bool | None = None,
    ) -> Trace:
        """Replay (or record) the golden trace at ``path``; returns the trace.

        The ``async`` form of :meth:`check`, for async tests. In replay mode
        ``input`` defaults to the input recorded in the trace;
        ``live_tools`` overrides the instance's setting for this check.

        Raises:
            GoldenTraceMissing: the file does not exist.
            GoldenMismatch: the agent no longer behaves as recorded.
        """
        __tracebackhide__ = True
        target = Path(path)
        if self.record:
            if input is None:
                raise ValueError("recording a golden trace needs the run's input")
            recorder = RecordingInterpreter(LiveInterpreter(f"golden-{target.stem}", lock_step=True))
            async for _ in agent.run(ctx, input, interpreter=recorder):
                pass
            recorder.trace.dump(target)
            return recorder.trace
        if not target.exists():
            raise GoldenTraceMissing(
                f"golden trace {target} does not exist; record it with {self.record_command}, "
                "which runs the agent live (with the model's credentials if it uses a real model)"
            )
        trace = Trace.load(target)
        replayed: list[AgentEvent] = []
        run_input = input if input is not None else AgentInput(trace.header.input)
        live = self.live_tools if live_tools is None else live_tools
        replay = ReplayInterpreter(trace, strict=self.strict, live_tools=live)
        try:
            async for event in agent.run(ctx, run_input, interpreter=replay):
                replayed.append(event)
        except ReplayDivergence as exc:
            raise self._mismatch(target, str(exc), exc.step, exc.differences, live) from None
        events = without_paths(replayed) if trace.pathless else tuple(replayed)
        if events != trace.events:  # the interpreter checks too; belt and braces
            raise self._mismatch(target, "the replayed events differ from the recording", -1, (), live)
        return trace

    def _mismatch(
        self, target: Path, divergence: str, step: int, differences: tuple[str, ...], live: bool
    ) -> GoldenMismatch:
        mode = "live-tools replay" if live else ("strict replay" if self.strict else "loose replay")
        message = (
            f"golden trace {target} no longer matches the agent ({mode}):\n{divergence}\n"
            f"If the change is intended, re-record the golden: {self.record_command}"
        )
        return GoldenMismatch(message, step, differences, target)

    def check(
        self,
        agent: Any,
        path: str | Path,
        input: AgentInput | str | None = None,
        ctx: RunContext[Any] | None = None,
        *,
        live_tools: bool | None = None,
    ) -> Trace:
        """Replay (or record) the golden trace at ``path``, from a sync test or
        from inside a trio or asyncio test (the replay then runs on a thread
        of its own while the test's loop waits; :meth:`acheck` awaits it
        instead). See :meth:`acheck`."""
        __tracebackhide__ = True
        try:
            return _run_async(lambda: self.acheck(agent, path, input, ctx, live_tools=live_tools))
        except (GoldenMismatch, GoldenTraceMissing) as exc:
            raise exc.with_traceback(None) from None


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to 1 (or true/yes)."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes"}


__all__ = ["GoldenMismatch", "GoldenTraceMissing", "GoldenTraces", "RECORD_HINT", "env_flag"]
