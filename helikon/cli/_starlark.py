"""Sidecar tools as sandboxed Starlark scripts (``starlark-pyo3``).

A script defines ``run(args)``: ``args`` is the model's JSON arguments as a
dict, the return value (any JSON value) is the tool's output. Two layers
keep a script in its box:

- the language: Starlark has no ``open``, no ``load`` (disabled here), no
  imports, no ``print``, no network and no clock; the ``json`` and
  ``struct`` modules are the only extras;
- the process: each call runs in a fresh child process
  (:mod:`helikon.cli._starlark_worker`, which imports nothing of helikon)
  under a step cap (exact: every function call, loop iteration,
  comprehension item and lambda call, counted by a call the worker inserts
  into the script), a wall-clock limit, an address-space limit
  and a CPU-time limit; the parent kills it when it overstays, and a
  cancelled run kills it at once.

A runaway or greedy script therefore ends as a
:class:`~helikon.errors.ToolError` the model sees, never a wedged or
exhausted CLI.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, final

import anyio
import attrs
import starlark as sl

from helikon._json import JsonObject, JsonValue
from helikon.cli._starlark_worker import dialect, first_lines
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.model import ToolEffect

#: The default step cap of one tool call (calls, loop iterations, comprehension items).
DEFAULT_MAX_STEPS = 100_000
#: The default wall-clock limit of one tool call, in seconds.
DEFAULT_TIMEOUT = 5.0
#: The default address-space limit of a tool call's process, in MiB.
DEFAULT_MEMORY_MB = 512
#: How long past its own limit a worker may take before it is killed (process start-up included).
_GRACE = 5.0
_WORKER = Path(__file__).with_name("_starlark_worker.py")
_DEFINES_RUN = re.compile(r"^def\s+run\s*\(", re.MULTILINE)


class StarlarkLoadError(Exception):
    """A script does not parse, fails when evaluated, or does not define ``run(args)``."""


def _command() -> list[str]:
    # -I: isolated (no user site-packages, no PYTHON* variables, no script directory games).
    return [sys.executable, "-I", str(_WORKER)]


def _request(tool: StarlarkTool | None, filename: str, source: str, args: JsonObject | None) -> bytes:
    max_steps, timeout, memory = (
        (tool.max_steps, tool.timeout, tool.memory_mb)
        if tool
        else (DEFAULT_MAX_STEPS, DEFAULT_TIMEOUT, DEFAULT_MEMORY_MB)
    )
    request = {
        "filename": filename,
        "source": source,
        "call": args is not None,
        "args": args or {},
        "max_steps": max_steps,
        "timeout": timeout,
        "memory_mb": memory,
    }
    return json.dumps(request).encode()


def _answer(returncode: int, stdout: bytes, stderr: bytes, memory_mb: int) -> dict[str, Any]:
    """The worker's answer, or an error saying how its process ended."""
    if returncode == 0:
        try:
            answer: dict[str, Any] = json.loads(stdout)
            return answer
        except ValueError:
            pass
    if (
        returncode in (-signal.SIGABRT, -signal.SIGSEGV)
        or b"memory allocation" in stderr
        or b"out of memory" in stderr
    ):
        return {"error": f"the script ran out of memory (its limit is {memory_mb} MB)"}
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"error": "the script used up its CPU time"}
    last = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    return {"error": f"the script's process failed (exit code {returncode}): {last[0]}"}


def check_script(filename: str, source: str) -> None:
    """Check that ``source`` parses, evaluates and defines ``run``; raises :class:`StarlarkLoadError`.

    Parsing happens here; the module's top-level code is evaluated in a
    worker process under the default limits, like a call.
    """
    try:
        sl.parse(filename, source, dialect())
    except sl.StarlarkError as exc:
        raise StarlarkLoadError(first_lines(str(exc))) from None
    if not _DEFINES_RUN.search(source):
        raise StarlarkLoadError(f"{filename}: the script defines no run(args) function")
    done = _run_worker(_request(None, filename, source, None), DEFAULT_TIMEOUT)
    answer = _answer(done.returncode, done.stdout, done.stderr, DEFAULT_MEMORY_MB)
    if "error" in answer:
        raise StarlarkLoadError(str(answer["error"]))


def _run_worker(request: bytes, timeout: float) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            _command(), input=request, capture_output=True, timeout=timeout + _GRACE, env={}
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(_command(), -signal.SIGKILL, b"", b"")


@final
@attrs.frozen
class StarlarkTool:
    """A :class:`~helikon.protocols.Tool` whose body is a Starlark script.

    Each call evaluates the script afresh in its own process (a script keeps
    no state between calls), then calls ``run(args)``.
    """

    name: str
    description: str
    parameters: JsonObject
    source: str
    filename: str
    max_steps: int = DEFAULT_MAX_STEPS
    timeout: float = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB
    effect: ToolEffect = ToolEffect.READ_ONLY
    output_schema: JsonObject | None = None

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        request = _request(self, self.filename, self.source, args)
        with ctx.cancel.scope() as scope, anyio.move_on_after(self.timeout + _GRACE) as timer:
            done = await anyio.run_process(_command(), input=request, check=False, env={})
        if scope.cancelled_caught:
            raise ToolError(f"tool {self.name!r}: the script was cancelled")
        if timer.cancelled_caught:
            return self._result(-signal.SIGKILL, b"", b"")
        return self._result(done.returncode, done.stdout, done.stderr)

    def call(self, args: JsonObject) -> JsonValue:
        """Run the script synchronously (what :meth:`invoke` does, without cancellation)."""
        done = _run_worker(_request(self, self.filename, self.source, args), self.timeout)
        return self._result(done.returncode, done.stdout, done.stderr)

    def _result(self, returncode: int, stdout: bytes, stderr: bytes) -> JsonValue:
        answer = _answer(returncode, stdout, stderr, self.memory_mb)
        if "error" in answer:
            raise ToolError(f"tool {self.name!r}: {answer['error']}")
        result: JsonValue = answer["ok"]
        return result


__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "StarlarkLoadError",
    "StarlarkTool",
    "check_script",
]
