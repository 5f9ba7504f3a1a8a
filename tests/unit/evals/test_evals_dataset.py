"""``EvalDataset``: JSON Lines cases, default ids, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from helikon.evals import DatasetError, EvalCase, EvalDataset


def test_a_case_per_line_with_every_field() -> None:
    data = EvalDataset.from_jsonl_str(
        '{"id": "a", "input": "Hi", "expected": "Hello", "expected_tools": ["x", "y"], '
        '"metadata": {"k": [1]}}\n'
        '{"id": "b", "input": "JSON please", "expected": {"n": 1}}\n'
    )
    assert data.cases == (
        EvalCase("a", "Hi", "Hello", ("x", "y"), {"k": [1]}),
        EvalCase("b", "JSON please", {"n": 1}),
    )
    assert data.case("b").expected_tools is None
    assert [c.id for c in data] == ["a", "b"] and len(data) == 2 and data[1].id == "b"


def test_blank_lines_are_skipped_and_default_ids_count_every_line() -> None:
    data = EvalDataset.from_jsonl_str(
        '\n{"input": "one"}\n   \n{"input": "two"}\n{"id": "x", "input": "three"}'
    )
    assert [c.id for c in data] == ["case-2", "case-4", "x"]


def test_null_means_absent_and_an_empty_tool_list_is_kept() -> None:
    (case,) = EvalDataset.from_jsonl_str(
        '{"input": "hi", "expected": null, "expected_tools": [], "metadata": null}'
    ).cases
    assert case.expected is None and case.expected_tools == () and case.metadata == {}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "a case must be a JSON object"),
        ('{"id": "a"}', "missing 'input'"),
        ('{"input": 5}', "'input' must be a string, not a number"),
        ('{"input": "x", "id": 7}', "'id' must be a non-empty string, not a number"),
        ('{"input": "x", "id": ""}', "'id' must be a non-empty string, not an empty string"),
        ('{"input": "x", "expected_tools": "lookup"}', "'expected_tools' must be a list of tool names"),
        ('{"input": "x", "expected_tools": ["a", 1]}', "'expected_tools' must be a list of tool names"),
        ('{"input": "x", "metadata": [1]}', "'metadata' must be an object, not a list"),
        ('{"input": "x", "expcted": "typo"}', "unknown key 'expcted'"),
    ],
)
def test_a_bad_line_is_an_error_naming_the_line_and_the_problem(line: str, problem: str) -> None:
    text = '{"input": "fine"}\n\n' + line + "\n"
    with pytest.raises(DatasetError) as info:
        EvalDataset.from_jsonl_str(text, source="cases.jsonl")
    assert str(info.value).startswith("cases.jsonl:3: ")
    assert problem in str(info.value)
    assert info.value.line == 3


def test_a_repeated_id_names_both_lines() -> None:
    with pytest.raises(DatasetError, match=r"d.jsonl:3: the id 'a' is already used on line 1"):
        EvalDataset.from_jsonl_str(
            '{"id": "a", "input": "1"}\n{"input": "2"}\n{"id": "a", "input": "3"}', source="d.jsonl"
        )
    with pytest.raises(DatasetError, match="two cases have the id 'a'"):
        EvalDataset.from_cases([EvalCase("a", "1"), EvalCase("a", "2")])


def test_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "Grüße"}\n', encoding="utf-8")
    data = EvalDataset.from_jsonl_path(path)
    assert data.cases == (EvalCase("case-1", "Grüße"),)
    with pytest.raises(DatasetError, match=r"cases.jsonl:1: not valid JSON"):
        path.write_text("{", encoding="utf-8")
        EvalDataset.from_jsonl_path(path)
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        EvalDataset.from_jsonl_path(tmp_path / "missing.jsonl")


def test_the_example_dataset_loads() -> None:
    root = Path(__file__).resolve().parents[3]
    data = EvalDataset.from_jsonl_path(root / "examples" / "evals" / "support.jsonl")
    assert len(data) >= 5 and all(case.input for case in data)


def test_the_package_exports_what_it_lists() -> None:
    import helikon.evals
    import helikon.testing

    assert helikon.evals.__all__ == sorted(helikon.evals.__all__)
    for name in helikon.evals.__all__:
        assert getattr(helikon.evals, name) is not None, name
    assert helikon.evals.ScriptFile is helikon.testing.ScriptFile
