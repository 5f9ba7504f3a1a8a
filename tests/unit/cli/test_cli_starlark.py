"""Starlark tools: the sandbox (no files, no network, no imports), the step cap, clear errors."""

from __future__ import annotations

import resource
import time
from typing import Any

import anyio
import pytest

from helikon.cancel import CancellationToken
from helikon.cli import StarlarkTool
from helikon.cli._starlark import StarlarkLoadError, check_script
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import ToolError
from helikon.ids import CallId, RunId


def _children_cpu_seconds() -> float:
    """CPU seconds used by this process's finished child processes (the script workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tool(source: str, **options: Any) -> StarlarkTool:
    return StarlarkTool("t", "a test tool", {"type": "object", "properties": {}}, source, "t.star", **options)


def test_run_gets_the_arguments_and_returns_json() -> None:
    source = """
def run(args):
    items = [{"n": i, "sq": i * i} for i in range(args["n"])]
    return {"items": items, "label": "x" + args["tag"], "none": None, "ok": True, "ratio": 0.5,
            "encoded": json.encode({"a": 1})}
"""
    result = tool(source).call({"n": 3, "tag": "y"})
    assert result == {
        "items": [{"n": 0, "sq": 0}, {"n": 1, "sq": 1}, {"n": 2, "sq": 4}],
        "label": "xy",
        "none": None,
        "ok": True,
        "ratio": 0.5,
        "encoded": '{"a":1}',
    }


def test_a_script_that_loops_forever_hits_the_step_cap() -> None:
    source = """
def run(args):
    total = 0
    for i in range(1000000000):
        for j in range(1000000000):
            total += 1
    return total
"""
    # The wall-clock limit is far off, so only the step cap can stop the script (the message
    # names which limit did); that it stops at once is measured in the worker's CPU time,
    # which a loaded machine does not stretch the way it stretches wall time.
    used = _children_cpu_seconds()
    with pytest.raises(ToolError, match="tool 't': the script exceeded its step cap of 1000 steps"):
        tool(source, max_steps=1000, timeout=60).call({})
    assert _children_cpu_seconds() - used < 5


def test_the_step_cap_also_covers_top_level_code() -> None:
    source = "x = [i for i in range(1000000000)]\ndef run(args):\n    return 1\n"
    with pytest.raises(ToolError, match="step cap"):
        tool(source, max_steps=100).call({})


# Each case: a script whose steps are exactly ``args["n"]`` plus a known overhead (``run``'s
# own call is one step): every loop iteration, comprehension item, function and lambda call.
STEP_CASES = {
    "for loop": ("def run(args):\n    for i in range(args['n']):\n        pass\n", 1),
    "nested for loops": (
        "def run(args):\n    for i in range(args['n'] // 10):\n        for j in range(9): pass\n",
        1,
    ),
    "a loop with break (Starlark's while)": (
        "def run(args):\n    for i in range(1000000000):\n"
        "        if i == args['n'] - 1:\n            break\n",
        1,
    ),
    "comprehension": ("def run(args):\n    return len([i for i in range(args['n'])])\n", 1),
    "nested comprehension with a filter": (
        "def run(args):\n    return len([j for i in range(args['n'] // 5) if i >= 0 for j in range(4)])\n",
        1,
    ),
    "function calls": (
        "def f(x):\n    return x\ndef run(args):\n    for i in range(args['n'] // 2):\n        f(i)\n",
        1,
    ),
    "lambda calls": (
        "def run(args):\n    return sorted(range(args['n']), key=lambda v: -v if v else v)[0]\n",
        1,
    ),
    "top-level code": (
        "X = [i for i in range(10)]\ndef run(args):\n    return [x for x in range(args['n'])]\n",
        11,
    ),
}


@pytest.mark.parametrize("case", sorted(STEP_CASES))
def test_the_step_cap_counts_every_step_exactly(case: str) -> None:
    source, overhead = STEP_CASES[case]
    n = 100  # steps the loops take: all of them divide 100
    cap = n + overhead
    tool(source, max_steps=cap).call({"n": n})  # exactly max_steps: runs
    with pytest.raises(ToolError, match=f"exceeded its step cap of {cap - 1} steps"):
        tool(source, max_steps=cap - 1).call({"n": n})  # one step over: refused


def test_the_step_cap_boundary_one_below_and_one_above() -> None:
    source = "def run(args):\n    for i in range(args['n']):\n        pass\n    return args['n']\n"
    assert tool(source, max_steps=1000).call({"n": 998}) == 998  # max_steps - 1 steps
    assert tool(source, max_steps=1000).call({"n": 999}) == 999  # max_steps steps
    with pytest.raises(ToolError, match="step cap of 1000 steps"):
        tool(source, max_steps=1000).call({"n": 1000})  # max_steps + 1 steps


def test_a_script_cannot_name_reach_or_reset_the_step_counter() -> None:
    for source in (
        "def run(args):\n    _helikon_step = lambda: True\n    return 1\n",
        "_helikon_step = 0\ndef run(args):\n    return 1\n",
        "def run(args):\n    return _helikon_step()\n",
        "def run(_helikon_step):\n    return 1\n",
    ):
        with pytest.raises(StarlarkLoadError, match="the name _helikon_step is reserved"):
            check_script("t.star", source)
        with pytest.raises(ToolError, match="the name _helikon_step is reserved"):
            tool(source).call({})
    # Only named through a string it is just a string; no builtin turns a name into a global.
    assert tool('def run(args):\n    return "_helikon_step"\n').call({}) == "_helikon_step"


def test_errors_point_at_the_script_s_own_lines_after_instrumenting() -> None:
    source = "def run(args):\n    for i in range(2):\n        x = i\n    fail('boom')\n"
    with pytest.raises(ToolError, match=r"fail: boom --> t\.star:4:5"):
        tool(source).call({})


def test_deep_recursion_is_stopped() -> None:
    with pytest.raises(ToolError, match="tool 't'"):
        tool("def run(args):\n    return run(args)\n").call({})


def test_the_wall_clock_limit_stops_a_slow_script() -> None:
    source = "def run(args):\n    for i in range(1000000000):\n        pass\n"
    with pytest.raises(ToolError, match=r"ran longer than its 0\.2 s limit"):
        tool(source, max_steps=10**12, timeout=0.2).call({})


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ('def run(args):\n    return open("/etc/passwd").read()\n', "Variable `open` not found"),
        ('load("os.star", "system")\ndef run(args):\n    return 1\n', "`load` is not allowed"),
        ('def run(args):\n    return __import__("os").system("true")\n', "Variable `__import__` not found"),
        ('def run(args):\n    print("leak")\n    return 1\n', "Variable `print` not found"),
        ('def run(args):\n    return exec("1")\n', "Variable `exec` not found"),
    ],
)
def test_a_script_cannot_reach_files_imports_or_output(source: str, problem: str) -> None:
    # Rejected when the sidecar loads (an unknown name is a static error in Starlark) ...
    with pytest.raises(StarlarkLoadError, match=problem):
        check_script("t.star", source)
    # ... and again when the tool runs, should a script get past loading.
    with pytest.raises(ToolError, match=problem):
        tool(source).call({})


def test_python_internals_are_not_reachable_through_the_arguments() -> None:
    # The arguments arrive as Starlark values, not Python objects: no dunder to climb.
    for attribute in ("__class__", "__globals__", "__dict__"):
        with pytest.raises(ToolError, match="not supported on type `dict`"):
            tool(f'def run(args):\n    return str(getattr(args, "{attribute}"))\n').call({"a": 1})
    assert (
        tool('def run(args):\n    return type(args) + "/" + type(args["a"])\n').call({"a": [1]})
        == "dict/list"
    )


def test_fail_is_a_tool_error_with_the_message() -> None:
    with pytest.raises(ToolError, match="no such month: 2026-13"):
        tool('def run(args):\n    fail("no such month: " + args["m"])\n').call({"m": "2026-13"})


def test_a_result_that_is_not_json_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match=r"must return JSON values .*not a function"):
        tool("def run(args):\n    return run\n").call({})
    with pytest.raises(ToolError, match="not a string"):
        tool("def run(args):\n    return {1: 2}\n").call({})


def tool_ctx(cancel: CancellationToken) -> ToolContext[None]:
    return ToolContext(
        None, SessionState(), Actions(), cancel, TracerHandle(), CallId("c1"), RunId("r1"), "tester"
    )


def test_invoke_runs_the_script_and_a_cancelled_run_kills_it() -> None:
    source = "def run(args):\n    for i in range(1000000000):\n        pass\n"

    async def main() -> None:
        assert await tool("def run(args):\n    return args\n").invoke(
            tool_ctx(CancellationToken()), {"a": 1}
        ) == {"a": 1}
        token = CancellationToken()
        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: anyio.sleep(0.5))

            async def cancel_soon() -> None:
                await anyio.sleep(0.5)
                token.cancel()

            group.start_soon(cancel_soon)
            with pytest.raises(ToolError, match="the script was cancelled"):
                await tool(source, max_steps=10**12, timeout=60).invoke(tool_ctx(token), {})
        assert time.monotonic() - started < 10

    anyio.run(main)


def test_a_script_that_allocates_without_end_runs_out_of_memory_not_the_cli() -> None:
    for source in (
        "def run(args):\n    return len([0] * (1 << 29))\n",
        'def run(args):\n    return len("x" * (1 << 28))\n',
    ):
        with pytest.raises(ToolError, match=r"ran out of memory \(its limit is 256 MB\)"):
            tool(source, memory_mb=256).call({})


def test_a_greedy_or_endless_top_level_is_rejected_when_the_sidecar_loads() -> None:
    with pytest.raises(StarlarkLoadError, match="ran out of memory"):
        check_script("t.star", "x = [0] * (1 << 29)\ndef run(args):\n    return 1\n")
    with pytest.raises(StarlarkLoadError, match="step cap"):
        check_script(
            "t.star",
            "def f():\n    for i in range(1 << 30):\n        pass\nf()\ndef run(args):\n    return 1\n",
        )
    # Each comprehension item is a step: the cap stops this long before memory runs out.
    with pytest.raises(StarlarkLoadError, match="step cap of 100000 steps"):
        check_script("t.star", "x = [i for i in range(1000000000)]\ndef run(args):\n    return 1\n")


def test_scripts_keep_no_state_between_calls() -> None:
    source = "seen = []\ndef run(args):\n    seen.append(1)\n    return len(seen)\n"
    t = tool(source)
    # A frozen module's list cannot be mutated: the call fails instead of leaking state.
    with pytest.raises(ToolError):
        t.call({})
