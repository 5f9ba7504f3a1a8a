"""``LlmAgent``: an agent driven by a model, as a definition object.

An :class:`LlmAgent` holds what defines the agent: its name, model,
instructions, tools, settings, output type and run config. It derives the
pure :class:`~helikon.loop.AgentSpec` the machine sees once, at
construction. ``agent.run(ctx, input)`` hands it, with the run context, to
an interpreter (the live one unless told otherwise) and streams the events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from helikon.config import RunConfig
from helikon.context import RunContext
from helikon.errors import ConfigError
from helikon.events import AgentEvent
from helikon.items import AgentInput
from helikon.loop import AgentSpec, Outcome, OutputSchema, RunState
from helikon.model import ModelSettings, ToolDef
from helikon.protocols import Model, Tool

Ctx = TypeVar("Ctx")

#: Instructions: static text, or a function of the run context (sync or async).
Instructions = str | Callable[[RunContext[Any]], Any] | None


def _as_tools(items: Iterable[Tool | Callable[..., Any]]) -> tuple[Tool, ...]:
    from helikon.tools import tools

    return tools(*items)


def output_schema_for(output_type: type) -> OutputSchema:
    """The named JSON Schema of a structured output type."""
    from helikon.tools import type_schema

    schema = type_schema(output_type)
    title = schema.get("title")
    return OutputSchema(title if isinstance(title, str) and title else "StructuredOutput", schema)


@attrs.frozen(eq=False)
class LlmAgent(Generic[Ctx]):
    """An agent: a model that answers, calling tools until it is done.

    Args:
        name: the agent's name (shown in events and traces).
        model: the model (anything implementing :class:`~helikon.protocols.Model`).
        instructions: system instructions: text, or a function of the run
            context rendered before each model turn.
        description: what the agent does (for handoffs and agent-as-tool).
        tools: tools or plain functions (decorated with defaults).
        settings: model settings for every call.
        output_type: a class (attrs, msgspec Struct, dataclass, TypedDict)
            the final answer must match; ``collect_typed`` returns one.
        config: the run limits (``run(config=...)`` overrides them).
    """

    name: str
    model: Model
    instructions: Instructions = None
    description: str = ""
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_as_tools)
    settings: ModelSettings = ModelSettings()
    output_type: type | None = None
    config: RunConfig = RunConfig()
    spec: AgentSpec = attrs.field(init=False, repr=False)
    tool_map: Mapping[str, Tool] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("an agent needs a non-empty name")
        if not callable(getattr(self.model, "invoke", None)):
            raise ConfigError(f"agent {self.name!r}: model {self.model!r} has no invoke() method")
        tool_map: dict[str, Tool] = {}
        for tool in self.tools:
            if tool.name in tool_map:
                raise ConfigError(f"agent {self.name!r} has two tools named {tool.name!r}")
            tool_map[tool.name] = tool
        instructions = self.instructions
        if instructions is not None and not isinstance(instructions, str) and not callable(instructions):
            raise ConfigError(f"agent {self.name!r}: instructions must be text or a function")
        spec = AgentSpec(
            name=self.name,
            instructions=instructions if isinstance(instructions, str) else None,
            dynamic_instructions=callable(instructions),
            tools=tuple(
                ToolDef(t.name, t.description, t.parameters, t.output_schema, t.effect) for t in self.tools
            ),
            settings=self.settings,
            output=output_schema_for(self.output_type) if self.output_type is not None else None,
            config=self.config,
            model_id=getattr(self.model, "model_id", ""),
        )
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "tool_map", tool_map)

    def run(
        self,
        ctx: RunContext[Ctx] | None,
        input: AgentInput | str,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent: an async iterator of its events.

        Args:
            ctx: the run context (``None`` means ``RunContext.ephemeral(None)``).
            input: the user's text or an :class:`~helikon.items.AgentInput`.
            config: overrides the agent's run config for this run.
            interpreter: performs the effects; the live interpreter by default.
        """
        from helikon.interpreters import LiveInterpreter

        if isinstance(input, str):
            input = AgentInput.from_user_text(input)
        elif not isinstance(input, AgentInput):
            raise TypeError(f"input must be a str or AgentInput, not {type(input).__name__}")
        spec = self.spec if config is None else attrs.evolve(self.spec, config=config)
        return _run(self, spec, ctx or RunContext.ephemeral(None), input, interpreter or LiveInterpreter())

    def resume(
        self,
        ctx: RunContext[Ctx] | None,
        state: RunState,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
    ) -> AsyncIterator[AgentEvent]:
        """Continue a run from a saved ``state`` (see :mod:`helikon.snapshots`).

        The run picks up at the state's pending effect and emits the events
        that follow it. The agent must be the one that produced the state.

        Raises:
            StepError: the state cannot be resumed (a reserved phase).
        """
        from helikon.interpreters import LiveInterpreter
        from helikon.loop import resume

        spec = self.spec if config is None else attrs.evolve(self.spec, config=config)
        first = resume(state, spec).alt(_raise).unwrap()
        interp = interpreter or LiveInterpreter(state.run_id)
        return _run(self, spec, ctx or RunContext.ephemeral(None), AgentInput(()), interp, first)

    def with_tools(self, *tools: Tool | Callable[..., Any]) -> LlmAgent[Ctx]:
        return attrs.evolve(self, tools=tools)

    def with_instructions(self, instructions: Instructions) -> LlmAgent[Ctx]:
        return attrs.evolve(self, instructions=instructions)

    def with_model(self, model: Model) -> LlmAgent[Ctx]:
        return attrs.evolve(self, model=model)

    def with_settings(self, settings: ModelSettings) -> LlmAgent[Ctx]:
        return attrs.evolve(self, settings=settings)

    def with_output_type(self, output_type: type | None) -> LlmAgent[Ctx]:
        return attrs.evolve(self, output_type=output_type)

    def with_config(self, config: RunConfig) -> LlmAgent[Ctx]:
        return attrs.evolve(self, config=config)


def _raise(error: Exception) -> Any:
    raise error


async def _run(
    agent: LlmAgent[Any],
    spec: AgentSpec,
    ctx: RunContext[Any],
    input: AgentInput,
    interpreter: Any,
    first: Outcome | None = None,
) -> AsyncIterator[AgentEvent]:
    from helikon.interpreters import RunEnv, drive

    deadline = None
    if spec.config.timeout is not None:
        import anyio

        deadline = anyio.current_time() + spec.config.timeout
    instructions = agent.instructions if callable(agent.instructions) else None
    env = RunEnv(spec, agent.model, agent.tool_map, instructions, ctx, interpreter.new_run_id(), deadline)
    async for event in drive(interpreter, env, input, first):
        yield event


__all__ = ["Instructions", "LlmAgent", "output_schema_for"]
