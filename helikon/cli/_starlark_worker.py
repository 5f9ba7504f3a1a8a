"""The process a Starlark tool call runs in (stdlib and ``starlark`` only; no helikon import).

``python _starlark_worker.py`` reads one request as JSON on stdin —
``{"filename", "source", "call": bool, "args", "max_steps", "timeout",
"memory_mb"}`` — caps its own address space (``RLIMIT_AS``) and CPU time
(``RLIMIT_CPU``), evaluates the script under a step cap and a wall-clock
limit, and writes ``{"ok": <run's result>}`` or ``{"error": "..."}`` on
stdout. The parent kills it when it overstays, so even a single builtin
that runs long or allocates without end cannot wedge or exhaust the CLI.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import starlark as sl


def dialect() -> sl.Dialect:
    """Standard Starlark, with ``load`` disabled."""
    result = sl.Dialect.standard()
    result.enable_load = False
    return result


def starlark_globals() -> sl.Globals:
    """The builtins plus the ``json`` and ``struct`` modules: nothing that reaches outside."""
    return sl.Globals.extended_by([sl.LibraryExtension.Json, sl.LibraryExtension.StructType])


class Budget:
    """The step cap and deadline of one call, checked at each interpreter checkpoint."""

    def __init__(self, max_steps: int, timeout: float) -> None:
        self.max_steps = max_steps
        self.timeout = timeout
        self.steps = 0
        self.deadline = math.inf
        self.tripped = ""

    def options(self) -> sl.EvalOptions:
        self.deadline = time.monotonic() + self.timeout
        return sl.EvalOptions(check_cancelled=self._check, max_callstack_size=200)

    def _check(self) -> bool:
        self.steps += 1
        if self.steps > self.max_steps:
            self.tripped = f"exceeded its step cap of {self.max_steps} steps (a runaway loop?)"
        elif time.monotonic() > self.deadline:
            self.tripped = f"ran longer than its {self.timeout:g} s limit"
        return bool(self.tripped)

    def explain(self, message: str) -> str:
        if self.tripped:
            return f"the script {self.tripped}"
        if "serde::serialize" in message:
            kind = message.rsplit("on type", 1)[-1].strip(" `'\"")
            return f"run(args) must return JSON values (null, bool, number, string, list, dict), not a {kind}"
        return first_lines(message)


def first_lines(message: str) -> str:
    """Starlark's message without the long traceback: the error lines and the location."""
    lines = [line for line in message.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith(("error:", " -->"))]
    return " ".join(part.strip() for part in keep) if keep else (lines[-1] if lines else message)


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the script (and call ``run(args)`` when ``call``); the answer object."""
    budget = Budget(int(request["max_steps"]), float(request["timeout"]))
    try:
        ast = sl.parse(request["filename"], request["source"], dialect())
        module = sl.Module()
        sl.eval_with(budget.options(), module, ast, starlark_globals())
        if not request.get("call"):
            return {"ok": None}
        result = module.freeze().call_with(budget.options(), "run", request["args"]).value
    except sl.StarlarkError as exc:
        return {"error": budget.explain(str(exc))}
    except MemoryError:
        return {"error": f"the script ran out of memory (its limit is {request['memory_mb']} MB)"}
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {"error": f"run(args) returned a value that is not JSON: {exc}"}
    if not _string_keys(result):
        return {"error": "run(args) returned a dict with a key that is not a string"}
    return {"ok": result}


def _string_keys(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_string_keys(v) for v in value)
    return True


def _limit(memory_mb: int, timeout: float) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX: the parent's kill still applies
        return
    size = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size, size))
    seconds = math.ceil(timeout) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def main() -> None:
    request = json.load(sys.stdin)
    _limit(int(request["memory_mb"]), float(request["timeout"]))
    answer = evaluate(request)
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
