"""Names kept for a while after they were removed, with a warning when used.

A module that drops a public name keeps serving it through PEP 562's module
``__getattr__`` for at least one release: the first use of the name warns
with :class:`DeprecationWarning` saying what to use instead. The name leaves
``__all__`` and the docs at once, so nothing new is written against it.

Pure: it builds functions and warns; no IO.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import TypeAlias

#: A removed name's entry: how to make its value, and what to use instead.
Deprecated: TypeAlias = tuple[Callable[[], object], str]


def deprecated_names(module: str, names: Mapping[str, Deprecated]) -> Callable[[str], object]:
    """A module ``__getattr__`` serving ``names`` (name -> (make the value, advice)).

    >>> __getattr__ = deprecated_names("pkg", {"old": (lambda: 42, "use new()")})
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = __getattr__("old")
    >>> value, str(caught[0].message)
    (42, 'pkg.old is deprecated and will be removed: use new()')
    >>> __getattr__("other")
    Traceback (most recent call last):
    ...
    AttributeError: module 'pkg' has no attribute 'other'
    """

    def __getattr__(name: str) -> object:
        entry = names.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        make, advice = entry
        message = f"{module}.{name} is deprecated and will be removed: {advice}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return make()

    return __getattr__


__all__ = ["Deprecated", "deprecated_names"]
