"""A one-line progress bar for eval runs, drawn only on a terminal.

On a TTY the line is redrawn in place (``\\r``) as cases finish; anywhere
else (a pipe, a file, CI logs) nothing at all is written, so logs stay clean.
"""

from __future__ import annotations

import sys
from typing import TextIO, final

_WIDTH = 28


def is_terminal(stream: TextIO) -> bool:
    """True when ``stream`` is a TTY (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def bar(done: int, total: int, failed: int) -> str:
    """The bar's text.

    >>> bar(5, 10, 1)
    'eval [##############--------------] 5/10  1 failing'
    """
    filled = _WIDTH * done // total if total else _WIDTH
    tail = f"  {failed} failing" if failed else ""
    return f"eval [{'#' * filled}{'-' * (_WIDTH - filled)}] {done}/{total}{tail}"


@final
class Progress:
    """Counts finished cases and redraws the bar (use :meth:`open`)."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._failed = 0
        self._last = ""
        self._draw()

    @classmethod
    def open(cls, enabled: bool, stream: TextIO | None, total: int) -> Progress | None:
        """A bar on ``stream`` (stderr by default) when enabled and it is a terminal, else None."""
        target = stream if stream is not None else sys.stderr
        if not enabled or not is_terminal(target):
            return None
        return cls(target, total)

    def advance(self, failed: bool) -> None:
        self._done += 1
        self._failed += failed
        self._draw()

    def close(self) -> None:
        self._stream.write("\n")
        self._stream.flush()

    def _draw(self) -> None:
        text = bar(self._done, self._total, self._failed)
        if text != self._last:
            self._stream.write("\r" + text)
            self._stream.flush()
            self._last = text


__all__ = ["Progress", "bar", "is_terminal"]
