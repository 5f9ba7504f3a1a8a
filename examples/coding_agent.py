"""A coding agent that finds, fixes and tests a bug, inside a sandbox.

Run it with ``python examples/coding_agent.py``. It writes a tiny project
into a temporary directory, opens that directory as a ``Sandbox`` and gives
a scripted model (no network, no API key) the ready-made tools: Glob, Grep,
Read, Edit and Bash. The model looks around, runs the failing tests, fixes
the bug with an exact-string edit and runs the tests again. Two moves show
the sandbox at work: reading a file outside the root is refused, and so is a
command the Bash tool's deny list names.

Bash runs under ``OsSandboxBackend`` (Landlock + seccomp: no access outside
the project, no network) where the kernel supports it; elsewhere the example
says why and falls back to ``HostBackend``, which contains nothing.
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

import trio

from helikon import (
    AgentInput,
    LlmAgent,
    MessageOutput,
    RunCompleted,
    RunContext,
    TokenDelta,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.testing import MockModel, call_tools, say
from helikon.tools import (
    BashTool,
    EditTool,
    ExecutionBackend,
    GlobTool,
    GrepTool,
    HostBackend,
    OsSandboxBackend,
    ReadTool,
    Sandbox,
)
from helikon.tools.sandbox import kernel_support

PROJECT = {
    "calc.py": '''\
        """A calculator."""


        def add(a, b):
            return a - b


        def mul(a, b):
            return a * b
        ''',
    "test_calc.py": """\
        import unittest

        from calc import add, mul


        class CalcTest(unittest.TestCase):
            def test_add(self):
                self.assertEqual(add(2, 3), 5)

            def test_mul(self):
                self.assertEqual(mul(2, 3), 6)


        if __name__ == "__main__":
            unittest.main()
        """,
    "README.md": "# calc\n\nRun the tests with `python3 -m unittest`.\n",
}

TESTS = "set -o pipefail; python3 -m unittest -q 2>&1 | tail -n 3"


def scripted_model() -> MockModel:
    """What a model would do: look, read, test, fix, test again."""
    return MockModel(
        [
            call_tools(
                ("Glob", {"pattern": "**/*.py"}), ("Grep", {"pattern": r"def add", "output_mode": "content"})
            ),
            call_tools(("Read", {"file_path": "calc.py"}), ("Bash", {"command": TESTS})),
            call_tools(
                ("Edit", {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})
            ),
            call_tools(("Bash", {"command": TESTS})),
            call_tools(
                ("Read", {"file_path": "../../etc/passwd"}), ("Bash", {"command": "rm -rf .git && echo gone"})
            ),
            say("Fixed add() in calc.py: it subtracted instead of adding. Both tests pass now."),
        ],
        model_id="scripted-coder",
    )


def choose_backend(sandbox: Sandbox) -> ExecutionBackend:
    reason = kernel_support()
    if reason is None:
        return OsSandboxBackend(sandbox, timeout=60)
    print(f"(no OS sandbox here: {reason}; Bash falls back to the uncontained HostBackend)\n")
    return HostBackend(sandbox, timeout=60)


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="calc-") as workdir, Sandbox.open(workdir) as sandbox:
        for name, text in PROJECT.items():
            (Path(workdir) / name).write_text(textwrap.dedent(text))
        backend = choose_backend(sandbox)
        print(f"sandbox: {sandbox.root}\nbash runs under: {backend.guarantees().describe()}\n")
        agent = LlmAgent(
            name="coder",
            model=scripted_model(),
            instructions="You fix bugs in the project in your sandbox. Run the tests before and after.",
            tools=[
                GlobTool(sandbox),
                GrepTool(sandbox),
                ReadTool(sandbox),
                EditTool(sandbox),
                BashTool(backend, deny_commands=["rm", "curl"]),
            ],
        )
        task = "The tests of calc fail. Please fix the bug."
        print(f"user: {task}\n")
        speaking = False
        async for event in agent.run(RunContext.ephemeral(None), AgentInput.from_user_text(task)):
            match event:
                case ToolCallItem(item=call):
                    print(f"-> {call.name} {call.arguments}")
                case ToolOutputItem(item=result):
                    print(f"<- {result.name}:\n{textwrap.indent(result.content, '     ')}")
                case TokenDelta(text=text):
                    print(text if speaking else f"\nassistant: {text}", end="", flush=True)
                    speaking = True
                case MessageOutput():
                    print()
                case RunCompleted():
                    print("[done]")
        fixed = (Path(workdir) / "calc.py").read_text()
        assert "return a + b" in fixed, "the edit did not land"
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
