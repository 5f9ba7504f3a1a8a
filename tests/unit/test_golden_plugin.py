"""The golden-trace fixture as a user's pytest project meets it: failures
that name the golden and the command to re-record it, ``check`` inside trio
and asyncio tests, and the live-tools flag."""

from __future__ import annotations

import pytest

PROJECT = '''
import asyncio
import os

import trio

from helikon import LlmAgent, tool
from helikon.testing import MockModel, call_tools, say

OFFSET = int(os.environ.get("ADD_OFFSET", "0"))
PROMPT = os.environ.get("PROMPT", "What is one plus two, please?")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b + OFFSET


def agent():
    model = MockModel([call_tools(("add", {"a": 1, "b": 2})), say("It is 3.")])
    return LlmAgent(name="calc", model=model, instructions="Add.", tools=[add])


def test_sync(helikon_golden):
    helikon_golden.check(agent(), "goldens/calc.jsonl", input=PROMPT)


def test_inside_trio(helikon_golden):
    async def main():
        helikon_golden.check(agent(), "goldens/calc.jsonl", input=PROMPT)
        await helikon_golden.acheck(agent(), "goldens/calc.jsonl", input=PROMPT)

    trio.run(main)


def test_inside_asyncio(helikon_golden):
    async def main():
        helikon_golden.check(agent(), "goldens/calc.jsonl", input=PROMPT)

    asyncio.run(main())
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_calc=PROJECT)
    recorded = pytester.runpytest_subprocess("-k", "test_sync", "--helikon-record")
    recorded.assert_outcomes(passed=1)
    assert (pytester.path / "goldens" / "calc.jsonl").exists()
    return pytester


def test_goldens_replay_in_sync_trio_and_asyncio_tests(project: pytest.Pytester) -> None:
    project.runpytest_subprocess().assert_outcomes(passed=3)


def test_a_failure_names_the_golden_the_step_and_the_rerecord_command(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMPT", "What is one plus two, my friend?")

    result = project.runpytest_subprocess("-k", "test_sync")

    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "golden trace goldens/calc.jsonl no longer matches the agent (strict replay)" in out
    assert "replay diverged at step 0" in out
    assert "request.messages[" in out and "my friend" in out
    assert "re-record the golden: pytest test_calc.py::test_sync --helikon-record" in out
    assert "GoldenMismatch" in out
    # library frames are hidden: the traceback shows the test, not helikon's internals
    assert "_replay.py" not in out and "trio/_core" not in out and "_golden.py" not in out


def test_a_tool_regression_fails_only_with_live_tools(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADD_OFFSET", "1")

    project.runpytest_subprocess("-k", "test_sync").assert_outcomes(passed=1)
    result = project.runpytest_subprocess("-k", "test_sync", "--helikon-live-tools")

    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "(live-tools replay)" in out
    assert "ExecuteTools run live gave another result from add(" in out
    monkeypatch.setenv("HELIKON_LIVE_TOOLS", "1")
    project.runpytest_subprocess("-k", "test_sync").assert_outcomes(failed=1)


def test_a_missing_golden_says_how_to_record_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_calc=PROJECT)

    result = pytester.runpytest_subprocess("-k", "test_sync")

    result.assert_outcomes(failed=1)
    assert "record it with pytest test_calc.py::test_sync --helikon-record" in result.stdout.str()
