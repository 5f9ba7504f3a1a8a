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

import io
import json
import math
import re
import sys
import time
import tokenize
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


#: The counter every loop iteration and function call calls. Scripts may not name it.
STEP = "_helikon_step"
_OPEN, _CLOSE = "([{", ")]}"


class InstrumentError(Exception):
    """The script cannot be instrumented (it names the counter, or does not tokenize)."""


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
        raise InstrumentError(f"the script cannot be read: {exc}") from None


def _header_colon(tokens: list[tokenize.TokenInfo], start: int) -> int:
    """The index of the ``:`` ending the clause that starts at ``start`` (lambdas inside skipped)."""
    depth, lambdas = 0, 0
    for index in range(start + 1, len(tokens)):
        token = tokens[index]
        if token.type == tokenize.OP and token.string in _OPEN:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSE:
            depth -= 1
        elif depth == 0 and token.type == tokenize.NAME and token.string == "lambda":
            lambdas += 1
        elif depth == 0 and token.type == tokenize.OP and token.string == ":":
            if not lambdas:
                return index
            lambdas -= 1
    raise InstrumentError("the script cannot be read: a clause without its ':'")


def _clause_end(tokens: list[tokenize.TokenInfo], start: int, stops: frozenset[str]) -> int:
    """The index of the token ending the expression after ``start``: a closing bracket, a
    NEWLINE, or (at the same depth) one of ``stops``."""
    depth, lambdas = 0, 0
    for index in range(start + 1, len(tokens)):
        token = tokens[index]
        if token.type == tokenize.OP and token.string in _OPEN:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSE:
            if depth == 0:
                return index
            depth -= 1
        elif token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            return index
        elif depth == 0 and token.type == tokenize.NAME and token.string == "lambda":
            lambdas += 1
        elif depth == 0 and lambdas and token.string == ":":
            lambdas -= 1
        elif depth == 0 and token.string in stops and token.type in (tokenize.NAME, tokenize.OP):
            return index
    return len(tokens) - 1


def instrument(source: str) -> tuple[str, tuple[int, ...]]:
    """``source`` with a call of :data:`STEP` at the start of every function body,
    every ``for`` body and every comprehension ``for`` clause (as an ``if``),
    and around every lambda body; and the (original) line numbers before which
    a line was inserted, to map error positions back.
    """
    tokens = _tokens(source)
    if any(t.type == tokenize.NAME and t.string == STEP for t in tokens):
        raise InstrumentError(f"the name {STEP} is reserved")
    inserts: list[tuple[tuple[int, int], str]] = []  # ((row, col), text)
    new_lines: list[int] = []
    depth = 0
    line_start = True
    for index, token in enumerate(tokens):
        kind, text = token.type, token.string
        if kind == tokenize.OP and text in _OPEN:
            depth += 1
        elif kind == tokenize.OP and text in _CLOSE:
            depth -= 1
        is_statement = depth == 0 and line_start
        if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT):
            line_start = line_start or kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            continue
        if kind == tokenize.OP and text == ";":
            line_start = True
            continue
        line_start = False
        if kind != tokenize.NAME:
            continue
        if text in ("def", "for") and is_statement:
            colon = _header_colon(tokens, index)
            after = colon + 1
            while tokens[after].type == tokenize.COMMENT:
                after += 1
            if tokens[after].type == tokenize.NEWLINE:  # an indented block
                while tokens[after].type != tokenize.INDENT:
                    after += 1
                first = tokens[after + 1]
                row, col = first.start
                inserts.append(((row, 0), " " * col + f"{STEP}()\n"))
                new_lines.append(row)
            else:  # the body on the header's line
                inserts.append((tokens[after].start, f"{STEP}(); "))
        elif text == "for" and depth > 0:  # a comprehension clause: count each item
            end = _clause_end(tokens, index, frozenset({"for", "if"}))
            inserts.append((tokens[end].start, f" if {STEP}() "))
        elif text == "lambda":
            colon = _header_colon(tokens, index)
            end = _clause_end(tokens, colon, frozenset({",", ";", ":", "for"}))
            inserts.append((tokens[colon].end, f" {STEP}() and ("))
            inserts.append((tokens[end].start, ") "))
    lines = [*source.splitlines(keepends=True), ""]
    for (row, col), text in sorted(inserts, key=lambda item: item[0], reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + text + line[col:]
    return "".join(lines), tuple(sorted(new_lines))


def original_line(line: int, inserted: tuple[int, ...]) -> int:
    """The line of the original script that line ``line`` of the instrumented one came from."""
    for shift, row in enumerate(inserted):
        if line <= row + shift - 1:  # before this insertion
            return line - shift
        if line == row + shift:  # the inserted counter call: the statement it counts for
            return row
    return line - len(inserted)


class StepCapExceeded(Exception):
    """Raised by the counter, through the interpreter, when a call takes one step too many."""


class Budget:
    """The step cap and deadline of one call.

    Steps are counted exactly, by :data:`STEP` calls the instrumented script
    makes (every function call, loop iteration, comprehension item and lambda
    call); the deadline is checked at those and at the interpreter's own
    checkpoints.
    """

    def __init__(self, max_steps: int, timeout: float) -> None:
        self.max_steps = max_steps
        self.timeout = timeout
        self.steps = 0
        self.deadline = math.inf
        self.tripped = ""

    def options(self) -> sl.EvalOptions:
        if self.deadline == math.inf:
            self.deadline = time.monotonic() + self.timeout
        return sl.EvalOptions(check_cancelled=self._check, max_callstack_size=200)

    def module(self) -> sl.Module:
        """A fresh module whose only extra global is the counter (no script can name it)."""
        module = sl.Module()
        module.add_callable(STEP, self.step)
        return module

    def step(self) -> bool:
        self.steps += 1
        if self.steps > self.max_steps:
            self.tripped = f"exceeded its step cap of {self.max_steps} steps (a runaway loop?)"
            raise StepCapExceeded(self.tripped)
        if self._check():
            raise StepCapExceeded(self.tripped)
        return True

    def _check(self) -> bool:
        if not self.tripped and time.monotonic() > self.deadline:
            self.tripped = f"ran longer than its {self.timeout:g} s limit"
        return bool(self.tripped)

    def explain(self, message: str, filename: str = "", inserted: tuple[int, ...] = ()) -> str:
        if self.tripped:
            return f"the script {self.tripped}"
        if filename and inserted:
            message = re.sub(
                rf"({re.escape(filename)}:)(\d+)",
                lambda m: m.group(1) + str(original_line(int(m.group(2)), inserted)),
                message,
            )
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
    filename: str = request["filename"]
    inserted: tuple[int, ...] = ()
    try:
        sl.parse(filename, request["source"], dialect())  # errors at the script's own positions
        source, inserted = instrument(request["source"])
        ast = sl.parse(filename, source, dialect())
        module = budget.module()
        sl.eval_with(budget.options(), module, ast, starlark_globals())
        if not request.get("call"):
            return {"ok": None}
        result = module.freeze().call_with(budget.options(), "run", request["args"]).value
    except InstrumentError as exc:
        return {"error": str(exc)}
    except (sl.StarlarkError, StepCapExceeded) as exc:
        return {"error": budget.explain(str(exc), filename, inserted)}
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
