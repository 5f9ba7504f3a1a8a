"""What the loop knows of an agent's definition: data only.

An :class:`AgentSpec` is the agent as the pure machine sees it: its name,
static instructions (or the fact that they are rendered per turn), tool
definitions, model settings, output schema and run config. Objects with
behaviour (the model, the tool functions, an instructions function) stay
with the interpreter, which the machine reaches through effects.
"""

from __future__ import annotations

import attrs

from helikon._json import JsonObject
from helikon.config import RunConfig
from helikon.model import ModelSettings, ToolDef


@attrs.frozen
class OutputSchema:
    """The structured output an agent must produce: a named JSON Schema."""

    name: str
    schema: JsonObject


@attrs.frozen
class AgentSpec:
    """An agent's definition as data.

    Args:
        name: the agent's name.
        instructions: static system instructions, or None.
        dynamic_instructions: render instructions per turn (a
            ``RenderInstructions`` effect) instead of using ``instructions``.
        tools: the tools the model may call, in declaration order.
        settings: model settings for every call.
        output: the structured output schema, or None for plain text.
        config: the run's limits.
        model_id: the model's id, for trace fingerprints.
    """

    name: str
    instructions: str | None = None
    dynamic_instructions: bool = False
    tools: tuple[ToolDef, ...] = ()
    settings: ModelSettings = ModelSettings()
    output: OutputSchema | None = None
    config: RunConfig = RunConfig()
    model_id: str = ""

    def tool(self, name: str) -> ToolDef | None:
        """The tool called ``name``, or None.

        >>> AgentSpec("a", tools=(ToolDef("t", "", {}),)).tool("t").name
        't'
        """
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


__all__ = ["AgentSpec", "OutputSchema"]
