"""A forced ``tool_choice`` holds until the forced tool was called, then the
model chooses (so an agent that forces a tool can answer); ``keep=True`` keeps
it forced. The loop decides it, so every provider gets the same requests."""

from __future__ import annotations

import pytest

from helikon import LlmAgent, RunConfig, run_sync, tool
from helikon.errors import RunError
from helikon.model import ModelSettings, ToolChoice, ToolChoiceNamed, ToolChoiceRequired
from helikon.testing import MockModel, call_tools, say


@tool
async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: sunny"


@tool
async def other(x: int) -> int:
    """Another tool.

    Args:
        x: a number.
    """
    return x


def _agent(model: MockModel, choice: ToolChoice) -> LlmAgent[None]:
    return LlmAgent(
        name="forcing",
        model=model,
        tools=[lookup, other],
        settings=ModelSettings(tool_choice=choice),
        config=RunConfig(max_turns=4),
    )


@pytest.mark.parametrize("choice", [ToolChoiceRequired(), ToolChoiceNamed("lookup")])
def test_a_forced_choice_applies_until_the_forced_tool_was_called(choice: ToolChoice) -> None:
    model = MockModel([call_tools(("lookup", {"city": "Oslo"})), say("Oslo is sunny.")])
    result = run_sync(_agent(model, choice), "Weather in Oslo?")
    assert result.final_output == "Oslo is sunny."
    assert model.requests[0].settings.tool_choice == choice
    assert model.requests[1].settings.tool_choice is None


def test_a_named_choice_stays_until_that_tool_is_called() -> None:
    model = MockModel(
        [
            call_tools(("other", {"x": 1})),
            call_tools(("lookup", {"city": "Oslo"})),
            say("done"),
        ]
    )
    result = run_sync(_agent(model, ToolChoiceNamed("lookup")), "Go")
    assert result.final_output == "done"
    assert [r.settings.tool_choice for r in model.requests] == [
        ToolChoiceNamed("lookup"),
        ToolChoiceNamed("lookup"),
        None,
    ]


def test_keep_forces_every_turn() -> None:
    choice = ToolChoiceRequired(keep=True)
    model = MockModel([call_tools(("lookup", {"city": "Oslo"}))] * 4)
    with pytest.raises(RunError, match="turns"):
        run_sync(_agent(model, choice), "Go")
    assert all(r.settings.tool_choice == choice for r in model.requests)


def test_the_choice_is_forced_again_in_the_next_run() -> None:
    model = MockModel(
        [
            call_tools(("lookup", {"city": "Oslo"})),
            say("sunny"),
            call_tools(("lookup", {"city": "Rome"})),
            say("also sunny"),
        ]
    )
    agent = _agent(model, ToolChoiceRequired())
    run_sync(agent, "Oslo?")
    run_sync(agent, "Rome?")
    assert [r.settings.tool_choice for r in model.requests] == [
        ToolChoiceRequired(),
        None,
        ToolChoiceRequired(),
        None,
    ]
