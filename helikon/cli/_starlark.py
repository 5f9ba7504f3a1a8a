"""Sidecar tools as sandboxed Starlark scripts (``starlark-pyo3``).

A script defines ``run(args)``: ``args`` is the model's JSON arguments as a
dict, the return value (any JSON value) is the tool's output. The sandbox is
Starlark's own: no ``open``, no ``load``, no ``print``, no imports, no
network, no clock; the ``json`` module is there. Every evaluation runs under
a step cap (the interpreter's cancellation checkpoints, which it passes at
least once per loop iteration and function call) and a wall-clock limit, so
a runaway script ends with a :class:`~helikon.errors.ToolError` instead of
wedging the process.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, final

import anyio
import attrs
import starlark as sl

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.model import ToolEffect

#: The default step cap (interpreter checkpoints) of one tool call.
DEFAULT_MAX_STEPS = 100_000
#: The default wall-clock limit of one tool call, in seconds.
DEFAULT_TIMEOUT = 5.0


class StarlarkLoadError(Exception):
    """A script does not parse or does not define ``run(args)``."""


_DEFINES_RUN = re.compile(r"^def\s+run\s*\(", re.MULTILINE)


def _dialect() -> sl.Dialect:
    dialect = sl.Dialect.standard()
    dialect.enable_load = False
    return dialect


def _globals() -> sl.Globals:
    return sl.Globals.extended_by([sl.LibraryExtension.Json, sl.LibraryExtension.StructType])


def check_script(filename: str, source: str) -> None:
    """Parse ``source`` and check that it defines ``run``; raises :class:`StarlarkLoadError`."""
    try:
        ast = sl.parse(filename, source, _dialect())
    except sl.StarlarkError as exc:
        raise StarlarkLoadError(_first_lines(str(exc))) from None
    module = sl.Module()
    budget = _Budget(DEFAULT_MAX_STEPS, DEFAULT_TIMEOUT)
    try:
        sl.eval_with(budget.options(), module, ast, _globals())
    except sl.StarlarkError as exc:
        raise StarlarkLoadError(budget.explain(str(exc))) from None
    if not _DEFINES_RUN.search(source):
        raise StarlarkLoadError(f"{filename}: the script defines no run(args) function")


@attrs.define
class _Budget:
    """The step cap and deadline of one evaluation, checked at each checkpoint."""

    max_steps: int
    timeout: float
    steps: int = 0
    deadline: float = math.inf
    tripped: str = ""
    cancelled: Any = None

    def options(self) -> sl.EvalOptions:
        self.deadline = time.monotonic() + self.timeout
        return sl.EvalOptions(check_cancelled=self._check, max_callstack_size=200)

    def _check(self) -> bool:
        self.steps += 1
        if self.steps > self.max_steps:
            self.tripped = f"exceeded its step cap of {self.max_steps} steps (a runaway loop?)"
        elif time.monotonic() > self.deadline:
            self.tripped = f"ran longer than its {self.timeout:g} s limit"
        elif self.cancelled is not None and self.cancelled():
            self.tripped = "was cancelled"
        return bool(self.tripped)

    def explain(self, message: str) -> str:
        if self.tripped:
            return f"the script {self.tripped}"
        if "serde::serialize" in message:
            kind = message.rsplit("on type", 1)[-1].strip(" `'\"")
            return f"run(args) must return JSON values (null, bool, number, string, list, dict), not a {kind}"
        return _first_lines(message)


def _first_lines(message: str) -> str:
    """Starlark's message without the long traceback: the error lines and the location."""
    lines = [line for line in message.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith(("error:", " -->"))]
    return " ".join(part.strip() for part in keep) if keep else (lines[-1] if lines else message)


def _to_json(value: object, where: str = "the result") -> JsonValue:
    match value:
        case None | bool() | int() | str():
            return value
        case float() if math.isfinite(value):
            return value
        case list() | tuple():
            return [_to_json(item, where) for item in value]
        case dict():
            if not all(isinstance(key, str) for key in value):
                raise ToolError(f"{where} has a dict key that is not a string")
            return {key: _to_json(item, where) for key, item in value.items()}
    raise ToolError(f"{where} is not JSON: a {type(value).__name__}")


@final
@attrs.frozen
class StarlarkTool:
    """A :class:`~helikon.protocols.Tool` whose body is a Starlark script.

    Each call parses and evaluates the script afresh in a worker thread (a
    script keeps no state between calls), then calls ``run(args)``.
    """

    name: str
    description: str
    parameters: JsonObject
    source: str
    filename: str
    max_steps: int = DEFAULT_MAX_STEPS
    timeout: float = DEFAULT_TIMEOUT
    effect: ToolEffect = ToolEffect.READ_ONLY
    output_schema: JsonObject | None = None

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        cancel = ctx.cancel
        return await anyio.to_thread.run_sync(lambda: self.call(args, lambda: cancel.cancelled))

    def call(self, args: JsonObject, cancelled: Any = None) -> JsonValue:
        """Run the script synchronously (what :meth:`invoke` does in a thread)."""
        budget = _Budget(self.max_steps, self.timeout, cancelled=cancelled)
        try:
            ast = sl.parse(self.filename, self.source, _dialect())
            module = sl.Module()
            sl.eval_with(budget.options(), module, ast, _globals())
            frozen = module.freeze()
            result = frozen.call_with(budget.options(), "run", dict(args)).value
        except sl.StarlarkError as exc:
            raise ToolError(f"tool {self.name!r}: {budget.explain(str(exc))}") from None
        return _to_json(result, f"tool {self.name!r}: run(args) returned a value that")


__all__ = ["DEFAULT_MAX_STEPS", "DEFAULT_TIMEOUT", "StarlarkLoadError", "StarlarkTool", "check_script"]
