"""The run state's append-only conversation (issue 29): it reads, compares and
serialises as the tuple of its items, and successive conversations share
their past instead of copying it."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st

from helikon import codec
from helikon._conversation import CHUNK, EMPTY, Conversation
from helikon.ids import RunId
from helikon.items import Item, user_text
from helikon.loop import CallingModel, RunState
from helikon.snapshots import dump_state, load_state

ITEMS = [user_text(f"m{n}") for n in range(300)]
batches = st.lists(st.lists(st.sampled_from(ITEMS), max_size=CHUNK + 5), max_size=12)


def grown(parts: list[list[Item]]) -> tuple[Conversation, tuple[Item, ...]]:
    conversation, plain = EMPTY, ()
    for part in parts:
        conversation, plain = conversation.append(part), (*plain, *part)
    return conversation, plain


@given(batches)
def test_it_reads_as_the_tuple_of_its_items(parts: list[list[Item]]) -> None:
    conversation, plain = grown(parts)
    assert len(conversation) == len(plain)
    assert tuple(conversation) == plain and list(reversed(conversation)) == list(reversed(plain))
    assert [conversation[i] for i in range(-len(plain), len(plain))] == [*plain, *plain]
    assert conversation[1:-1] == plain[1:-1] and conversation[::3] == plain[::3]
    assert conversation == plain and plain == conversation and (conversation != plain) is False
    assert conversation == Conversation(plain) and hash(conversation) == hash(plain)
    assert all(item in conversation for item in plain)
    assert conversation.items() == plain and conversation.items(ITEMS[0]) == (ITEMS[0], *plain)


@given(batches, st.lists(st.sampled_from(ITEMS), min_size=1, max_size=3))
def test_it_differs_from_a_conversation_with_other_items(parts: list[list[Item]], more: list[Item]) -> None:
    conversation, plain = grown(parts)
    assert conversation.append(more) != conversation
    assert conversation.append(more) != plain


def test_an_index_out_of_range_raises() -> None:
    conversation = Conversation(ITEMS[:3])
    for index in (3, -4, 100):
        try:
            conversation[index]
        except IndexError:
            continue
        raise AssertionError(f"index {index} did not raise")


def test_appending_shares_the_full_chunks_and_leaves_the_original_unchanged() -> None:
    before = Conversation(ITEMS[: 3 * CHUNK + 1])
    after = before.append(ITEMS[:5])
    assert tuple(before) == tuple(ITEMS[: 3 * CHUNK + 1])
    assert all(a is b for a, b in zip(before._chunks, after._chunks, strict=True))
    # the only new objects are the open chunk and the conversation itself
    assert len(after._tail) == 6 and before.append(()) is before


def test_a_long_run_allocates_no_large_tuple_per_step() -> None:
    conversation = EMPTY
    for item in ITEMS * 10:
        conversation = conversation.append((item,))
    largest = max(len(part) for part in (*conversation._chunks, conversation._tail))
    assert largest <= CHUNK and len(conversation._chunks) == len(ITEMS) * 10 // CHUNK
    assert gc.is_tracked(conversation._chunks[0])


@given(batches)
def test_it_is_written_as_the_tuple_of_its_items_is(parts: list[list[Item]]) -> None:
    conversation, plain = grown(parts)
    data = codec.unstructure(conversation)
    assert data == codec.unstructure(plain, tuple[Item, ...])
    assert codec.structure(data, Conversation) == conversation
    assert type(codec.structure(data, Conversation)) is Conversation


@given(batches)
def test_a_snapshot_holds_the_whole_conversation_and_reads_back_equal(parts: list[list[Item]]) -> None:
    conversation, plain = grown(parts)
    state = RunState(RunId("r"), "a", CallingModel(1), conversation)
    snapshot = dump_state(state)
    assert snapshot == dump_state(RunState(RunId("r"), "a", CallingModel(1), plain))
    back = load_state(snapshot)
    assert back == state and type(back.conversation) is Conversation


def test_a_state_made_with_a_tuple_holds_a_conversation() -> None:
    state = RunState(RunId("r"), "a", CallingModel(1), (ITEMS[0],))
    assert type(state.conversation) is Conversation and state.conversation == (ITEMS[0],)
    assert RunState(RunId("r"), "a", CallingModel(1)).conversation == ()


def test_a_model_request_shares_the_run_conversation_and_reads_as_its_tuple() -> None:
    # Issue 29, item 3: the loop's request holds the state's conversation (no
    # copy per turn), yet compares, hashes, pickles and encodes as the tuple.
    import pickle

    from helikon.effects import CallModel
    from helikon.loop import AgentSpec
    from helikon.loop._turns import request
    from helikon.model import ModelRequest

    conversation = EMPTY.append(ITEMS[: CHUNK + 3])
    state = RunState(RunId("r"), "a", CallingModel(1), conversation)
    made = request(state, AgentSpec("a", instructions="Be brief."))
    assert made.messages is state.conversation
    plain = ModelRequest(tuple(ITEMS[: CHUNK + 3]), made.tools, made.settings, made.instructions)
    assert made == plain and plain == made and hash(made) == hash(plain)
    assert pickle.loads(pickle.dumps(made)) == plain
    assert codec.to_json(CallModel(made, 1)) == codec.to_json(CallModel(plain, 1))
    decoded = codec.structure(codec.unstructure(CallModel(made, 1)), CallModel)
    assert type(decoded.request.messages) is tuple and decoded.request == made
