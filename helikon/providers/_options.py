"""Keyword options of the model adapters, declared once as a ``TypedDict``.

Each adapter lists its keyword arguments in one ``TypedDict`` (``total=False``)
and every constructor takes them as ``**options: Unpack[ThatDict]``, so a type
checker checks every call and the named constructors forward ``**options``
instead of repeating a dozen parameters. Python does not check ``Unpack`` at
run time: :func:`check_options` refuses an unknown keyword the way a plain
signature would.
"""

from __future__ import annotations

from collections.abc import Mapping


def check_options(owner: str, given: Mapping[str, object], declared: type) -> None:
    """Raise ``TypeError`` for a keyword ``declared`` (a ``TypedDict``) does not have.

    >>> from typing import TypedDict
    >>> class Options(TypedDict, total=False):
    ...     stream: bool
    >>> check_options("Model.make", {"stream": True}, Options)
    >>> check_options("Model.make", {"strem": True}, Options)
    Traceback (most recent call last):
    ...
    TypeError: Model.make() got an unexpected keyword argument 'strem' (it takes: stream)
    """
    names: frozenset[str] = getattr(declared, "__required_keys__", frozenset()) | getattr(
        declared, "__optional_keys__", frozenset()
    )
    for name in given:
        if name not in names:
            takes = ", ".join(sorted(names))
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r} (it takes: {takes})")


__all__ = ["check_options"]
