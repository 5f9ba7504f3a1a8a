#!/usr/bin/env python3
"""The purity check: helikon's pure packages do no IO, concurrency, clock or randomness.

Run from anywhere (it finds the project root from its own location unless
``--root`` says otherwise)::

    python scripts/check_purity.py            # checks what pyproject.toml lists
    python scripts/check_purity.py --rules    # also prints the rules

The pure packages are listed in ``pyproject.toml``::

    [tool.helikon.purity]
    packages = ["helikon/loop", "helikon/items.py", ...]   # folders or single modules
    allow = []                                              # extra import roots, rare

A module in a pure package may not

- import a module that does IO, concurrency, clock or randomness (``FORBIDDEN``
  below), at module level or inside a function; of ``os`` only ``os.path``,
  ``fspath`` and ``sep``; of ``pathlib`` only the pure path classes;
- import, at module level, a helikon module outside the pure packages (a
  function-level import is how a convenience such as ``agent.run()`` hands over
  to an interpreter);
- ``await``, ``async for``, ``async with``, or define an ``async def`` with a
  body (protocol stubs whose body is a docstring, ``...``, ``pass`` or a raise
  are fine);
- call ``open``, ``print``, ``input``, ``breakpoint``, ``exec``, ``eval``,
  ``__import__``, or read the clock, the environment or a random source
  (``datetime.now``, ``time.time``, ``uuid.uuid4``, ``os.environ``, ...).

Exit status: 0 when every pure module passes, 1 when one fails, 2 when the
configuration is unusable (no pyproject.toml, no purity table, a listed path
that does not exist, a module that does not parse).
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

FORBIDDEN = frozenset({
    # IO and the network
    "aiohttp", "builtins", "dbm", "fcntl", "ftplib", "glob", "h11", "http.client",
    "http.server", "httpcore", "httpx", "io", "mmap", "pickle", "pty", "requests",
    "select", "selectors", "shelve", "shutil", "smtplib", "socket", "ssl", "tempfile",
    "urllib.request", "webbrowser",
    # databases and services
    "asyncpg", "psycopg", "psycopg2", "redis", "sqlite3", "temporalio", "mcp",
    # concurrency and processes
    "anyio", "asyncio", "concurrent", "multiprocessing", "signal", "subprocess",
    "threading", "trio",
    # clock and randomness
    "random", "secrets", "time",
    # loading code, foreign memory, logging, servers
    "ctypes", "importlib", "logging", "hypercorn", "opentelemetry.sdk", "starlette",
    "uvicorn", "watchfiles",
})
PURE_PATHS = frozenset({"PurePath", "PurePosixPath", "PureWindowsPath"})
OS_PURE = frozenset({"path", "fspath", "sep"})
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "breakpoint", "exec", "eval", "__import__"})
IMPURE_ATTRIBUTES = frozenset({
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("uuid", "uuid1"), ("uuid", "uuid4"), ("os", "getenv"), ("os", "environ"),
    ("os", "getcwd"), ("os", "urandom"), ("time", "time"), ("time", "monotonic"),
})


@dataclass(frozen=True)
class Problem:
    """One rule a pure module breaks, at a line."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class ConfigurationError(Exception):
    """The purity table is missing or names something that is not there."""


def _matches(name: str, roots: frozenset[str] | set[str]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


def _is_stub(body: list[ast.stmt]) -> bool:
    def stub(statement: ast.stmt) -> bool:
        match statement:
            case ast.Pass() | ast.Raise():
                return True
            case ast.Expr(value=ast.Constant(value=value)):
                return value is Ellipsis or isinstance(value, str)
        return False

    return all(stub(statement) for statement in body)


class _ModuleChecker(ast.NodeVisitor):
    """Walks one module's syntax tree and collects the rules it breaks."""

    def __init__(self, path: str, module: str, pure: tuple[str, ...], allow: frozenset[str]) -> None:
        self.path, self.module, self.pure, self.allow = path, module, pure, allow
        self.problems: list[Problem] = []
        self.function_depth = 0

    def _problem(self, node: ast.AST, message: str) -> None:
        self.problems.append(Problem(self.path, getattr(node, "lineno", 0), message))

    def _is_pure_module(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.pure)

    def _check_import(self, node: ast.AST, name: str, names: tuple[str, ...]) -> None:
        if _matches(name, self.allow):
            return
        if name == "os" or name.startswith("os."):
            if name == "os.path" or (name == "os" and names and set(names) <= OS_PURE):
                return
            self._problem(node, f"imports {name!r} (the operating system) in pure code")
        elif name == "pathlib":
            if not names or not set(names) <= PURE_PATHS:
                self._problem(node, "imports pathlib's concrete paths in pure code (use PurePosixPath)")
        elif _matches(name, FORBIDDEN):
            self._problem(node, f"imports {name!r} (IO, concurrency, clock or randomness) in pure code")
        elif (name == "helikon" or name.startswith("helikon.")) and self.function_depth == 0:
            candidates = (name, *(f"{name}.{n}" for n in names))
            if not any(self._is_pure_module(candidate) for candidate in candidates):
                self._problem(node, f"imports the impure helikon module {name!r} at module level")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_import(node, alias.name, ())

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            package = self.module.split(".")[: -node.level]
            name = ".".join([*package, node.module] if node.module else package)
        else:
            name = node.module or ""
        self._check_import(node, name, tuple(alias.name for alias in node.names))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.function_depth += 1
        self.generic_visit(node)
        self.function_depth -= 1

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        if not _is_stub(node.body):
            self._problem(node, f"defines the async function {node.name!r} in pure code")
        self.function_depth += 1
        self.generic_visit(node)
        self.function_depth -= 1

    def visit_Await(self, node: ast.Await) -> None:
        self._problem(node, "awaits in pure code")
        self.generic_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self._problem(node, "uses async for in pure code")
        self.generic_visit(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self._problem(node, "uses async with in pure code")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            self._problem(node, f"calls {node.func.id}() in pure code")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        match node.value:
            case ast.Name(id=owner) | ast.Attribute(attr=owner):
                if (owner, node.attr) in IMPURE_ATTRIBUTES:
                    self._problem(node, f"reads {owner}.{node.attr} (clock, randomness or environment)")
        self.generic_visit(node)


def pure_paths(root: Path) -> tuple[list[str], frozenset[str]]:
    """The pure packages and the allowed extra roots that ``pyproject.toml`` lists."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise ConfigurationError(f"there is no {pyproject}")
    table = tomllib.loads(pyproject.read_text()).get("tool", {}).get("helikon", {}).get("purity")
    if not isinstance(table, dict) or not table.get("packages"):
        raise ConfigurationError(f"{pyproject} has no [tool.helikon.purity] table with packages = [...]")
    packages = [str(p).rstrip("/") for p in table["packages"]]
    for package in packages:
        if not (root / package).exists():
            raise ConfigurationError(f"the pure package {package!r} listed in {pyproject} does not exist")
    return packages, frozenset(str(a) for a in table.get("allow", []))


def check(root: Path) -> tuple[int, list[Problem]]:
    """Check every pure module under ``root``: how many were checked, and the problems."""
    packages, allow = pure_paths(root)
    pure = tuple(p.removesuffix(".py").replace("/", ".") for p in packages)
    checked, problems = 0, []
    for package in packages:
        base = root / package
        for path in [base] if base.suffix == ".py" else sorted(base.rglob("*.py")):
            relative = path.relative_to(root)
            module = ".".join(relative.with_suffix("").parts)
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(relative))
            except SyntaxError as error:
                message = f"{relative} does not parse: {error.msg} (line {error.lineno})"
                raise ConfigurationError(message) from None
            checker = _ModuleChecker(str(relative), module, pure, allow)
            checker.visit(tree)
            problems += checker.problems
            checked += 1
    return checked, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check that helikon's pure packages do no IO, concurrency, clock or randomness."
    )
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the project root holding pyproject.toml (default: this script's project)")
    parser.add_argument("--rules", action="store_true", help="print the rules first")
    args = parser.parse_args(argv)
    if args.rules:
        print(__doc__)
    try:
        checked, problems = check(args.root)
    except ConfigurationError as error:
        print(f"check_purity: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    verdict = "FAIL" if problems else "ok"
    print(f"check_purity: {verdict}: {checked} pure modules checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
