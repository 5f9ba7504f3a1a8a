"""Cooperative cancellation.

A :class:`CancellationToken` is a flag with callbacks. ``cancel()`` may be
called from any task of the run's event loop; interpreters register a
callback that cancels the effect in flight (a tool, a model stream), and
model adapters poll :attr:`~CancellationToken.cancelled` between chunks or
wrap their network waits in :meth:`CancellationToken.scope`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    import anyio


@final
class CancellationToken:
    """A one-shot cancellation signal shared by a run and its sub-runs."""

    __slots__ = ("_callbacks", "_cancelled", "_detach", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self._cancelled = False
        self._callbacks: list[Callable[[], object]] = []
        self._detach: Callable[[], None] = _noop
        #: ``anyio.current_time()`` after which waits under :meth:`scope` stop.
        self.deadline = deadline

    if TYPE_CHECKING:

        @property
        def cancelled(self) -> bool:
            """Whether :meth:`cancel` has been called."""
            return self._cancelled

    else:
        # A read-only property whose getter is C code (no Python frame): the
        # live interpreter reads it several times per model turn.
        cancelled = property(attrgetter("_cancelled"), doc="Whether :meth:`cancel` has been called.")

    def cancel(self) -> None:
        """Fire the token. Idempotent; runs every registered callback once."""
        if self._cancelled:
            return
        self._cancelled = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` when the token fires (at once if it has).

        Returns a function that unregisters the callback.
        """
        if self._cancelled:
            callback()
            return _noop
        self._callbacks.append(callback)

        def remove() -> None:
            callbacks = self._callbacks  # no ``suppress``: this runs after every tool round
            if callback in callbacks:
                callbacks.remove(callback)

        return remove

    def child(self, deadline: float | None = None) -> CancellationToken:
        """A token that fires when this one does (and can fire on its own).

        Its deadline is the earlier of this token's and ``deadline``. Call
        :meth:`detach` when done with it, so this token forgets it.
        """
        if self.deadline is not None and (deadline is None or self.deadline < deadline):
            deadline = self.deadline
        child = CancellationToken(deadline)
        child._detach = self.on_cancel(child.cancel)
        return child

    def detach(self) -> None:
        """Stop following the parent token (see :meth:`child`)."""
        self._detach()
        self._detach = _noop

    @contextmanager
    def scope(self, deadline: float | None = None) -> Iterator[anyio.CancelScope]:
        """An anyio cancel scope, cancelled when this token fires.

        Use it around a network wait inside a model adapter::

            with cancel.scope():
                chunk = await stream.receive()

        Exit it before yielding from an async generator (a cancel scope must
        not stay open across a ``yield``). ``deadline`` (in
        ``anyio.current_time()`` terms; the token's own :attr:`deadline` by
        default) also cancels it when reached.
        """
        import math

        import anyio

        if deadline is None:
            deadline = self.deadline
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline) as scope:
            remove = self.on_cancel(scope.cancel)
            try:
                yield scope
            finally:
                remove()

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"


def _noop() -> None:
    return None


__all__ = ["CancellationToken"]
