"""Edge cases of the machine's hot paths (see ``tests/property/test_loop_fast_paths.py``)."""

from __future__ import annotations

from helikon.effects import ModelResponded
from helikon.ids import RunId
from helikon.items import AgentInput
from helikon.loop import AgentSpec
from helikon.loop._table import TABLE, transition
from helikon.loop._transition import start
from helikon.model import Finish, FinishReason, ToolCallChunk, ToolDef, Usage


class _NoJson:
    """A value a schema cannot hold (no JSON form)."""


def test_arguments_that_are_no_json_are_answered_before_the_tool_schema_is_read() -> None:
    # The general rule parses the arguments first and reads the schema only of JSON:
    # so must the hot path (a low-level spec's schema is not checked when it is built).
    spec = AgentSpec("a", tools=(ToolDef("t", "", {"type": "object", "x-extra": _NoJson()}),))
    state = start(spec, AgentInput.from_user_text("hi"), RunId("r")).state
    chunk = ToolCallChunk(0, "c1", "t", '{"a":')
    answer = ModelResponded((chunk, Usage(1, 1), Finish(FinishReason.TOOL_CALLS)))
    slow = TABLE[(type(state.phase), ModelResponded)](state, answer, spec).unwrap()
    fast = transition(state, answer, spec).unwrap()
    assert fast == slow
    assert any(getattr(item, "is_error", False) for item in fast.appended)  # invalid arguments, answered


def test_the_hot_paths_memo_does_not_keep_a_spec_and_its_secrets_alive() -> None:
    # The memo is by identity; it must not hold an agent's spec (its governance
    # secrets among it) after the runs that use it are gone.
    import gc
    import weakref

    from helikon.loop import _hot
    from helikon.loop._spec import Governance

    secret = Governance(secrets=("s3cr3t",))
    spec = AgentSpec("a", tools=(ToolDef("t", "", {"type": "object"}),), governance=secret)
    assert _hot.facts(spec) is _hot.facts(spec)  # memoised
    key, gone = id(spec), weakref.ref(spec)
    gc.disable()  # freed by its count alone, not by the collector
    try:
        del spec
        assert gone() is None
        assert key not in _hot._by_identity
    finally:
        gc.enable()


_NONE_YET = Usage()


def _one_call(events: tuple[object, ...], usage: Usage = _NONE_YET) -> None:
    """The hot path takes ``events`` and gives what the general rule gives."""
    from unittest import mock

    import attrs

    spec = AgentSpec("a", tools=(ToolDef("add", "", {"type": "object"}),))
    state = attrs.evolve(start(spec, AgentInput.from_user_text("hi"), RunId("r")).state, usage=usage)
    answer = ModelResponded(events)  # type: ignore[arg-type]
    slow = TABLE[(type(state.phase), ModelResponded)](state, answer, spec).unwrap()
    general = mock.Mock(side_effect=AssertionError("not the hot path"))
    with mock.patch.dict(TABLE, {(type(state.phase), ModelResponded): general}):  # type: ignore[arg-type]  # the general rule is not run: the hot path answered
        fast = transition(state, answer, spec).unwrap()
    assert fast == slow
    assert repr(fast) == repr(slow)


def test_an_answer_without_usage_takes_the_hot_path() -> None:
    # A model that reports no usage (a replayed run's, a test model's): the
    # answer's usage is ``Usage()``, the run's tokens and cost stay as they are.
    from decimal import Decimal

    chunk = ToolCallChunk(0, "c1", "add", '{"a": 1}')
    _one_call((chunk, Finish(FinishReason.TOOL_CALLS)))
    spent = Usage(2, 3, requests=1, tool_calls=1, cost=Decimal(1))
    _one_call((chunk, Finish(FinishReason.TOOL_CALLS)), spent)
    _one_call((ToolCallChunk(None, None, "add", ""), Finish(FinishReason.TOOL_CALLS, "r1")))


def test_an_answer_with_its_usage_before_the_call_takes_the_hot_path() -> None:
    from decimal import Decimal

    chunk = ToolCallChunk(0, "c1", "add", '{"a": 1}')
    _one_call((Usage(1, 2), chunk, Finish(FinishReason.TOOL_CALLS)), Usage(1, 1, requests=1, cost=Decimal(1)))
    _one_call((chunk, Usage(), Finish(FinishReason.TOOL_CALLS)), Usage(1, 1, requests=1, cost=Decimal(1)))


def test_the_carriers_the_hot_paths_build_raw_have_an_init_that_only_sets_their_fields() -> None:
    # The hot paths set these classes' fields straight into a new instance's
    # ``__dict__``: equivalent to their ``__init__`` only while it does nothing else.
    import attrs

    from helikon.loop._hot import BUILT_RAW
    from helikon.loop._states import RunState

    for cls in BUILT_RAW:
        assert "__slots__" not in cls.__dict__, cls  # a dict class
        assert not hasattr(cls, "__attrs_pre_init__") and not hasattr(cls, "__attrs_post_init__"), cls
        for field in attrs.fields(cls):
            assert field.validator is None, (cls, field.name)
            assert field.init and field.alias == field.name, (cls, field.name)
            if field.converter is not None:  # a conversation given is returned as it is
                assert (cls, field.name) == (RunState, "conversation")
