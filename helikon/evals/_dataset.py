"""Eval datasets: :class:`EvalCase` and :class:`EvalDataset`, read from JSON Lines.

Rules of the format (``docs/evals.md`` has examples):

- One JSON object per line: ``input`` (the user-turn text, required),
  ``id``, ``expected`` (a string or any JSON value, for comparing the final
  answer), ``expected_tools`` (tool names in call order, for comparing the
  trajectory) and ``metadata`` (a free-form object). ``null`` is the same
  as leaving a field out.
- Blank lines are skipped; line numbers count every line from 1.
- A case without an ``id`` is ``case-<line>``. Ids are unique.
- A line that is not such an object is an error naming the line and the
  problem; so is an unknown key (a typo such as ``expcted`` must not turn a
  case into one that silently skips its checks).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.errors import ConfigError

_KEYS: Final = ("id", "input", "expected", "expected_tools", "metadata")


class DatasetError(ConfigError):
    """A dataset line is not a valid case; ``line`` is its 1-based number."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _cases(cases: Iterable[EvalCase]) -> tuple[EvalCase, ...]:
    return tuple(cases)


def _metadata(value: Mapping[str, JsonValue] | None) -> Mapping[str, JsonValue]:
    return {} if value is None else dict(value)


@attrs.frozen
class EvalCase:
    """One case: the input to run and what to compare the outcome with.

    Args:
        id: the case's id (unique in its dataset).
        input: the user-turn text the agent is run on.
        expected: the expected final answer (text, or a JSON value the
            answer must parse to); None when the case has none.
        expected_tools: the expected tool-call names, in order; None when
            the case has none (an empty tuple expects no tool call at all).
        metadata: free-form JSON data (evaluators may read it).

    >>> EvalCase("c1", "What is 2 + 3?", expected="5").expected_tools is None
    True
    """

    id: str
    input: str
    expected: JsonValue = None
    expected_tools: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    metadata: Mapping[str, JsonValue] = attrs.field(factory=dict, converter=_metadata, hash=False)


@attrs.frozen
class EvalDataset:
    """An ordered collection of :class:`EvalCase`\\ s with unique ids.

    >>> data = EvalDataset.from_jsonl_str('{"input": "hi"}\\n\\n{"id": "b", "input": "yo"}\\n')
    >>> [case.id for case in data]
    ['case-1', 'b']
    """

    cases: tuple[EvalCase, ...] = attrs.field(converter=_cases)
    source: str = attrs.field(default="<dataset>", eq=False)

    def __attrs_post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise DatasetError(f"{self.source}: two cases have the id {case.id!r}")
            seen.add(case.id)

    def __iter__(self) -> Iterator[EvalCase]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, index: int) -> EvalCase:
        return self.cases[index]

    def case(self, case_id: str) -> EvalCase:
        """The case with id ``case_id`` (``KeyError`` when there is none)."""
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    @classmethod
    def from_cases(cls, cases: Iterable[EvalCase], *, source: str = "<dataset>") -> EvalDataset:
        return cls(tuple(cases), source)

    @classmethod
    def from_jsonl_path(cls, path: str | os.PathLike[str]) -> EvalDataset:
        """Read the dataset at ``path`` (UTF-8 JSON Lines).

        Raises:
            DatasetError: the file cannot be read, or a line is not a valid case.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DatasetError(f"{os.fspath(path)}: cannot read the dataset: {exc}") from None
        return cls.from_jsonl_str(text, source=os.fspath(path))

    @classmethod
    def from_jsonl_str(cls, text: str, *, source: str = "<dataset>") -> EvalDataset:
        """Parse a dataset from JSON Lines text.

        Raises:
            DatasetError: a line is not a valid case, or two cases share an id.
        """
        cases: list[EvalCase] = []
        first_line: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            case = _parse_line(line, number, source)
            if case.id in first_line:
                raise DatasetError(
                    f"{source}:{number}: the id {case.id!r} is already used on line {first_line[case.id]}",
                    number,
                )
            first_line[case.id] = number
            cases.append(case)
        return cls(tuple(cases), source)


def _parse_line(line: str, number: int, source: str) -> EvalCase:
    def bad(problem: str) -> DatasetError:
        return DatasetError(f"{source}:{number}: {problem}", number)

    try:
        data: Any = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise bad(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise bad("a case must be a JSON object")
    unknown = sorted(key for key in data if key not in _KEYS)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r} (a case has {', '.join(_KEYS)})")
    text = data.get("input")
    if text is None:
        raise bad("missing 'input' (the user-turn text)")
    if not isinstance(text, str):
        raise bad(f"'input' must be a string, not {_kind(text)}")
    case_id = data.get("id")
    if case_id is None:
        case_id = f"case-{number}"
    elif not isinstance(case_id, str) or not case_id:
        raise bad(f"'id' must be a non-empty string, not {_kind(case_id)}")
    tools = data.get("expected_tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
        raise bad("'expected_tools' must be a list of tool names (strings)")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad(f"'metadata' must be an object, not {_kind(metadata)}")
    return EvalCase(case_id, text, data.get("expected"), tools, metadata)


def _kind(value: object) -> str:
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    names = {dict: "an object", list: "a list", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


__all__ = ["DatasetError", "EvalCase", "EvalDataset"]
