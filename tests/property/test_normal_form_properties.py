"""The normal form at the boundary, as properties (issue 26).

- Whatever a tool or a hook may return (junk included: nested tuples and
  sets, NaN, lone surrogates, non-string keys, objects of any type) either
  enters the core in normal form or is refused with a named error: never a
  crash, and a run that met it still writes a trace and a snapshot that read
  back equal.
- A snapshot and a trace written from any reachable state load back equal.
"""

from __future__ import annotations

import enum
import inspect
import math
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import callbacks_for, governed, instructions_fn, run_ids, scaled, scripts, tools_for

from helikon import NormalFormError, normal_form
from helikon._normal import is_normal
from helikon.effects import AwaitApproval, Effect, EffectResult, ToolRaised, ToolReturned
from helikon.errors import ToolCrashed
from helikon.events import AgentEvent, ToolOutputItem
from helikon.governance import Replace, ReplaceInput, ReplaceOutput
from helikon.ids import CallId, RunId
from helikon.interpreters import TestInterpreter
from helikon.interpreters._perform import tool_returned
from helikon.items import AgentInput
from helikon.loop import AgentSpec, start, transition
from helikon.model import ToolDef
from helikon.snapshots import dump_state, load_state
from helikon.testing import call_tools, say
from helikon.testing.strategies import agent_specs
from helikon.trace import Trace, TraceHeader, TraceStep, fingerprint

#: ``from_type(object)`` makes coroutines too (Hypothesis drops some unseen).
pytestmark = pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")

# -- junk --------------------------------------------------------------------------------


class Mood(enum.Enum):
    CALM = "calm"


class Opaque:
    """An object with no JSON form."""

    def __repr__(self) -> str:
        return "Opaque()"


#: Text of any code point, lone surrogates included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)

hashable_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities included
    any_text,
    st.binary(max_size=3),
    st.sampled_from([Mood.CALM]),
)
def _closed(value: object) -> object:
    """A generated coroutine, closed (so it is not reported as never awaited)."""
    if inspect.iscoroutine(value):
        value.close()
    return value


leaves = st.one_of(hashable_leaves, st.builds(Opaque), st.from_type(object).map(_closed))
hashables = st.recursive(
    hashable_leaves, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
keys = st.one_of(any_text, any_text, st.integers(), st.none(), st.tuples(any_text))

#: Anything a tool or a hook may answer.
junk = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=12,
)


def assert_normal(value: object) -> None:
    assert is_normal(value)
    assert normal_form(value) == value  # idempotent
    assert msgspec.json.decode(msgspec.json.encode(value)) == value  # a trip through JSON changes nothing


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(junk)
def test_any_value_enters_in_normal_form_or_is_refused_with_a_named_error(value: object) -> None:
    try:
        out = normal_form(value)
    except NormalFormError as exc:
        assert exc.path.startswith("$") and exc.reason
        return
    assert_normal(out)
    assert normal_form(value) == out  # the same value, the same form (set order included)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(junk)
def test_a_tool_output_is_normal_data_or_a_tool_failure_and_a_hook_answer_normal_or_refused(
    value: object,
) -> None:
    result = tool_returned(CallId("c1"), value, "t")
    if isinstance(result, ToolReturned):
        assert_normal(result.output)
    else:
        assert isinstance(result, ToolRaised) and isinstance(result.failure, ToolCrashed)
        assert result.failure.message.startswith("tool 't' returned a value with no JSON form: $")
    for decision in (ReplaceInput, ReplaceOutput, Replace):
        try:
            built = decision(value)
        except NormalFormError:
            continue
        assert_normal(attrs_value(built))


def attrs_value(decision: Any) -> Any:
    return decision.args if hasattr(decision, "args") else decision.output


JUNK_SPEC = AgentSpec("junk", tools=(ToolDef("t", "returns junk", {"type": "object"}),))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(junk)
def test_a_run_whose_tool_returns_junk_ends_and_reads_back_from_its_bytes(value: object) -> None:
    # An awaitable answer is an async tool, which the synchronous test
    # interpreter refuses by name (a StepError), not junk to fold.
    assume(not inspect.isawaitable(value))
    answer: Any = value
    interpreter = TestInterpreter([call_tools(("t", {})), say("done")], tools={"t": lambda args: answer})
    states, steps, events = drive(JUNK_SPEC, interpreter, RunId("r"))

    outputs = [e.item for e in events if isinstance(e, ToolOutputItem)]
    assert len(outputs) == 1
    for state in states:
        assert load_state(dump_state(state)) == state
    trace = as_trace(JUNK_SPEC, RunId("r"), steps, events)
    assert Trace.from_bytes(trace.to_bytes()) == trace


# -- reachable states --------------------------------------------------------------------


def drive(
    spec: AgentSpec, interpreter: TestInterpreter, run_id: RunId, text: str = "go"
) -> tuple[list[Any], list[tuple[Effect, EffectResult, tuple[AgentEvent, ...]]], list[AgentEvent]]:
    """Every state a scripted run passes through, its steps and its events."""
    outcome = start(spec, AgentInput.from_user_text(text), run_id)
    states = [outcome.state]
    steps: list[tuple[Effect, EffectResult, tuple[AgentEvent, ...]]] = []
    events: list[AgentEvent] = list(outcome.events)
    pending = list(outcome.events)
    while type(outcome.effect).__name__ != "Terminate" and not isinstance(outcome.effect, AwaitApproval):
        live: list[AgentEvent] = []
        result = interpreter.perform(outcome.effect, live)
        steps.append((outcome.effect, result, (*pending, *live)))
        outcome = transition(outcome.state, result, spec).unwrap()
        states.append(outcome.state)
        pending = list(outcome.events)
        events += [*live, *outcome.events]
    steps.append((outcome.effect, outcome.effect, tuple(pending)))  # type: ignore[arg-type]
    return states, steps, events


def as_trace(
    spec: AgentSpec,
    run_id: RunId,
    steps: list[tuple[Effect, EffectResult, tuple[AgentEvent, ...]]],
    events: list[AgentEvent],
) -> Trace:
    header = TraceHeader(spec.name, run_id, fingerprint(spec), AgentInput.from_user_text("go").items)
    recorded = tuple(TraceStep(i, e, r, ev) for i, (e, r, ev) in enumerate(steps[:-1]))
    return Trace(header, recorded, steps[-1][2])


@st.composite
def scripted_runs(draw: st.DrawFn) -> tuple[AgentSpec, TestInterpreter, RunId]:
    spec = draw(governed(agent_specs()), label="spec")
    interpreter = TestInterpreter(
        model=draw(scripts(spec), label="scripts"),
        tools=draw(tools_for(spec), label="tools"),
        instructions=instructions_fn,
        **draw(callbacks_for(spec), label="callbacks"),
    )
    return spec, interpreter, draw(run_ids())


@scaled(0.5)
@given(scripted_runs())
def test_a_snapshot_and_a_trace_of_any_reachable_state_load_back_equal(run: Any) -> None:
    spec, interpreter, run_id = run
    states, steps, events = drive(spec, interpreter, run_id)

    for state in states:
        assert load_state(dump_state(state)) == state
    trace = as_trace(spec, run_id, steps, events)
    back = Trace.from_bytes(trace.to_bytes())
    assert back == trace
    assert back.to_bytes() == trace.to_bytes()


def test_nan_is_refused_where_msgspec_would_write_null() -> None:
    assert msgspec.json.encode(math.nan) == b"null"  # why the normal form must refuse it
    try:
        normal_form([math.nan])
    except NormalFormError as exc:
        assert exc.path == "$[0]"
    else:
        raise AssertionError("NaN entered the core")
