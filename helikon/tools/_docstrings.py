"""Google-style docstrings, split into the parts helikon reads.

The summary describes a tool or a model; the ``Args:`` section describes a
function's parameters, the ``Attributes:`` section a class's fields. Other
sections (``Returns:``, ``Raises:``, ...) end the one before them and are
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs

#: Google-style section headers, by the part of the docstring they start.
_SECTIONS: Final[Mapping[str, frozenset[str]]] = {
    "args": frozenset({"args", "arguments", "parameters", "params", "keyword args", "other parameters"}),
    "attributes": frozenset({"attributes"}),
    "other": frozenset(
        {"returns", "return", "yields", "raises", "example", "examples", "note", "notes", "see also"}
        | {"todo", "warning", "warnings", "references"}
    ),
}
_SECTION_OF: Final[Mapping[str, str]] = {h: part for part, headers in _SECTIONS.items() for h in headers}
_ENTRY: Final = re.compile(r"\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")


@attrs.frozen
class Docstring:
    """A Google-style docstring, split into the parts helikon reads."""

    #: The text before the first section, paragraphs separated by a blank line.
    summary: str
    #: ``(name, description)`` pairs from the ``Args:`` section.
    args: tuple[tuple[str, str], ...] = ()
    #: ``(name, description)`` pairs from the ``Attributes:`` section.
    attributes: tuple[tuple[str, str], ...] = ()


def parse_docstring(doc: str | None) -> Docstring:
    """Split a Google-style docstring into summary, ``Args`` and ``Attributes``.

    Whitespace inside a paragraph or an entry is collapsed to single spaces.

    >>> d = parse_docstring('''Add two numbers.
    ...
    ...     Args:
    ...         a: The first
    ...             addend.
    ...         b (int): The second addend.
    ...
    ...     Returns:
    ...         The sum.
    ...     ''')
    >>> d.summary
    'Add two numbers.'
    >>> d.args
    (('a', 'The first addend.'), ('b', 'The second addend.'))
    """
    if not doc:
        return Docstring("")
    import inspect

    summary: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = line.strip().rstrip(":").lower()
        if line and not line[0].isspace() and line.rstrip().endswith(":") and header in _SECTION_OF:
            current = sections.setdefault(_SECTION_OF[header], [])
        elif current is None:
            summary.append(line)
        else:
            current.append(line)
    paragraphs = " ".join(line.strip() or "\n" for line in summary).split("\n")
    text = "\n\n".join(squash(p) for p in paragraphs if p.strip())
    return Docstring(text, _entries(sections.get("args", [])), _entries(sections.get("attributes", [])))


def _entries(lines: list[str]) -> tuple[tuple[str, str], ...]:
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not indents:
        return ()
    base = min(indents)
    entries: list[tuple[str, list[str]]] = []
    for line in lines:
        if not line.strip():
            continue
        match = _ENTRY.fullmatch(line.strip())
        if len(line) - len(line.lstrip()) == base and match:
            entries.append((match["name"], [match["text"]]))
        elif entries:
            entries[-1][1].append(line)
    return tuple((name, squash(" ".join(text))) for name, text in entries)


def squash(text: str) -> str:
    """``text`` with every run of whitespace made one space."""
    return " ".join(text.split())


__all__ = ["Docstring", "parse_docstring", "squash"]
