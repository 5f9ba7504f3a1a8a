"""The public step API: drive a run one effect at a time.

``start`` gives the first :class:`~helikon.loop.Outcome` of a run;
``advance`` feeds the pending effect's result and gives the next. Every
shipped interpreter is built on these two, and so can yours: perform
``outcome.effect`` however you like, feed its result back, stop when the
effect is :class:`~helikon.effects.Terminate`.
"""

from __future__ import annotations

from typing import Any

from returns.result import Failure, Success

from helikon.effects import EffectResult
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, RunState, start as _start, transition


def _spec_of(agent: Any) -> AgentSpec:
    if isinstance(agent, AgentSpec):
        return agent
    spec = getattr(agent, "spec", None)
    if not isinstance(spec, AgentSpec):
        raise TypeError(f"expected an agent or an AgentSpec, got {type(agent).__name__}")
    return spec


def start(agent: Any, input: AgentInput | str, *, run_id: str) -> Outcome:
    """Begin a run of ``agent`` (an LlmAgent or AgentSpec) on ``input``."""
    from helikon.ids import RunId

    if isinstance(input, str):
        input = AgentInput.from_user_text(input)
    return _start(_spec_of(agent), input, RunId(run_id))


def advance(agent: Any, state: RunState, result: EffectResult) -> Outcome:
    """Feed ``result`` (the pending effect's result) and get the next outcome.

    Raises:
        StepError: ``result`` does not answer the pending effect, or the run
            is already over.
    """
    match transition(state, result, _spec_of(agent)):
        case Success(outcome):
            return outcome  # type: ignore[no-any-return]
        case Failure(error):
            raise error
    raise AssertionError("unreachable")


__all__ = ["advance", "start"]
