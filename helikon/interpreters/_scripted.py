"""A synchronous, in-memory interpreter for tests.

:class:`TestInterpreter` drives the pure machine with scripted model turns
and plain Python tool functions, with no event loop at all. It streams the
same raw deltas as the live interpreter (through the same
:func:`~helikon.loop.delta_event`), so a scripted run's events match a live
run's for the same effect results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import final

import attrs
from returns.result import Failure, Success

from helikon._json import JsonObject, JsonValue
from helikon.effects import (
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    Handoff,
    InstructionsRendered,
    ModelCallFailed,
    ModelResponded,
    RenderInstructions,
    RunAgents,
    RunHooks,
    Terminate,
    ToolOutcome,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import ModelError, OtherModelFailure, StepError, ToolCrashed, ToolError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters._governed import tool_output_text
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, RunState, delta_event, parse_json, start, transition
from helikon.model import ModelEvent

#: A scripted tool: JSON arguments in, a JSON-compatible value out.
ToolFn = Callable[[JsonObject], JsonValue]


@attrs.frozen
class Step:
    """One performed effect and the result fed back."""

    effect: Effect
    result: EffectResult


@attrs.frozen
class ScriptedRun:
    """What a scripted run produced."""

    events: tuple[AgentEvent, ...]
    state: RunState
    steps: tuple[Step, ...]


@final
class TestInterpreter:
    """Runs an agent spec synchronously against scripts.

    Args:
        model: one list of model events per model call, in order; a
            :class:`~helikon.errors.ModelError` in a list fails the call there.
        tools: tool functions by name, called with the parsed arguments; a
            :class:`~helikon.errors.ToolError` becomes a tool failure, any
            other exception a crashed tool.
        instructions: renders dynamic instructions for a turn number.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        model: Iterable[Sequence[ModelEvent | ModelError | object]] = (),
        tools: Mapping[str, ToolFn] | None = None,
        instructions: Callable[[int], str] | None = None,
    ) -> None:
        self.scripts = [list(s) for s in model]
        self.tools = dict(tools or {})
        self.instructions = instructions

    def run(self, spec: AgentSpec, input: AgentInput | str, run_id: str = "run-1") -> ScriptedRun:
        """Run to a terminal state and return the events and steps."""
        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        return self.resume(spec, start(spec, input, RunId(run_id)))

    def resume(self, spec: AgentSpec, outcome: Outcome) -> ScriptedRun:
        """Continue from ``outcome`` (for instance a reloaded state's)."""
        events: list[AgentEvent] = list(outcome.events)
        steps: list[Step] = []
        while type(outcome.effect) is not Terminate:
            result = self.perform(outcome.effect, events)
            steps.append(Step(outcome.effect, result))
            match transition(outcome.state, result, spec):
                case Success(nxt):
                    outcome = nxt
                case Failure(error):
                    raise error
            events.extend(outcome.events)
        return ScriptedRun(tuple(events), outcome.state, tuple(steps))

    def perform(self, effect: Effect, emit: list[AgentEvent]) -> EffectResult:
        """Perform one effect, appending live events to ``emit``."""
        match effect:
            case CallModel():
                return self._call_model(emit)
            case ExecuteTools(calls=calls):
                return ToolsExecuted(tuple(self._run_tool(c.call_id, c.name, c.arguments) for c in calls))
            case RenderInstructions(turn=turn):
                if self.instructions is None:
                    raise StepError("no instructions function was given")
                return InstructionsRendered(self.instructions(turn))
            case Handoff() | RunAgents() | CheckGuardrails() | RunHooks() | AwaitApproval() | Terminate():
                raise StepError(f"the test interpreter cannot perform {type(effect).__name__}")

    def _call_model(self, emit: list[AgentEvent]) -> EffectResult:
        if not self.scripts:
            return ModelCallFailed(OtherModelFailure("the model script ran out"))
        streamed: list[ModelEvent] = []
        for item in self.scripts.pop(0):
            if isinstance(item, ModelError):
                return ModelCallFailed(item.failure, tuple(streamed))
            event: ModelEvent = item  # type: ignore[assignment]
            streamed.append(event)
            delta = delta_event(event)
            if delta is not None:
                emit.append(delta)
        return ModelResponded(tuple(streamed))

    def _run_tool(self, call_id: str, name: str, arguments: str) -> ToolOutcome:
        from helikon.ids import CallId

        cid = CallId(call_id)
        fn = self.tools.get(name)
        if fn is None:
            return ToolRaised(cid, ToolCrashed(f"tool {name!r} has no implementation"))
        args, _ = parse_json(arguments or "{}")
        try:
            return ToolReturned(cid, tool_output_text(fn(args if isinstance(args, dict) else {})))
        except ToolError as exc:
            return ToolRaised(cid, exc.failure)
        except Exception as exc:
            return ToolRaised(cid, ToolCrashed(f"{type(exc).__name__}: {exc}"))


__all__ = ["ScriptedRun", "Step", "TestInterpreter", "ToolFn"]
