"""helikon's layers, checked on its import graph (after trio's strict layering).

The layers, lowest first (``docs/architecture.md`` lists them too). A module
imports only from its own layer or below — at the top of the module or inside
a function alike — and no modules import each other in a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "helikon"

#: The layers, lowest first: module name prefixes (the longest prefix wins).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "carriers",
        (
            "helikon._json",
            "helikon._normal",
            "helikon._version",
            "helikon._deprecated",
            "helikon._plugins",
            "helikon.ids",
            "helikon.items",
            "helikon._conversation",
            "helikon.model",
            "helikon.events",
            "helikon.errors",
            "helikon.config",
            "helikon.pricing",
            "helikon.schema",
            "helikon.codec",
            "helikon._structure",
            "helikon.diff",
            "helikon.cancel",
        ),
    ),
    ("effects and governance", ("helikon.effects", "helikon.governance")),
    (
        "pure machines",
        (
            "helikon.loop",
            "helikon.agents",
            "helikon.sessions._events",
            "helikon.sessions._project",
            "helikon.sessions._compaction",
            "helikon.sessions._recorder",
        ),
    ),
    (
        "edges",
        (
            "helikon.context",
            "helikon.protocols",
            "helikon.tools",
            "helikon.providers",
            "helikon.sessions",
            "helikon.trace",
            "helikon.snapshots",
            "helikon.results",
            "helikon._stream",
        ),
    ),
    ("interpreters", ("helikon.interpreters",)),
    ("agents and entry points", ("helikon.agent", "helikon.workflows", "helikon.steps", "helikon.forks")),
    (
        "integrations",
        (
            "helikon.temporal",
            "helikon.mcp",
            "helikon.observability",
            "helikon.evals",
            "helikon.testing",
            "helikon.server",
            "helikon.studio",
            "helikon.protocols.agui",
            "helikon.protocols._agui_events",
            "helikon.protocols.a2a",
            "helikon.protocols._parked",
            "helikon.protocols._frontend",
            "helikon.protocols._auth",
            "helikon.protocols._mount",
            "helikon.protocols._calls",
            "helikon.cli",
            "helikon._console",
        ),
    ),
    ("facade", ("helikon",)),
)


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str, *, top_level_only: bool = False) -> list[tuple[str, int]]:
    """The helikon modules ``module`` imports, with line numbers."""
    tree = ast.parse(MODULES[module].read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: list[tuple[str, int]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from helikon import codec`` imports the submodule.
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                for a in node.names
            ]
        else:
            continue
        found.extend((name, node.lineno) for name in names if name.split(".")[0] == "helikon")
    return found


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_nothing_from_a_higher_layer(module: str) -> None:
    mine = layer_of(module)
    upward = [
        f"{module}:{line} imports {name} ({LAYERS[layer_of(name)][0]} above {LAYERS[mine][0]})"
        for name, line in imports(module)
        if layer_of(name) > mine
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "helikon"))
def test_no_module_imports_a_higher_layer_by_name(module: str) -> None:
    # ``importlib.import_module("helikon....")`` would dodge the check above;
    # a lower layer that needs a higher one reads a hook from helikon._plugins.
    tree = ast.parse(MODULES[module].read_text())
    mine = layer_of(module)
    dynamic = [
        f"{module}:{node.lineno} imports {node.args[0].value} by name"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        in ("import_module", "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).split(".")[0] == "helikon"
        and layer_of(str(node.args[0].value)) > mine
    ]
    assert not dynamic, "\n".join(dynamic)


def test_no_modules_import_each_other_in_a_cycle() -> None:
    # Top-level imports (and TYPE_CHECKING blocks are top-level ``if``s, not
    # imports at run time): the graph Python walks when it loads a module.
    graph = {
        m: sorted({n for n, _ in imports(m, top_level_only=True) if n in MODULES and n != m}) for m in MODULES
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    # A package and the submodules it re-exports form no real cycle when the
    # submodules do not import the package back; real cycles are reported.
    real = [c for c in cycles if not _package_reexports(c, graph)]
    assert not real, "import cycles: " + "; ".join(" <-> ".join(c) for c in real)


def _package_reexports(component: list[str], graph: dict[str, list[str]]) -> bool:
    """Whether the component is only a package importing its own submodules
    and submodules importing the package's siblings through it."""
    packages = [m for m in component if MODULES[m].name == "__init__.py"]
    return len(packages) == len(component)


# -- interpreters perform; the machine decides (issue 26) -----------------------------------

#: Results that carry a decision about what user code's answer means: only
#: the machine's answer table (helikon.loop._answers) makes them.
DECIDED_RESULTS = frozenset(
    {
        "HookAnswered",
        "PolicyAnswered",
        "CallbackRaised",
        "ApprovalDecision",
        "GuardrailsChecked",
        "GuardrailTripped",
        "HooksRan",
        "ToolRaised",
        "ToolReturned",
        "InstructionsRendered",
        "InstructionsFailed",
        "Allow",
        "Deny",
        "Pass",
        "Tripwire",
        "OtherKind",
        "HookVerdict",
    }
)

#: The folds that decide (the machine's, never an interpreter's).
DECIDING_FOLDS = frozenset(
    {"fold_guardrails", "fold_hooks", "tripwire_from_error", "kind_label", "after_policy", "after_approval"}
)

#: Where a performer still builds such a result, and why that is no decision:
#: a tool's value in JSON form (the normal form of issue 26's item 3), and
#: the Temporal worker's redaction of a result it was given.
PERFORMING_EXCEPTIONS = {
    "helikon.interpreters._perform": {"ToolReturned", "ToolRaised"},
    "helikon.temporal._posture": {"ToolReturned", "ToolRaised", "CallbackRaised"},
}


def _performer_modules() -> list[str]:
    return sorted(m for m in MODULES if m.startswith(("helikon.interpreters", "helikon.temporal")))


@pytest.mark.parametrize("module", _performer_modules())
def test_an_interpreter_makes_no_decided_result_and_folds_nothing(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    allowed = PERFORMING_EXCEPTIONS.get(module, set())
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in DECIDED_RESULTS and name not in allowed:
                found.append(f"{module}:{node.lineno} builds {name}(...): the answer table's to decide")
            if name in DECIDING_FOLDS:
                found.append(f"{module}:{node.lineno} calls {name}: a fold is the machine's")
    assert not found, "\n".join(found)


#: The decision classes an answer would be judged against.
JUDGED = DECIDED_RESULTS - {"ToolReturned", "ToolRaised", "CallbackRaised"}


@pytest.mark.parametrize("module", _performer_modules())
def test_an_interpreter_judges_no_answer_by_its_type(module: str) -> None:
    # The answer of user code is never judged by type in an interpreter: no
    # isinstance() against a decision class (that is the answer table's job).
    tree = ast.parse(MODULES[module].read_text())
    judged = [
        f"{module}:{node.lineno} judges an answer by its type"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
        and any(isinstance(n, ast.Name) and n.id in JUDGED for n in ast.walk(node.args[1]))
    ]
    assert not judged, "\n".join(judged)


# -- no if/match in an interpreter chooses an outcome (issue 26) ----------------------------


def _effect_names() -> frozenset[str]:
    import typing

    from helikon import effects

    kinds = (*typing.get_args(effects.Effect), *typing.get_args(effects.CallStep), effects.AtPath)
    return frozenset(k.__name__ for k in kinds)


#: What an interpreter may dispatch on: the effect (and its call steps), how
#: a call of user code went (``Returned``/``Raised``, the performer's report)
#: and whether the machine's step succeeded.
DISPATCH = _effect_names() | {"Returned", "Raised", "Success", "Failure"}

#: Where an interpreter looks at something else by type, and why that
#: chooses no outcome.
LOOKS_EXCEPTIONS = {
    # reads an opaque child's own stream: what the child itself reported
    "helikon.interpreters._children": {
        "RunStarted",
        "RunCompleted",
        "RunFailed",
        "MessageOutput",
        "AssistantMessage",
    },
    # recording scrubs secrets from each kind of result it was given
    "helikon.interpreters._recording": {"AllPerformed"},
    # replay compares the result it recorded with the one it got, and a
    # request's messages by the growth of a conversation (a container's
    # type, not a result's)
    "helikon.interpreters._replay": {
        "AllPerformed",
        "ModelResponded",
        "ModelCallFailed",
        "InstructionsRendered",
        "ToolsExecuted",
        "Conversation",
    },
    # the live interpreter awaits a function tool's own coroutine in a round
    # of one call (how it performs the call, not what the call's answer means)
    "helikon.interpreters._live": {"FunctionTool"},
    # drive hands a step's events on as one tuple, whatever sequence the
    # machine's outcome holds them in (a container's type, not a result's)
    "helikon.interpreters._drive": {"tuple"},
    # a fork replays the recorded answers as replay does, and compares a
    # wave's recorded parts with the ones asked
    "helikon.interpreters._fork": {"AllPerformed", "ModelResponded", "ModelCallFailed"},
    # failed instructions raise so Temporal's retry policy applies
    # (infrastructure), and an activity checks it got the result it asked for
    "helikon.temporal._activities": {"InstructionsFailed", "kind"},
    # the worker's redaction of each kind of step result it was given
    "helikon.temporal._posture": {
        "ToolReturned",
        "ToolRaised",
        "ToolCrashed",
        "Denied",
        "InvalidArgs",
        "CallbackRaised",
    },
}


def _looked_at(tree: ast.AST) -> list[tuple[int, str]]:
    """Every class a ``match`` case or a ``type(x) is C`` test looks for."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.match_case):
            for part in ast.walk(node.pattern):
                if isinstance(part, ast.MatchClass):
                    cls = part.cls
                    found.append((part.lineno, cls.id if isinstance(cls, ast.Name) else ast.unparse(cls)))
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
            func = node.left.func
            if isinstance(func, ast.Name) and func.id == "type":
                for op, right in zip(node.ops, node.comparators, strict=True):
                    if isinstance(op, ast.Is | ast.IsNot) and isinstance(right, ast.Name):
                        found.append((node.lineno, right.id))
    return found


@pytest.mark.parametrize("module", _performer_modules())
def test_an_interpreter_dispatches_only_on_the_effect(module: str) -> None:
    # "No if/match that chooses an outcome": a case or a type test in an
    # interpreter names an effect (or how a call of user code went), never a
    # result, an error or an answer to judge.
    allowed = DISPATCH | LOOKS_EXCEPTIONS.get(module, set())
    tree = ast.parse(MODULES[module].read_text())
    wrong = [f"{module}:{line} chooses by {name}" for line, name in _looked_at(tree) if name not in allowed]
    assert not wrong, "\n".join(wrong)


#: The only places an interpreter reports a timeout: where it cut work short
#: at the deadline (the live interpreter's event-loop timer; the Temporal
#: performer's wait for approvals), work that has no result for the machine
#: to judge. Everything that comes back is judged by the machine's clock
#: readings (helikon.loop._clock, the tree's member deadlines).
CUT_SHORT = {
    ("helikon.interpreters._drive", "interruption"),
    ("helikon.temporal._performer", "_await_approval"),
}

_CLOCKS = ("anyio.current_time", "workflow.now", "time.time", "time.monotonic")


@pytest.mark.parametrize("module", _performer_modules())
def test_an_interpreter_decides_no_deadline(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    wrong: list[str] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if (module, function.name) in CUT_SHORT:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "TimedOut":
                wrong.append(f"{module}:{node.lineno} ({function.name}) says the run timed out")
            if isinstance(node, ast.Compare) and any(c in ast.unparse(node) for c in _CLOCKS):
                wrong.append(f"{module}:{node.lineno} ({function.name}) compares a clock reading")
    assert not wrong, "\n".join(wrong)
