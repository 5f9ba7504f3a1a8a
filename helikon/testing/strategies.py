"""Hypothesis strategies for helikon's carriers, agents and model turns.

Use them in your own property tests::

    from hypothesis import given
    from helikon.testing.strategies import agent_specs, turn_plans

It owns generation only; nothing here decides anything the core decides.
JSON, names and argument schemas come from ``_json_strategies`` (generated
JSON is what a real wire carries; "matching" and "violating" arguments are
true by construction), tools and model turns (:class:`TurnPlan`) from
``_turn_strategies``; this module adds model failures, agent specs and
:func:`carriers`, which generates any carrier type, and re-exports them all.

This module imports ``hypothesis`` and is only imported explicitly.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from decimal import Decimal
from functools import cache
from typing import Any, Final

import attrs
from hypothesis import strategies as st

from helikon._deprecated import deprecated_names
from helikon.config import RunConfig
from helikon.effects import ApprovalRequest, RunInterrupted
from helikon.errors import (
    Cancelled,
    ContextLengthExceeded,
    ModelError,
    ModelFailure,
    OtherModelFailure,
    RateLimited,
    Refused,
    TimedOut,
    ToolError,
    TransportFailure,
    Unavailable,
)
from helikon.items import AgentInput, AssistantMessage, Item, SystemMessage, ToolCall, ToolResult, UserMessage
from helikon.loop import AgentSpec, Conversation, HandoffSpec, OutputSchema, handoff_slug
from helikon.model import JsonSchema, ModelSettings, ToolDef
from helikon.testing._json_strategies import (
    arg_schemas,
    json_objects,
    json_scalars,
    json_values,
    malformed_json,
    matching_args,
    non_matching_args,
    provider_call_ids,
    run_ids,
    tool_names,
)
from helikon.testing._turn_strategies import (
    CallKind,
    Keying,
    PlannedCall,
    ScriptedTool,
    TurnPlan,
    final_answers,
    hook_decisions,
    model_turns,
    policy_decisions,
    step_results,
    tool_def_lists,
    tool_defs,
    tool_failures,
    tool_fns,
    tool_outcomes,
    tool_return_values,
    turn_plans,
    usages,
)

# -- model failures ----------------------------------------------------------


@cache
def model_failures() -> st.SearchStrategy[ModelFailure]:
    """Why a model call failed, one of every kind."""
    message = st.text(max_size=12)
    return st.one_of(
        st.builds(Unavailable, message),
        st.builds(RateLimited, message, st.none() | st.integers(0, 60_000)),
        st.builds(ContextLengthExceeded, message),
        st.builds(Refused, message),
        st.builds(TransportFailure, message),
        st.builds(OtherModelFailure, message, st.none() | st.integers(400, 599)),
    )


def model_errors() -> st.SearchStrategy[ModelError]:
    """A :class:`ModelError` a model (or a script) raises."""
    return model_failures().map(ModelError)


def interruptions() -> st.SearchStrategy[RunInterrupted]:
    """A run interrupted by cancellation or a timeout."""
    return st.one_of(
        st.just(RunInterrupted(Cancelled())),
        st.floats(0.001, 3600.0).map(lambda s: RunInterrupted(TimedOut(s))),
    )


# -- agents ------------------------------------------------------------------


def output_schemas() -> st.SearchStrategy[OutputSchema]:
    """A structured-output schema (an :func:`arg_schemas` object)."""
    return st.builds(OutputSchema, name=tool_names(), schema=arg_schemas(max_properties=3))


def run_configs(max_turns: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[RunConfig]:
    """A valid :class:`RunConfig` (few turns, so limits are reached)."""
    return st.builds(
        RunConfig,
        max_turns=max_turns if max_turns is not None else st.integers(1, 6),
        parallel_tool_call_limit=st.none() | st.integers(1, 4),
        max_agent_depth=st.integers(1, 8),
        timeout=st.none() | st.floats(0.1, 600.0),
    )


def model_settings() -> st.SearchStrategy[ModelSettings]:
    """Model settings, mostly defaults."""
    return st.one_of(
        st.just(ModelSettings()),
        st.builds(
            ModelSettings,
            temperature=st.none() | st.floats(0.0, 2.0),
            top_p=st.none() | st.floats(0.0, 1.0),
            max_output_tokens=st.none() | st.integers(1, 4096),
        ),
    )


def handoff_specs() -> st.SearchStrategy[HandoffSpec]:
    """A handoff to another agent, its transfer tool named by :func:`handoff_slug`."""
    return st.builds(_handoff, tool_names(), st.text(max_size=10))


def _handoff(target: str, description: str) -> HandoffSpec:
    return HandoffSpec(handoff_slug(target), target, description)


@st.composite
def _agent_specs(
    draw: st.DrawFn,
    tools: st.SearchStrategy[tuple[ToolDef, ...]],
    output: st.SearchStrategy[OutputSchema | None],
    dynamic_instructions: st.SearchStrategy[bool],
    config: st.SearchStrategy[RunConfig],
    handoffs: st.SearchStrategy[tuple[HandoffSpec, ...]],
    governance: st.SearchStrategy[bool],
) -> AgentSpec:
    own = draw(tools)
    taken = {t.name for t in own}
    return AgentSpec(
        name=draw(tool_names()),
        instructions=draw(st.none() | st.text(max_size=20)),
        dynamic_instructions=draw(dynamic_instructions),
        tools=own,
        settings=draw(model_settings()),
        output=draw(output),
        config=draw(config),
        model_id=draw(st.text(max_size=8)),
        # A transfer tool never shadows one of the agent's own tools.
        handoffs=tuple(h for h in draw(handoffs) if h.tool_name not in taken),
        input_guardrails=draw(governance),
        output_guardrails=draw(governance),
        hooks=draw(governance),
    )


def agent_specs(
    *,
    tools: st.SearchStrategy[tuple[ToolDef, ...]] | None = None,
    output: st.SearchStrategy[OutputSchema | None] | None = None,
    dynamic_instructions: st.SearchStrategy[bool] | None = None,
    config: st.SearchStrategy[RunConfig] | None = None,
    handoffs: st.SearchStrategy[tuple[HandoffSpec, ...]] | None = None,
    governance: st.SearchStrategy[bool] | None = None,
) -> st.SearchStrategy[AgentSpec]:
    """An :class:`AgentSpec`; each keyword overrides one part's strategy.

    By default there are no handoffs and no guardrails or hooks (``governance``
    draws each of ``input_guardrails``, ``output_guardrails`` and ``hooks``),
    so the specs run under :class:`~helikon.testing.TestInterpreter`.
    """
    return _agent_specs(
        tools if tools is not None else tool_def_lists(),
        output if output is not None else st.none() | output_schemas(),
        dynamic_instructions if dynamic_instructions is not None else st.booleans(),
        config if config is not None else run_configs(),
        handoffs if handoffs is not None else st.just(()),
        governance if governance is not None else st.just(False),
    )


def handoff_lists(max_size: int = 2) -> st.SearchStrategy[tuple[HandoffSpec, ...]]:
    """A tuple of handoffs with distinct transfer tools."""
    return st.lists(handoff_specs(), max_size=max_size, unique_by=lambda h: h.tool_name).map(tuple)


def agent_inputs() -> st.SearchStrategy[AgentInput]:
    """A run's input: one user message, or a short history of messages."""
    messages = st.one_of(carriers(UserMessage), carriers(SystemMessage), carriers(AssistantMessage))
    return st.one_of(
        st.text(max_size=20).map(AgentInput.from_user_text),
        st.lists(messages, min_size=1, max_size=3).map(AgentInput.from_items),
    )


# -- any carrier -------------------------------------------------------------

_SCALARS: Final[dict[object, st.SearchStrategy[Any]]] = {
    int: st.one_of(st.integers(0, 8), st.integers(0, 2**40)),
    float: st.floats(0.0, 1e9),
    bool: st.booleans(),
    str: st.text(max_size=10),
    type(None): st.none(),
    # Money: finite and non-negative, as prices and limits are.
    Decimal: st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False, allow_infinity=False),
}


def _union_members(tp: object) -> tuple[object, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return ()


@st.composite
def _with_aligned_calls(draw: st.DrawFn, tp: type, fields: dict[str, st.SearchStrategy[Any]]) -> Any:
    # A phase holding ``calls`` and ``prefilled`` keeps them aligned, and one
    # holding ``pending`` approvals waits on exactly the calls not yet answered.
    calls = draw(st.lists(carriers(ToolCall), max_size=3, unique_by=lambda c: c.call_id))
    prefilled = [
        ToolResult(c.call_id, c.name, draw(st.text(max_size=10)), is_error=True)
        if draw(st.booleans())
        else None
        for c in calls
    ]
    values = {name: draw(strategy) for name, strategy in fields.items() if name not in ("calls", "prefilled")}
    if "pending" in fields:
        values["pending"] = tuple(
            ApprovalRequest(c.call_id, c.name, c.arguments, draw(st.text(max_size=10)))
            for c, p in zip(calls, prefilled, strict=True)
            if p is None
        )
    return tp(calls=tuple(calls), prefilled=tuple(prefilled), **values)


@cache
def _overrides() -> dict[object, st.SearchStrategy[Any]]:
    # Carriers whose fields have constraints their types do not say.
    return {
        RunConfig: run_configs(),
        AgentSpec: agent_specs(handoffs=handoff_lists(), governance=st.booleans()),
        ToolDef: tool_defs(),
        OutputSchema: output_schemas(),
        JsonSchema: st.builds(JsonSchema, tool_names(), arg_schemas(max_properties=2), st.booleans()),
    }


def _deferred(tp: object) -> st.SearchStrategy[Any]:
    # Deferred, so recursive and mutually recursive carriers resolve lazily.
    return st.deferred(lambda: _resolve(tp))


@cache
def _resolve(tp: object) -> st.SearchStrategy[Any]:
    overrides = _overrides()
    if tp in overrides:
        return overrides[tp]
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is Conversation:
        return _resolve(tuple[Item, ...]).map(Conversation)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:  # a NewType
        return _resolve(supertype)
    members = _union_members(tp)
    if members and {type(None), bool, int, float, str} <= set(members):
        return json_values(max_leaves=4)
    if members:
        return st.one_of([_deferred(m) for m in members])
    origin = typing.get_origin(tp)
    if origin is tuple:
        item, *rest = typing.get_args(tp)
        if rest != [Ellipsis]:  # a fixed tuple: (key, text), say
            return st.tuples(*(_deferred(arg) for arg in typing.get_args(tp)))
        return st.lists(_deferred(item), max_size=3).map(tuple)
    if origin is Sequence:  # a request's messages: a tuple, or a run's conversation
        (item,) = typing.get_args(tp)
        tuples = st.lists(_deferred(item), max_size=3).map(tuple)
        return st.one_of(tuples, tuples.map(Conversation)) if item == Item else tuples
    if origin is Mapping or origin is dict:
        return json_objects(max_leaves=4)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(tp)
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        fields = {f.name: _deferred(hints[f.name]) for f in attrs.fields(tp)}
        if "calls" in fields and "prefilled" in fields:
            return _with_aligned_calls(tp, fields)
        return st.builds(tp, **fields)
    raise TypeError(f"carriers() cannot generate {tp!r}")


def carriers(tp: object) -> st.SearchStrategy[Any]:
    """Values of any helikon carrier type or union (events, effects, results,
    states, items, failures), every field filled, numbers bounded so values
    survive JSON.

    >>> from helikon.events import AgentEvent
    >>> strategy = carriers(AgentEvent)
    """
    return _resolve(tp)


def _tool_errors() -> st.SearchStrategy[ToolError]:
    """A :class:`ToolError` a tool function raises (the deprecated ``tool_errors``)."""
    return tool_failures().map(ToolError)


__getattr__ = deprecated_names(
    __name__, {"tool_errors": (lambda: _tool_errors, "nothing used it; use tool_failures().map(ToolError)")}
)

__all__ = [
    "CallKind",
    "Keying",
    "PlannedCall",
    "ScriptedTool",
    "TurnPlan",
    "agent_inputs",
    "agent_specs",
    "arg_schemas",
    "carriers",
    "final_answers",
    "handoff_lists",
    "handoff_specs",
    "interruptions",
    "json_objects",
    "json_scalars",
    "json_values",
    "malformed_json",
    "matching_args",
    "model_errors",
    "model_failures",
    "model_settings",
    "model_turns",
    "non_matching_args",
    "output_schemas",
    "provider_call_ids",
    "run_configs",
    "run_ids",
    "tool_def_lists",
    "tool_defs",
    "tool_failures",
    "tool_fns",
    "tool_names",
    "tool_outcomes",
    "hook_decisions",
    "policy_decisions",
    "step_results",
    "tool_return_values",
    "turn_plans",
    "usages",
]
