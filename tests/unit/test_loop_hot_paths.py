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
