"""An append-only conversation that successive run states share.

A run's conversation only grows, and every machine step makes a new state.
With a plain tuple each step that adds an item copies the whole
conversation (and the cyclic collector scans each large new tuple), so a
turn late in a long run costs more than an early one. A
:class:`Conversation` is a persistent sequence instead: full chunks of
:data:`CHUNK` items are shared, unchanged, by every later conversation;
appending copies only the open chunk at the end (and, once per
:data:`CHUNK` items, the small tuple of chunk references).

It reads as a tuple of items does (``len``, indexing, slicing, iteration,
``reversed``, ``in``), compares equal to a tuple of the same items, and is
written in a snapshot or trace as the same JSON array.

>>> c = Conversation.of(("a", "b")).append(("c",))
>>> len(c), c[-1], c[1:], c == ("a", "b", "c")
(3, 'c', ('b', 'c'), True)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, Final, SupportsIndex, final, overload

from helikon.items import Item

#: Items per shared chunk (a power of two: an index splits by shift and mask).
CHUNK: Final = 64
_SHIFT: Final = 6
_MASK: Final = CHUNK - 1


@final
class Conversation(Sequence[Item]):
    """An immutable sequence of items that appends without copying its past."""

    __slots__ = ("_chunks", "_size", "_tail")

    _chunks: tuple[tuple[Item, ...], ...]
    _tail: tuple[Item, ...]
    _size: int

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._chunks = ()
        self._tail = ()
        self._size = 0
        self._extend(tuple(items))

    @classmethod
    def of(cls, items: Iterable[Item]) -> Conversation:
        """``items`` as a conversation (a conversation is returned as it is)."""
        if type(items) is Conversation:
            return items
        return cls(items)

    def _extend(self, items: tuple[Item, ...]) -> None:
        tail = self._tail + items if self._tail else items
        if len(tail) >= CHUNK:
            full = len(tail) & ~_MASK
            self._chunks = (*self._chunks, *(tail[at : at + CHUNK] for at in range(0, full, CHUNK)))
            tail = tail[full:]
        self._tail = tail
        self._size += len(items)

    def append(self, items: Iterable[Item]) -> Conversation:
        """A conversation with ``items`` after these (this one is unchanged)."""
        more = tuple(items)
        if not more:
            return self
        grown = Conversation.__new__(Conversation)
        tail = self._tail + more if self._tail else more
        if len(tail) < CHUNK:  # the open chunk grows: the hot path, inline
            grown._chunks = self._chunks
            grown._tail = tail
            grown._size = self._size + len(more)
            return grown
        grown._chunks = self._chunks
        grown._tail = self._tail
        grown._size = self._size
        grown._extend(more)
        return grown

    def items(self, *before: Item) -> tuple[Item, ...]:
        """The items as one tuple, after ``before`` (copied chunk by chunk at
        C speed: much faster than ``tuple(conversation)``, which iterates)."""
        out = list(before)
        for chunk in self._chunks:
            out += chunk
        out += self._tail
        return tuple(out)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: SupportsIndex) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Item, ...]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Item | tuple[Item, ...]:
        if type(index) is int and -len(self._tail) <= index < 0:
            return self._tail[index]  # the latest items (what a model reads first): the hot path
        if isinstance(index, slice):
            return self.items()[index]
        at = index.__index__()
        if at < 0:
            at += self._size
        if not 0 <= at < self._size:
            raise IndexError("conversation index out of range")
        chunk = at >> _SHIFT
        if chunk < len(self._chunks):
            return self._chunks[chunk][at & _MASK]
        return self._tail[at - (chunk << _SHIFT)]

    def __iter__(self) -> Iterator[Item]:
        if not self._chunks:
            return iter(self._tail)
        return chain(chain.from_iterable(self._chunks), self._tail)

    def __reversed__(self) -> Iterator[Item]:
        return chain(reversed(self._tail), *(reversed(chunk) for chunk in reversed(self._chunks)))

    def __contains__(self, value: object) -> bool:
        return value in self._tail or any(value in chunk for chunk in self._chunks)

    def __add__(self, other: Iterable[Item]) -> Conversation:
        return self.append(other)

    def __radd__(self, other: tuple[Item, ...]) -> tuple[Item, ...]:
        return (*other, *self)

    def __eq__(self, other: object) -> bool:
        if type(other) is Conversation:
            # equal conversations are chunked alike, and mostly share their chunks
            return self._size == other._size and self._chunks == other._chunks and self._tail == other._tail
        if type(other) is tuple:
            return self._size == len(other) and self.items() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))  # a tuple of the same items is equal, so hashes alike

    def __repr__(self) -> str:
        return f"Conversation({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Conversation, (tuple(self),))


def as_conversation(items: Iterable[Item]) -> Conversation:
    """``items`` as a conversation (a conversation is returned as it is)."""
    if type(items) is Conversation:  # every state after the first: one check, no call
        return items
    return Conversation(items)


#: The conversation with no items.
EMPTY: Final = Conversation()


__all__ = ["CHUNK", "EMPTY", "Conversation", "as_conversation"]
