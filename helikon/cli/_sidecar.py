"""The ``agents.toml`` sidecar: agents, Starlark tools, MCP servers, permissions,
workflow agents and ``[eval]``, declared in TOML.

:func:`load_sidecar` reads and validates the whole file up front — unknown
keys, dangling tool and handoff references (named by file, table and key),
handoff cycles (the path named), tools with both or neither of ``script`` and
``inline``, scripts that do not parse — and gives a frozen :class:`Sidecar`.
:meth:`Sidecar.build` makes a fresh :class:`~helikon.LlmAgent` (with fresh
models: a mock model plays its script from the start) for each run; a real
provider whose API key is missing fails there, before any request.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec

from helikon.agent import LlmAgent
from helikon.cli._declarations import (
    McpServerDef,
    PermissionsDef,
    WorkflowDef,
    check_workflows,
    parse_mcp_server,
    parse_output,
    parse_permissions,
    parse_workflow,
)
from helikon.cli._starlark import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    StarlarkLoadError,
    StarlarkTool,
    check_script,
)
from helikon.context import RunContext
from helikon.errors import ConfigError
from helikon.evals import (
    EvalCase,
    Evaluator,
    ExactMatch,
    JsonSchemaEvaluator,
    LlmJudge,
    ToolUseTrajectory,
)
from helikon.loop import OutputSchema
from helikon.protocols import Model
from helikon.testing import MockModel, ScriptFile, ScriptFileError
from helikon.workflows import Handoff

PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "mock")
EVALUATORS = ("exact_match", "tool_trajectory", "json_schema", "llm_judge")
#: The environment variables each provider's key comes from (any one of them).
API_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}


class SidecarError(ConfigError):
    """The sidecar is not valid; the message names the file, the table and the key."""


@attrs.frozen
class ModelSpec:
    """An agent's ``model = { provider = ..., ... }``.

    ``mock`` takes ``script`` (a script file, relative to the sidecar; see
    ``docs/evals.md``) or ``replies`` (the same scripts inline: one entry per
    model call, ``{ say = "..." }`` or ``{ call = [{ name = "...", arguments
    = {...} }] }``), exactly one. The others take ``id``; ``openai`` also
    ``api = "chat" | "responses"`` and ``base_url``.
    """

    provider: str
    id: str = ""
    api: str = "chat"
    base_url: str | None = None
    region: str | None = None
    scripts: ScriptFile | None = None

    def build(self, case_id: str | None = None) -> Model:
        """A fresh model (raises :class:`~helikon.errors.ConfigError` when its API key is missing)."""
        match self.provider:
            case "mock":
                assert self.scripts is not None
                return MockModel.from_script_file(
                    self.scripts, case_id, model_id=self.id or "mock-model", estimate_usage=True
                )
            case _:
                return _live_model(self)


def _live_model(spec: ModelSpec) -> Model:
    names = API_KEYS.get(spec.provider, ())
    if names and not any(os.environ.get(name) for name in names):
        raise ConfigError(
            f"the {spec.provider} model {spec.id!r} needs an API key: set {' or '.join(names)} "
            '(or use provider = "mock" to run without one)'
        )
    # A provider's adapter is imported when a sidecar names it: every command
    # (``--help`` included) would otherwise pay for all four at start-up.
    match spec.provider:
        case "openai":
            from helikon.providers.openai import OpenAIModel

            factory = OpenAIModel.responses if spec.api == "responses" else OpenAIModel.chat
            return factory(spec.id, base_url=spec.base_url) if spec.base_url else factory(spec.id)
        case "anthropic":
            from helikon.providers.anthropic import AnthropicModel

            return AnthropicModel.messages(spec.id)
        case "gemini":
            from helikon.providers.gemini import GeminiModel

            return GeminiModel.from_env(spec.id)
        case _:
            from helikon.providers.bedrock import BedrockModel

            return (
                BedrockModel.converse(spec.id, region=spec.region)
                if spec.region
                else BedrockModel.converse(spec.id)
            )


@attrs.frozen
class ToolDef:
    """A ``[tools.NAME]`` table."""

    name: str
    description: str
    params: dict[str, Any]
    source: str
    filename: str
    max_steps: int = DEFAULT_MAX_STEPS
    timeout: float = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB

    def build(self) -> StarlarkTool:
        return StarlarkTool(
            self.name,
            self.description,
            self.params,
            self.source,
            self.filename,
            self.max_steps,
            self.timeout,
            self.memory_mb,
        )


@attrs.frozen
class AgentDef:
    """An ``[agents.NAME]`` table."""

    name: str
    description: str
    instructions: str
    model: ModelSpec
    tools: tuple[str, ...] = ()
    handoffs: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    output: OutputSchema | None = None


@attrs.frozen
class EvalDef:
    """The ``[eval]`` table: which built-in evaluators ``helikon eval run`` uses."""

    evaluators: tuple[str, ...] = ("exact_match", "tool_trajectory")
    json_schema: dict[str, Any] | None = None
    judge_model: ModelSpec | None = None
    judge_rubric: str = ""
    judge_threshold: float = 0.5

    def build(self) -> list[Evaluator]:
        """Fresh evaluators, in the declared order."""
        built: list[Evaluator] = []
        for name in self.evaluators:
            match name:
                case "exact_match":
                    built.append(ExactMatch())
                case "tool_trajectory":
                    built.append(ToolUseTrajectory.exact())
                case "json_schema":
                    built.append(JsonSchemaEvaluator(self.json_schema))
                case _:
                    judge = self.judge_model
                    assert judge is not None

                    def model_for(case: EvalCase, judge: ModelSpec = judge) -> Model:
                        return judge.build(case.id)

                    built.append(LlmJudge(model_for, self.judge_rubric, threshold=self.judge_threshold))
        return built


@attrs.frozen
class Sidecar:
    """A loaded, validated ``agents.toml``."""

    path: Path
    agents: Mapping[str, AgentDef]
    tools: Mapping[str, ToolDef]
    eval: EvalDef
    #: Every file the definitions came from (the sidecar first): what a reload watches.
    files: tuple[Path, ...]
    mcp_servers: Mapping[str, McpServerDef] = attrs.field(factory=dict)
    permissions: PermissionsDef = PermissionsDef()
    workflows: Mapping[str, WorkflowDef] = attrs.field(factory=dict)

    @property
    def agent_names(self) -> tuple[str, ...]:
        """The agents' and workflows' names, sorted (a workflow runs like an agent)."""
        return tuple(sorted((*self.agents, *self.workflows)))

    def description(self, name: str) -> str:
        """What agent or workflow ``name`` does."""
        found = self.agents.get(name) or self.workflows.get(name)
        return found.description if found is not None else ""

    def context(self) -> RunContext[None]:
        """A fresh run context with the sidecar's ``[permissions]``."""
        return self.permissions.context()

    @property
    def default_agent(self) -> str:
        """The alphabetically first agent (the book's rule, whatever the file order)."""
        return self.agent_names[0]

    def agent(self, name: str) -> AgentDef | WorkflowDef:
        """The named agent's (or workflow's) definition; :class:`SidecarError` listing
        the known ones otherwise."""
        if name in self.workflows:
            return self.workflows[name]
        if name not in self.agents:
            known = ", ".join(self.agent_names)
            raise SidecarError(f"{self.path}: no agent {name!r} (agents: {known})")
        return self.agents[name]

    def build(self, name: str, case_id: str | None = None) -> Any:
        """A fresh agent ``name`` — an :class:`~helikon.LlmAgent`, or a workflow agent
        for a ``[workflows.NAME]`` — with its handoff targets and steps built too
        (fresh models, fresh tools, fresh MCP server handles).

        Raises:
            SidecarError: no such agent, or a model cannot be built (a missing API key).
        """
        self.agent(name)
        built: dict[str, Any] = {}

        def make(current: str) -> Any:
            if current in built:
                return built[current]
            if current in self.workflows:
                workflow = self.workflows[current].build(make)
                built[current] = workflow
                return workflow
            definition = self.agents[current]
            try:
                model = definition.model.build(case_id)
            except ConfigError as exc:
                raise SidecarError(f"{self.path}: [agents.{current}] model: {exc}") from None
            agent: LlmAgent[Any] = LlmAgent(
                name=current,
                model=model,
                instructions=definition.instructions or None,
                description=definition.description,
                tools=[self.tools[tool].build() for tool in definition.tools],
                handoffs=[Handoff.to(make(target)) for target in definition.handoffs],
                mcp_servers=[self.mcp_servers[server].build() for server in definition.mcp_servers],
                output_schema=definition.output,
            )
            built[current] = agent
            return agent

        return make(name)


def load_sidecar(path: str | os.PathLike[str]) -> Sidecar:
    """Read and validate the sidecar at ``path``.

    Raises:
        SidecarError: it cannot be read, is not TOML, or is not a valid sidecar.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise SidecarError(f"{source}: cannot read the sidecar: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SidecarError(f"{source}: not valid TOML: {exc}") from None
    return _Loader(source).load(data)


@attrs.define
class _Loader:
    path: Path
    files: list[Path] = attrs.Factory(list)

    def error(self, table: str, key: str | None, problem: str) -> SidecarError:
        where = f"[{table}]" + (f" {key}" if key else "")
        return SidecarError(f"{self.path}: {where}: {problem}")

    def relative(self, table: str, key: str, value: object) -> Path:
        if not isinstance(value, str) or not value:
            raise self.error(table, key, "must be a file path (relative to the sidecar)")
        found = self.path.parent / value
        if not found.is_file():
            raise self.error(table, key, f"no such file: {found}")
        self.files.append(found)
        return found

    def read(self, table: str, key: str, value: object) -> str:
        found = self.relative(table, key, value)
        try:
            return found.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise self.error(table, key, f"cannot read {found}: {exc}") from None

    def keys(
        self, table: str, value: object, required: Sequence[str], optional: Sequence[str]
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(table, None, "must be a table")
        for key in required:
            if key not in value:
                raise self.error(table, key, "is missing")
        unknown = sorted(k for k in value if k not in required and k not in optional)
        if unknown:
            allowed = ", ".join((*required, *optional))
            raise self.error(table, unknown[0], f"unknown key (allowed: {allowed})")
        return value

    def text(self, table: str, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.error(table, key, "must be a string")
        return value

    def names(self, table: str, key: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(table, key, "must be a list of names")
        return tuple(value)

    def load(self, data: dict[str, Any]) -> Sidecar:
        self.files.append(self.path)
        top = self.keys(
            "top level", data, ("agents",), ("tools", "eval", "mcp_servers", "permissions", "workflows")
        )
        raw_servers = top.get("mcp_servers", {})
        if not isinstance(raw_servers, dict):
            raise self.error("mcp_servers", None, "must be a table of [mcp_servers.NAME] tables")
        servers = {name: parse_mcp_server(self, name, raw) for name, raw in raw_servers.items()}
        permissions = parse_permissions(self, top.get("permissions", {}))
        raw_workflows = top.get("workflows", {})
        if not isinstance(raw_workflows, dict):
            raise self.error("workflows", None, "must be a table of [workflows.NAME] tables")
        workflows = {name: parse_workflow(self, name, raw) for name, raw in raw_workflows.items()}
        raw_tools = top.get("tools", {})
        if not isinstance(raw_tools, dict):
            raise self.error("tools", None, "must be a table of [tools.NAME] tables")
        tools = {name: self.tool(name, raw) for name, raw in raw_tools.items()}
        raw_agents = top["agents"]
        if not isinstance(raw_agents, dict) or not raw_agents:
            raise self.error("agents", None, "must hold at least one [agents.NAME] table")
        agents = {name: self.agent(name, raw) for name, raw in raw_agents.items()}
        for agent in agents.values():
            table = f"agents.{agent.name}"
            for tool in agent.tools:
                if tool not in tools:
                    raise self.error(table, "tools", f"names {tool!r}, but there is no [tools.{tool}] table")
            for target in agent.handoffs:
                if target not in agents:
                    raise self.error(
                        table, "handoffs", f"names {target!r}, but there is no [agents.{target}]"
                    )
            for server in agent.mcp_servers:
                if server not in servers:
                    raise self.error(
                        table, "mcp_servers", f"names {server!r}, but there is no [mcp_servers.{server}]"
                    )
        self.check_cycles(agents)
        check_workflows(self, workflows, tuple(agents))
        evaluation = self.evaluation(top.get("eval", {}))
        return Sidecar(
            self.path,
            agents,
            tools,
            evaluation,
            tuple(dict.fromkeys(self.files)),
            servers,
            permissions,
            workflows,
        )

    def tool(self, name: str, raw: object) -> ToolDef:
        table = f"tools.{name}"
        body = self.keys(
            table, raw, ("description",), ("params", "script", "inline", "max_steps", "timeout", "memory_mb")
        )
        if ("script" in body) == ("inline" in body):
            raise self.error(table, None, "give exactly one of script = \"file.star\" or inline = '''...'''")
        if "script" in body:
            found = self.relative(table, "script", body["script"])
            filename, source = str(found), self.read(table, "script", body["script"])
        else:
            filename, source = f"{self.path}[{table}]", self.text(table, "inline", body["inline"])
        params = body.get("params", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type") != "object":
            raise self.error(
                table, "params", 'must be a JSON Schema object schema ({ type = "object", ... })'
            )
        max_steps = body.get("max_steps", DEFAULT_MAX_STEPS)
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise self.error(table, "max_steps", "must be a positive integer")
        memory_mb = body.get("memory_mb", DEFAULT_MEMORY_MB)
        if not isinstance(memory_mb, int) or isinstance(memory_mb, bool) or memory_mb < 64:
            raise self.error(table, "memory_mb", "must be an integer of at least 64 (MiB)")
        timeout = body.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise self.error(table, "timeout", "must be a positive number of seconds")
        try:
            check_script(filename, source)
        except StarlarkLoadError as exc:
            raise self.error(table, "script" if "script" in body else "inline", str(exc)) from None
        return ToolDef(
            name,
            self.text(table, "description", body["description"]),
            params,
            source,
            filename,
            max_steps,
            float(timeout),
            memory_mb,
        )

    def agent(self, name: str, raw: object) -> AgentDef:
        table = f"agents.{name}"
        body = self.keys(
            table,
            raw,
            ("model",),
            ("description", "instructions", "tools", "handoffs", "mcp_servers", "output"),
        )
        instructions = body.get("instructions", "")
        if isinstance(instructions, dict):
            file = self.keys(f"{table}.instructions", instructions, ("file",), ())
            instructions = self.read(table, "instructions.file", file["file"])
        elif not isinstance(instructions, str):
            raise self.error(table, "instructions", 'must be a string or { file = "path.md" }')
        return AgentDef(
            name,
            self.text(table, "description", body.get("description", "")),
            instructions,
            self.model(table, "model", body["model"]),
            self.names(table, "tools", body.get("tools", [])),
            self.names(table, "handoffs", body.get("handoffs", [])),
            self.names(table, "mcp_servers", body.get("mcp_servers", [])),
            parse_output(self, table, body["output"]) if "output" in body else None,
        )

    def model(self, table: str, key: str, raw: object) -> ModelSpec:
        if not isinstance(raw, dict):
            raise self.error(table, key, 'must be a table such as { provider = "openai", id = "gpt-5-mini" }')
        provider = raw.get("provider")
        if provider not in PROVIDERS:
            raise self.error(
                table, f"{key}.provider", f"must be one of {', '.join(PROVIDERS)}, not {provider!r}"
            )
        where = f"{table}.{key}"
        if provider == "mock":
            body = self.keys(where, raw, ("provider",), ("script", "replies", "id"))
            if ("script" in body) == ("replies" in body):
                raise self.error(
                    table, key, 'a mock model takes exactly one of script = "file.json" or replies = [...]'
                )
            try:
                if "script" in body:
                    found = self.relative(table, f"{key}.script", body["script"])
                    scripts = ScriptFile.load(found)
                else:
                    scripts = ScriptFile.from_data(
                        {"default": body["replies"]}, source=f"{self.path} [{where}]"
                    )
            except ScriptFileError as exc:
                raise self.error(table, key, str(exc)) from None
            return ModelSpec("mock", self.text(where, "id", body.get("id", "mock-model")), scripts=scripts)
        body = self.keys(where, raw, ("provider", "id"), ("api", "base_url", "region"))
        api = body.get("api", "chat")
        if (provider != "openai" and "api" in body) or api not in ("chat", "responses"):
            raise self.error(table, f"{key}.api", 'is "chat" or "responses", for provider = "openai" only')
        return ModelSpec(
            provider,
            self.text(where, "id", body["id"]),
            api,
            self.text(where, "base_url", body["base_url"]) if "base_url" in body else None,
            self.text(where, "region", body["region"]) if "region" in body else None,
        )

    def check_cycles(self, agents: Mapping[str, AgentDef]) -> None:
        done: set[str] = set()

        def visit(name: str, path: list[str]) -> None:
            if name in path:
                cycle = [*path[path.index(name) :], name]
                raise SidecarError(
                    f"{self.path}: handoff cycle detected: {' -> '.join(cycle)} "
                    f"([agents.{path[-1]}] handoffs); declare one-way handoff chains"
                )
            if name in done:
                return
            for target in agents[name].handoffs:
                visit(target, [*path, name])
            done.add(name)

        for name in sorted(agents):
            visit(name, [])

    def evaluation(self, raw: object) -> EvalDef:
        body = self.keys("eval", raw, (), ("evaluators", "json_schema", "llm_judge"))
        evaluators = self.names(
            "eval", "evaluators", body.get("evaluators", ["exact_match", "tool_trajectory"])
        )
        for name in evaluators:
            if name not in EVALUATORS:
                raise self.error(
                    "eval", "evaluators", f"unknown evaluator {name!r} (known: {', '.join(EVALUATORS)})"
                )
        schema: dict[str, Any] | None = None
        if "json_schema" in body or "json_schema" in evaluators:
            block = self.keys("eval.json_schema", body.get("json_schema"), ("schema",), ())
            try:
                schema = msgspec.json.decode(self.read("eval.json_schema", "schema", block["schema"]))
            except msgspec.DecodeError as exc:
                raise self.error("eval.json_schema", "schema", f"not JSON: {exc}") from None
            if not isinstance(schema, dict):
                raise self.error("eval.json_schema", "schema", "must hold a JSON Schema object")
        judge: ModelSpec | None = None
        rubric, threshold = "", 0.5
        if "llm_judge" in body or "llm_judge" in evaluators:
            block = self.keys("eval.llm_judge", body.get("llm_judge"), ("model", "rubric"), ("threshold",))
            judge = self.model("eval.llm_judge", "model", block["model"])
            rubric = self.text("eval.llm_judge", "rubric", block["rubric"])
            threshold = block.get("threshold", 0.5)
            if (
                not isinstance(threshold, int | float)
                or isinstance(threshold, bool)
                or not 0 <= threshold <= 1
            ):
                raise self.error("eval.llm_judge", "threshold", "must be a number in [0, 1]")
        return EvalDef(evaluators, schema, judge, rubric, float(threshold))


__all__ = ["AgentDef", "EvalDef", "ModelSpec", "Sidecar", "SidecarError", "ToolDef", "load_sidecar"]
