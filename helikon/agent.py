"""``LlmAgent``: an agent driven by a model, as a definition object.

An :class:`LlmAgent` holds what defines the agent: its name, model,
instructions, tools, settings, output type and run config. It derives the
pure :class:`~helikon.loop.AgentSpec` the machine sees once, at
construction. ``agent.run(ctx, input)`` hands it, with the run context, to
an interpreter (the live one unless told otherwise) and streams the events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing
from typing import Any, Generic, TypeVar

import attrs

from helikon._stream import RunEvents, Steps
from helikon.agents import TreeState, resume_tree, started_steps_known
from helikon.config import RunConfig
from helikon.context import Actions, RunContext
from helikon.effects import EffectResult
from helikon.errors import ConfigError, RunSuspended, StepError
from helikon.events import AgentEvent
from helikon.ids import RunId
from helikon.interpreters import LiveInterpreter
from helikon.interpreters._drive import drive_batches
from helikon.interpreters._env import Limits, RunEnv, build_env, inherit
from helikon.interpreters._machine import LoopMachine, TreeMachine
from helikon.interpreters._recording import tree_of
from helikon.interpreters._tree_env import compose
from helikon.items import AgentInput
from helikon.loop import AgentSpec, HandoffSpec, OutputSchema, RunState, handoff_slug, resume, schema_problem
from helikon.model import ModelSettings, ToolDef
from helikon.protocols import Model, Tool, ToolSource
from helikon.sessions import SessionRecorder, load_history, now_ms, persist_run
from helikon.tools import tools, type_schema
from helikon.trace import fingerprint

Ctx = TypeVar("Ctx")

#: Instructions: static text, or a function of the run context (sync or async).
Instructions = str | Callable[[RunContext[Any]], Any] | None


def _as_tools(items: Iterable[Tool | Callable[..., Any]]) -> tuple[Tool, ...]:
    return tools(*items)


def as_tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    """A typed ``tuple`` converter (``converter=tuple`` confuses type checkers)."""
    return tuple(items)


def output_schema_for(output_type: type) -> OutputSchema:
    """The named JSON Schema of a structured output type."""
    schema = type_schema(output_type)
    title = schema.get("title")
    return OutputSchema(title if isinstance(title, str) and title else "StructuredOutput", schema)


def _check_schemas(agent: str, tool: Tool) -> None:
    """A tool's schemas must be usable (so checking arguments against them
    can never fail inside the machine): refused here, naming the tool and
    the place in the schema."""
    for label, schema in (("parameters", tool.parameters), ("output_schema", tool.output_schema)):
        if schema is None and label == "output_schema":
            continue
        problem = schema_problem(schema)
        if problem is not None:
            raise ConfigError(
                f"agent {agent!r}: tool {tool.name!r} has an unusable {label} schema: {problem}"
            )


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
        handoffs: agents the model may hand the conversation to
            (:class:`~helikon.workflows.Handoff`), one ``transfer_to_<slug>``
            tool each.
        hooks: the agent's own hooks, ``(ctx, event) -> HookDecision | None``;
            they fire before the run context's.
        input_guardrails: checks of the user's text before the first turn.
        output_guardrails: checks of the final answer before the run completes.
        tool_sources: :class:`~helikon.protocols.ToolSource` objects (an MCP
            server handle, ...) whose tools join ``tools`` when the agent is
            resolved: ``await agent.resolved()``, or the start of ``run``.
        mcp_servers: the book's name for more tool sources (resolved after
            ``tool_sources``).
        output_schema: a named JSON Schema the final answer must match, for
            an output declared as a schema rather than a class (``output_type``
            wins when both are given).
    """

    name: str
    model: Model
    instructions: Instructions = None
    description: str = ""
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_as_tools)
    settings: ModelSettings = ModelSettings()
    output_type: type | None = None
    config: RunConfig = RunConfig()
    handoffs: tuple[Any, ...] = attrs.field(default=(), converter=as_tuple)
    hooks: tuple[Any, ...] = attrs.field(default=(), converter=as_tuple)
    input_guardrails: tuple[Any, ...] = attrs.field(default=(), converter=as_tuple)
    output_guardrails: tuple[Any, ...] = attrs.field(default=(), converter=as_tuple)
    tool_sources: tuple[ToolSource, ...] = attrs.field(default=(), converter=as_tuple)
    mcp_servers: tuple[ToolSource, ...] = attrs.field(default=(), converter=as_tuple)
    output_schema: OutputSchema | None = None
    spec: AgentSpec = attrs.field(init=False, repr=False)
    tool_map: Mapping[str, Tool] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("an agent needs a non-empty name")
        if not callable(getattr(self.model, "invoke", None)):
            raise ConfigError(f"agent {self.name!r}: model {self.model!r} has no invoke() method")
        check_settings = getattr(self.model, "check_settings", None)
        if callable(check_settings):
            try:
                check_settings(self.settings)
            except ConfigError as error:
                raise ConfigError(f"agent {self.name!r}: {error}") from None
        for source in (*self.tool_sources, *self.mcp_servers):
            if not callable(getattr(source, "resolve_tools", None)):
                raise ConfigError(f"agent {self.name!r}: {source!r} is not a tool source (no resolve_tools)")
        tool_map: dict[str, Tool] = {}
        for tool in self.tools:
            if tool.name in tool_map:
                raise ConfigError(f"agent {self.name!r} has two tools named {tool.name!r}")
            _check_schemas(self.name, tool)
            tool_map[tool.name] = tool
        instructions = self.instructions
        if instructions is not None and not isinstance(instructions, str) and not callable(instructions):
            raise ConfigError(f"agent {self.name!r}: instructions must be text or a function")
        handoff_specs: list[HandoffSpec] = []
        for handoff in self.handoffs:
            if not isinstance(getattr(handoff, "target_name", None), str):
                raise ConfigError(
                    f"agent {self.name!r}: a handoff must be a Handoff, got {type(handoff).__name__} "
                    "(wrap an agent as Handoff.to(agent))"
                )
            slug = handoff_slug(handoff.target_name)
            clash = next((h for h in handoff_specs if h.tool_name == slug), None)
            if clash is not None or slug in tool_map:
                raise ConfigError(
                    f"agent {self.name!r}: handoffs to {handoff.target_name!r} and "
                    f"{clash.target if clash else slug!r} both become the tool {slug!r}"
                )
            handoff_specs.append(HandoffSpec(slug, handoff.target_name, handoff.description))
        spec = AgentSpec(
            name=self.name,
            instructions=instructions if isinstance(instructions, str) else None,
            dynamic_instructions=callable(instructions),
            tools=tuple(
                ToolDef(t.name, t.description, t.parameters, t.output_schema, t.effect) for t in self.tools
            ),
            settings=self.settings,
            output=(
                output_schema_for(self.output_type) if self.output_type is not None else self.output_schema
            ),
            config=self.config,
            model_id=getattr(self.model, "model_id", ""),
            handoffs=tuple(handoff_specs),
            description=self.description,
            idempotent_tools=tuple(t.name for t in self.tools if getattr(t, "idempotent", False) is True),
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
        run_id: str | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the agent: an async generator of its events.

        Iterate it (``async for``); close it to stop the run early
        (``aclose()``, or ``async with contextlib.aclosing(agent.run(...))``).
        The events come a step's worth at a time under the hood
        (:func:`~helikon.results.collect` takes them so), one by one to
        ``async for``; a model's text deltas come as they stream.

        Args:
            ctx: the run context (``None`` means ``RunContext.ephemeral(None)``).
            input: the user's text or an :class:`~helikon.items.AgentInput`.
            config: overrides the agent's run config for this run.
            interpreter: performs the effects; the live interpreter by default.
            run_id: the run's id (as the step API's ``start`` takes one); by
                default the interpreter makes a fresh one.
        """
        if self.tool_sources or self.mcp_servers:
            return _run_resolved(self, ctx, input, config, interpreter, run_id)
        return run_agent(self, ctx, input, config=config, interpreter=interpreter, run_id=run_id)

    async def resolved(self) -> LlmAgent[Ctx]:
        """This agent with its tool sources' tools merged into ``tools``.

        Each source's ``resolve_tools()`` is awaited in order (``tool_sources``
        then ``mcp_servers``); the returned agent has the agent's own tools
        followed by the sources' and no sources left.

        Raises:
            ConfigError: two tools (local or from any source) share a name,
                or a source returned something that is not a tool.
            Exception: whatever a source raises (an MCP handle that cannot
                connect raises :class:`helikon.mcp.McpError`).
        """
        owners = {tool.name: "the agent's own tools" for tool in self.tools}
        found: list[Tool] = []
        check_settings = getattr(self.model, "check_settings", None)
        if callable(check_settings):
            try:
                check_settings(self.settings)
            except ConfigError as error:
                raise ConfigError(f"agent {self.name!r}: {error}") from None
        for source in (*self.tool_sources, *self.mcp_servers):
            for tool in await source.resolve_tools():
                if not isinstance(tool, Tool):
                    raise ConfigError(f"agent {self.name!r}: {source!r} gave {tool!r}, which is not a tool")
                if tool.name in owners:
                    raise ConfigError(
                        f"agent {self.name!r}: two tools are named {tool.name!r} (from {owners[tool.name]} "
                        f"and from {source!r}); give an MCP server a tool_prefix to keep them apart"
                    )
                owners[tool.name] = repr(source)
                found.append(tool)
        return attrs.evolve(self, tools=(*self.tools, *found), tool_sources=(), mcp_servers=())

    def resume(
        self,
        ctx: RunContext[Ctx] | None,
        state: RunState,
        answer: EffectResult | None = None,
        *,
        config: RunConfig | None = None,
        interpreter: Any = None,
        allow_changed_definition: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continue a run from a saved ``state`` (see :mod:`helikon.snapshots`).

        The run picks up at the state's pending effect and emits the events
        that follow it. ``answer`` is the pending effect's result when you
        have it already — the human's ``ApprovalsGiven`` for a run suspended
        in ``NeedsApproval``. The agent must be the one that produced the
        state: a state started through the step API records its agent
        definition's fingerprint, and another definition is refused unless
        ``allow_changed_definition`` is true.

        Raises:
            StepError: the state cannot be resumed (a reserved phase, a state
                that does not fit this agent or its conversation, another
                definition), or ``answer`` does not answer its pending effect.
        """
        if self.tool_sources or self.mcp_servers:  # resolve them first, as ``run`` does
            return _resume_resolved(self, ctx, state, answer, config, interpreter, allow_changed_definition)
        return resume_agent(
            self,
            ctx,
            state,
            answer,
            config=config,
            interpreter=interpreter,
            allow_changed_definition=allow_changed_definition,
        )

    def make_env(
        self,
        ctx: RunContext[Any],
        interpreter: Any,
        *,
        run_id: str | None = None,
        path: tuple[str | int, ...] = (),
        actions: Actions | None = None,
        config: RunConfig | None = None,
        parent: Limits | None = None,
    ) -> RunEnv:
        """The world an interpreter needs to run this agent (used by interpreters)."""
        if self.tool_sources or self.mcp_servers:
            raise ConfigError(f"agent {self.name!r} has unresolved tool sources (`await agent.resolved()`)")
        return build_env(
            self.spec,
            ctx,
            run_id=RunId(run_id) if run_id is not None else interpreter.new_run_id(),
            model=self.model,
            tools=self.tool_map,
            instructions=self.instructions if callable(self.instructions) else None,
            hooks=self.hooks,
            input_guardrails=self.input_guardrails,
            output_guardrails=self.output_guardrails,
            config=config,
            parent=parent,
            actions=actions,
            children={h.target_name: h for h in self.handoffs},
            path=path,
        )

    def with_handoffs(self, *handoffs: Any) -> LlmAgent[Ctx]:
        return attrs.evolve(self, handoffs=handoffs)

    def with_tools(self, *tools: Tool | Callable[..., Any]) -> LlmAgent[Ctx]:
        return attrs.evolve(self, tools=tools)

    def with_tool_sources(self, *sources: ToolSource) -> LlmAgent[Ctx]:
        return attrs.evolve(self, tool_sources=sources)

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


def resume_agent(
    agent: Any,
    ctx: RunContext[Any] | None,
    state: Any,
    answer: EffectResult | None = None,
    *,
    config: RunConfig | None = None,
    interpreter: Any = None,
    allow_changed_definition: bool = False,
) -> AsyncGenerator[AgentEvent, None]:
    """``agent.resume(...)`` for any helikon agent (an LLM agent, a workflow, a swarm)."""
    run_ctx: RunContext[Any] = ctx if ctx is not None else RunContext.ephemeral(None)
    interp = run_ctx.tracer.instrument(interpreter or LiveInterpreter(state.run_id))
    # The machine resumes under the run context's governance (the same spec
    # ``agent.run`` and the step API build): an approval answers only the ask
    # step, and the mode and rules still apply after it.
    env = environment(agent, run_ctx, interp, run_id=state.run_id, config=config)
    check_definition(env, state, allow_changed_definition)
    machine = env.machine if env.machine is not None else LoopMachine(env.spec)
    if answer is not None:
        asked = resumed(machine, state).effect
        first = machine.step(state, answer).alt(_raise).unwrap()
        record_answer(interp, env, asked, answer)
    else:
        first = resumed(machine, state)
    return _run(agent, run_ctx, AgentInput(()), interp, config, first, run_id=state.run_id)


def record_answer(interpreter: Any, env: RunEnv, effect: Any, answer: EffectResult) -> None:
    """Tell a recording interpreter (maybe wrapped) the answer to ``effect``,
    which it did not perform (a suspension's): the trace gets its step."""
    while interpreter is not None:
        answered = getattr(interpreter, "answered", None)
        if callable(answered):
            answered(env, effect, answer)
            return
        interpreter = getattr(interpreter, "inner", None)


def _run_resolved(
    agent: LlmAgent[Any],
    ctx: RunContext[Any] | None,
    input: AgentInput | str,
    config: RunConfig | None,
    interpreter: Any,
    run_id: str | None,
) -> RunEvents:
    """``agent.run`` for an agent with tool sources: resolve them, then run."""

    def start(resolved: LlmAgent[Any]) -> AsyncIterator[AgentEvent]:
        return resolved.run(ctx, input, config=config, interpreter=interpreter, run_id=run_id)

    return RunEvents(_resolved(agent, start))


def _resume_resolved(
    agent: LlmAgent[Any],
    ctx: RunContext[Any] | None,
    state: Any,
    answer: EffectResult | None,
    config: RunConfig | None,
    interpreter: Any,
    allow_changed_definition: bool,
) -> RunEvents:
    """``agent.resume`` for an agent with tool sources: resolve them, then resume."""

    def start(resolved: LlmAgent[Any]) -> AsyncIterator[AgentEvent]:
        return resolved.resume(
            ctx,
            state,
            answer,
            config=config,
            interpreter=interpreter,
            allow_changed_definition=allow_changed_definition,
        )

    return RunEvents(_resolved(agent, start))


async def _resolved(
    agent: LlmAgent[Any], start: Callable[[LlmAgent[Any]], AsyncIterator[AgentEvent]]
) -> Steps:
    """The steps of the run ``start`` begins with ``agent`` resolved (its
    tool sources' tools merged in); closing them closes that run."""
    events = start(await agent.resolved())
    # a subclass's own run may give another stream: its events one at a time
    steps = events.batches() if isinstance(events, RunEvents) else events
    async with aclosing(steps):  # type: ignore[type-var]
        async for step in steps:
            yield step


def _raise(error: Exception) -> Any:
    raise error


def run_agent(
    agent: Any,
    ctx: RunContext[Any] | None,
    input: AgentInput | str,
    *,
    config: RunConfig | None = None,
    interpreter: Any = None,
    run_id: str | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """``agent.run(...)`` for any helikon agent (one with ``make_env``)."""
    if isinstance(input, str):
        input = AgentInput.from_user_text(input)
    elif not isinstance(input, AgentInput):
        raise TypeError(f"input must be a str or AgentInput, not {type(input).__name__}")
    run_ctx = ctx or RunContext.ephemeral(None)
    # The context's tracer (if it observes runs) wraps the interpreter.
    interp = run_ctx.tracer.instrument(interpreter or LiveInterpreter())
    return _run(agent, run_ctx, input, interp, config, run_id=run_id)


def environment(agent: Any, ctx: RunContext[Any], interpreter: Any, **kw: Any) -> RunEnv:
    """The environment of a run of ``agent``: ``make_env``, then, for an agent
    with handoffs or children, the agent tree's machine (one place for every
    entry point: ``agent.run``, ``agent.resume``, the step API)."""
    env: RunEnv = agent.make_env(ctx, interpreter, **kw)
    return compose(agent, env, interpreter)


def check_definition(env: RunEnv, state: Any, allow: bool = False) -> None:
    """Refuse to resume ``state`` with another agent definition than the one
    its run was started with (when the state says: see
    :attr:`helikon.loop.RunState.definition`).

    Raises:
        StepError: the fingerprints differ and ``allow`` is false.
    """
    saved = getattr(state, "definition", "")
    owner = state.root.agent if isinstance(state, TreeState) else getattr(state, "agent", None)
    if not saved or allow or owner != env.spec.name:  # another agent's state: the loop says so
        return
    current = fingerprint(env.spec, tree_of(env))
    if saved != current:
        raise StepError(
            f"the state was saved by a run of another definition of agent {env.spec.name!r} "
            f"({saved}, now {current}): its instructions, tools, model, output schema, handoffs or "
            "governance changed. Pass allow_changed_definition=True to resume it anyway"
        )


def resumed(machine: Any, state: Any) -> Any:
    """The outcome that continues a stored ``state`` with ``machine``: its
    pending effect, no events."""
    if isinstance(machine, TreeMachine):
        if not isinstance(state, TreeState):
            raise StepError("this agent runs as an agent tree; the state is a single machine's")
        return resume_tree(started_steps_known(state, machine.spec))
    if isinstance(machine, LoopMachine):
        if not isinstance(state, RunState):
            raise StepError("this agent runs the agent loop; the state is not an agent-loop state")
        return resume(state, machine.spec).alt(_raise).unwrap()
    raise StepError(f"cannot resume a {type(state).__name__} with {type(machine).__name__}")


def _run(
    agent: Any,
    ctx: RunContext[Any],
    input: AgentInput,
    interpreter: Any,
    config: RunConfig | None,
    first: Any = None,
    *,
    run_id: str | None = None,
) -> RunEvents:
    """Drive ``agent`` (anything with ``make_env``) with ``interpreter``: its
    events, one at a time, taken a step at a time from :func:`drive_batches`
    (through :func:`_session_steps` with a session on the context). The run
    starts when its first event is asked for; closing the stream closes
    ``drive_batches`` (a run stopped mid-wave stops its parts at once)."""
    kw: dict[str, Any] = {"config": config} if run_id is None else {"config": config, "run_id": run_id}
    if ctx.session is not None:
        return RunEvents(_session_steps(agent, ctx, input, interpreter, first, kw))

    def start() -> Steps:
        return drive_batches(interpreter, environment(agent, ctx, interpreter, **kw), input, first)

    return RunEvents.starting(start)


async def _session_steps(
    agent: Any,
    ctx: RunContext[Any],
    input: AgentInput,
    interpreter: Any,
    first: Any,
    kw: dict[str, Any],
) -> Steps:
    """:func:`_run`'s events with a session on the context, one at a time.

    A fresh run starts from the session's conversation (a read failure
    raises ``SessionError``) and its events are appended to the session when
    it ends, however it ends (best effort). A resumed run (``first``, under
    the state's ``run_id``) appends what follows its suspension; a run that
    suspends leaves the calls waiting for approval open, for its resumption
    to close. The session records what the caller was given: each event is
    recorded as it goes (a run closed early records what came before).
    """
    session = ctx.session
    assert session is not None
    items = input.items
    if first is None:
        items = (*await load_history(session), *input.items)
    recorder = SessionRecorder(input.items, clock=now_ms, agent=getattr(agent, "name", None))
    env = environment(agent, ctx, interpreter, **kw)
    suspended = False
    try:
        async with aclosing(drive_batches(interpreter, env, AgentInput(items), first)) as batches:
            async for step in batches:
                for event in step if isinstance(step, tuple) else (step,):
                    recorder.observe(event)
                    yield event
    except RunSuspended:
        suspended = True
        raise
    finally:
        await persist_run(session, recorder, keep_open=suspended)


__all__ = [
    "Instructions",
    "Limits",
    "LlmAgent",
    "environment",
    "inherit",
    "output_schema_for",
    "resume_agent",
    "resumed",
    "run_agent",
]
