"""``MockModel.position`` reads each conversation once as it grows (issue 29):
the position it finds incrementally is the one a whole read finds, it reads
only what a request adds, and the test models keep a bounded number of requests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast, overload

import anyio
from hypothesis import given
from hypothesis import strategies as st

from helikon.cancel import CancellationToken
from helikon.errors import ModelError
from helikon.ids import CallId
from helikon.items import AssistantMessage, Item, TextPart, ToolCall, ToolResult, system_text, user_text
from helikon.loop import FINALIZE_PROMPT
from helikon.model import ModelRequest
from helikon.testing import FunctionModel, MockModel, call_tools, say
from helikon.testing._mock import _conversation_turns, _this_run

SCRIPTS = [
    call_tools(("add", {"a": 1, "b": 2}), text="Adding."),
    [ModelError.unavailable("busy")],
    call_tools(("add", {"a": 3, "b": 4})),
    say("7"),
    say("again"),
]

#: Items a conversation may grow by: turns scripts made, turns none made,
#: tool results, a run's input, the loop's own prompt, system messages.
PIECES: list[Item] = [
    AssistantMessage((TextPart("Adding."),)),
    ToolCall(CallId("c0"), "add", '{"b": 2, "a": 1}'),
    ToolCall(CallId("c1"), "add", '{"a":3,"b":4}'),
    ToolResult(CallId("c0"), "add", "3"),
    AssistantMessage((TextPart("7"),)),
    AssistantMessage((TextPart("again"),)),
    AssistantMessage((TextPart("not scripted"),)),
    user_text("add"),
    user_text(FINALIZE_PROMPT.format(name="Out")),
    system_text("note"),
]


def whole_read(model: MockModel, messages: Sequence[Item]) -> int:
    """The position from scratch: the reference fold over the whole conversation."""
    turns = _conversation_turns(_this_run(messages))
    if len(turns) <= model._next:
        return model._next
    return max(model._next, model._played(turns))


@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=4), max_size=12), st.integers(0, 3))
def test_the_position_read_as_the_conversation_grows_is_the_whole_reads(
    growth: list[list[Item]], counted: int
) -> None:
    following = MockModel(SCRIPTS)
    following._next = counted
    messages: tuple[Item, ...] = (system_text("be brief"), user_text("add"))
    for more in growth:
        # a fresh system message per request, as the loop prepends one
        messages = (system_text("be brief"), *messages[1:], *more)
        fresh = MockModel(SCRIPTS)
        fresh._next = counted
        expected = whole_read(fresh, messages)
        assert fresh.position(ModelRequest(messages)) == expected
        assert following.position(ModelRequest(messages)) == expected


class Counting(Sequence[Item]):
    """A conversation that records which positions were read."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = tuple(items)
        self.read: set[int] = set()

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            raise AssertionError("the model copies the conversation")
        n = index + len(self.items) if index < 0 else index
        self.read.add(n)
        return self.items[index]

    def __iter__(self) -> Iterator[Item]:
        raise AssertionError("the model iterates the whole conversation")


def test_a_continued_conversation_is_read_only_where_it_is_new() -> None:
    model = MockModel([call_tools(("add", {"a": 1, "b": 2})) for _ in range(1000)])
    items: list[Item] = [system_text("be brief"), user_text("add")]
    for k in range(500):
        items += [
            ToolCall(CallId(f"c{k}"), "add", '{"a": 1, "b": 2}'),
            ToolResult(CallId(f"c{k}"), "add", "3"),
        ]
    first = Counting(items)
    assert model.position(ModelRequest(cast(tuple[Item, ...], first))) == 500
    assert len(first.read) == len(items)  # a conversation it never saw is read whole, once

    items += [ToolCall(CallId("c500"), "add", '{"a": 1, "b": 2}'), ToolResult(CallId("c500"), "add", "3")]
    grown = Counting(items)
    assert model.position(ModelRequest(cast(tuple[Item, ...], grown))) == 501
    new = {len(items) - 2, len(items) - 1}
    # the two new items, and three checks that the conversation is the one it read
    assert new <= grown.read
    assert len(grown.read - new) <= 3


def test_an_edited_conversation_is_read_again() -> None:
    model = MockModel(SCRIPTS)
    add_1 = [AssistantMessage((TextPart("Adding."),)), ToolCall(CallId("c0"), "add", '{"a": 1, "b": 2}')]
    ran = (user_text("add"), *add_1, ToolResult(CallId("c0"), "add", "3"))
    assert model.position(ModelRequest(ran)) == 1
    # the same length, another first turn: not a continuation
    other = (user_text("add"), AssistantMessage((TextPart("no"),)), add_1[1], ran[-1])
    assert model.position(ModelRequest(other)) == whole_read(MockModel(SCRIPTS), other)


def invoke(model: Any, n: int) -> None:
    async def go() -> None:
        for k in range(n):
            async for _ in model.invoke(ModelRequest((user_text(f"{k}"),)), CancellationToken()):
                pass

    anyio.run(go)


def test_the_test_models_keep_the_latest_requests_and_count_every_call() -> None:
    for model in (MockModel([say("hi")] * 250), FunctionModel(lambda request: "hi")):
        invoke(model, 250)
        assert model.calls == 250
        assert len(model.requests) == 100
        assert [r.messages[0] for r in model.requests] == [user_text(f"{k}") for k in range(150, 250)]


def test_keep_requests_none_keeps_every_request_and_zero_none() -> None:
    for keep in (None, 0):
        for model in (
            MockModel([say("hi")] * 150, keep_requests=keep),
            FunctionModel(lambda request: "hi", keep_requests=keep),
        ):
            invoke(model, 150)
            assert model.calls == 150
            assert len(model.requests) == (150 if keep is None else 0)
