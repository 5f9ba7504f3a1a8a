"""The sidecar's declarations beyond agents and tools: MCP servers, permissions,
structured outputs and workflow agents (``[mcp_servers.NAME]``,
``[permissions]``, an agent's ``output``, ``[workflows.NAME]``).

Each is parsed and checked when the sidecar loads (:mod:`helikon.cli._sidecar`
calls the ``parse_*`` functions with its loader, so errors name the file, the
table and the key) and built into helikon objects for each run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import msgspec

from helikon.config import PermissionMode
from helikon.context import RunContext
from helikon.governance import AllowRule, DenyRule
from helikon.loop import OutputSchema
from helikon.workflows import LoopAgent, ParallelAgent, SequentialAgent

if TYPE_CHECKING:  # the MCP SDK is slow to import: only a run that uses a server loads it
    from helikon.mcp import McpServerHandle

#: The workflow kinds a ``[workflows.NAME]`` table may declare.
WORKFLOW_KINDS = ("sequential", "parallel", "loop")
#: The permission modes, by their TOML spelling.
MODES = {mode.value: mode for mode in PermissionMode}
#: A permission rule's one key and the rule it makes.
RULE_KINDS = ("tool", "bash", "read", "edit")


class Loader(Protocol):
    """What the parsers need of the sidecar's loader."""

    path: Path

    def error(self, table: str, key: str | None, problem: str) -> Exception: ...

    def keys(
        self, table: str, value: object, required: Sequence[str], optional: Sequence[str]
    ) -> dict[str, Any]: ...

    def text(self, table: str, key: str, value: object) -> str: ...

    def names(self, table: str, key: str, value: object) -> tuple[str, ...]: ...

    def read(self, table: str, key: str, value: object) -> str: ...


# -- MCP servers -------------------------------------------------------------------


@attrs.frozen
class McpServerDef:
    """An ``[mcp_servers.NAME]`` table: a stdio ``command`` (with ``args``, ``env``)
    or a streamable-HTTP ``url`` (with ``headers``), and a ``tool_prefix``."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tool_prefix: str = ""
    cwd: Path | None = None

    def build(self) -> McpServerHandle:
        """A fresh handle (it connects when the agent's run resolves its tools)."""
        from helikon.mcp import McpServerHandle

        if self.url is not None:
            return McpServerHandle.streamable_http(
                self.url, headers=dict(self.headers), tool_prefix=self.tool_prefix
            )
        assert self.command is not None
        return McpServerHandle.stdio(
            self.command, args=self.args, env=dict(self.env), cwd=self.cwd, tool_prefix=self.tool_prefix
        )


def _strings(loader: Loader, table: str, key: str, value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise loader.error(table, key, "must be a table of strings")
    return tuple(sorted(value.items()))


def parse_mcp_server(loader: Loader, name: str, raw: object) -> McpServerDef:
    table = f"mcp_servers.{name}"
    body = loader.keys(table, raw, (), ("command", "args", "env", "url", "headers", "tool_prefix"))
    if ("command" in body) == ("url" in body):
        raise loader.error(
            table, None, 'give exactly one of command = "program" (stdio) or url = "http://..."'
        )
    prefix = loader.text(table, "tool_prefix", body.get("tool_prefix", ""))
    if "url" in body:
        if "args" in body or "env" in body:
            raise loader.error(table, "args" if "args" in body else "env", "is for a stdio server (command)")
        url = loader.text(table, "url", body["url"])
        if not url.startswith(("http://", "https://")):
            raise loader.error(table, "url", "must be an http:// or https:// URL")
        return McpServerDef(
            name,
            url=url,
            headers=_strings(loader, table, "headers", body.get("headers", {})),
            tool_prefix=prefix,
        )
    if "headers" in body:
        raise loader.error(table, "headers", "is for an HTTP server (url)")
    return McpServerDef(
        name,
        command=loader.text(table, "command", body["command"]),
        args=loader.names(table, "args", body.get("args", [])),
        env=_strings(loader, table, "env", body.get("env", {})),
        tool_prefix=prefix,
        cwd=loader.path.parent,
    )


# -- permissions ---------------------------------------------------------------------


@attrs.frozen
class PermissionsDef:
    """The ``[permissions]`` table: the ``mode`` and the ``deny`` and ``allow`` rules
    of every run (``{ tool = "NAME" }``, ``{ bash = "program" }``, ``{ read = "glob" }``,
    ``{ edit = "glob" }``)."""

    mode: PermissionMode = PermissionMode.DEFAULT
    deny: tuple[DenyRule, ...] = ()
    allow: tuple[AllowRule, ...] = ()

    def context(self) -> RunContext[None]:
        """A fresh run context carrying these permissions."""
        ctx: RunContext[None] = RunContext.ephemeral(None)
        if self.mode is not PermissionMode.DEFAULT:
            ctx = ctx.with_permission_mode(self.mode)
        return ctx.with_deny_rules(self.deny).with_allow_rules(self.allow)


def _rules(loader: Loader, key: str, value: object, kind: type[Any]) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise loader.error("permissions", key, 'must be a list of rules such as { tool = "NAME" }')
    rules = []
    for index, raw in enumerate(value):
        where = f"{key}[{index}]"
        if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in RULE_KINDS:
            raise loader.error(
                "permissions", where, f"must be one of {{ {' | '.join(f'{k} = ...' for k in RULE_KINDS)} }}"
            )
        ((rule, target),) = raw.items()
        target = loader.text("permissions", f"{where}.{rule}", target)
        make = {"tool": kind.tool, "bash": kind.bash_command, "read": kind.read, "edit": kind.edit}[rule]
        rules.append(make(target))
    return tuple(rules)


def parse_permissions(loader: Loader, raw: object) -> PermissionsDef:
    body = loader.keys("permissions", raw, (), ("mode", "deny", "allow"))
    mode = body.get("mode", "default")
    if mode not in MODES:
        raise loader.error("permissions", "mode", f"must be one of {', '.join(MODES)}, not {mode!r}")
    return PermissionsDef(
        MODES[mode],
        _rules(loader, "deny", body.get("deny", []), DenyRule),
        _rules(loader, "allow", body.get("allow", []), AllowRule),
    )


# -- structured output ----------------------------------------------------------------


def parse_output(loader: Loader, table: str, raw: object) -> OutputSchema:
    """An agent's ``output = { schema = "file.json" | { ... }, name = "Answer" }``."""
    body = loader.keys(f"{table}.output", raw, ("schema",), ("name",))
    schema: object = body["schema"]
    if isinstance(schema, str):
        try:
            schema = msgspec.json.decode(loader.read(table, "output.schema", schema))
        except msgspec.DecodeError as exc:
            raise loader.error(table, "output.schema", f"not JSON: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise loader.error(
            table,
            "output.schema",
            'must be a JSON Schema object schema ({ type = "object", ... }) or its file',
        )
    title = schema.get("title")
    default = title if isinstance(title, str) and title else "StructuredOutput"
    return OutputSchema(loader.text(table, "output.name", body.get("name", default)), schema)


# -- workflow agents -------------------------------------------------------------------


@attrs.frozen
class WorkflowDef:
    """A ``[workflows.NAME]`` table: ``kind`` (sequential, parallel or loop), the
    ``steps`` (agents or other workflows, in order), ``description`` and, for a
    loop, ``max_iterations``."""

    name: str
    kind: str
    steps: tuple[str, ...]
    description: str = ""
    max_iterations: int = 1

    def build(self, make: Any) -> SequentialAgent | ParallelAgent | LoopAgent:
        """The workflow agent, its steps made by ``make(name)``."""
        children = tuple((step, make(step)) for step in self.steps)
        match self.kind:
            case "sequential":
                return SequentialAgent(self.name, self.description, children=children)
            case "parallel":
                return ParallelAgent(self.name, self.description, children=children)
            case _:
                return LoopAgent(self.name, self.description, self.max_iterations, children=children)


def parse_workflow(loader: Loader, name: str, raw: object) -> WorkflowDef:
    table = f"workflows.{name}"
    body = loader.keys(table, raw, ("kind", "steps"), ("description", "max_iterations"))
    kind = body["kind"]
    if kind not in WORKFLOW_KINDS:
        raise loader.error(table, "kind", f"must be one of {', '.join(WORKFLOW_KINDS)}, not {kind!r}")
    steps = loader.names(table, "steps", body["steps"])
    if not steps:
        raise loader.error(table, "steps", "must name at least one agent or workflow")
    if len(set(steps)) != len(steps):
        raise loader.error(table, "steps", "names a step twice")
    iterations = body.get("max_iterations", 1)
    if kind != "loop" and "max_iterations" in body:
        raise loader.error(table, "max_iterations", 'is for kind = "loop" only')
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise loader.error(table, "max_iterations", "must be a positive integer")
    return WorkflowDef(
        name, kind, steps, loader.text(table, "description", body.get("description", "")), iterations
    )


def check_workflows(loader: Loader, workflows: Mapping[str, WorkflowDef], agents: Sequence[str]) -> None:
    """Every step names an agent or a workflow, no name is both, and no workflow contains itself."""
    for name in workflows:
        if name in agents:
            raise loader.error(f"workflows.{name}", None, f"[agents.{name}] has the same name")
    for workflow in workflows.values():
        for step in workflow.steps:
            if step not in workflows and step not in agents:
                raise loader.error(
                    f"workflows.{workflow.name}",
                    "steps",
                    f"names {step!r}, but there is no such agent or workflow",
                )

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise loader.error(f"workflows.{path[-1]}", "steps", f"a workflow cannot contain itself: {cycle}")
        for step in workflows[name].steps:
            if step in workflows:
                visit(step, (*path, name))

    for name in sorted(workflows):
        visit(name, ())


__all__ = [
    "McpServerDef",
    "PermissionsDef",
    "WorkflowDef",
    "check_workflows",
    "parse_mcp_server",
    "parse_output",
    "parse_permissions",
    "parse_workflow",
]
