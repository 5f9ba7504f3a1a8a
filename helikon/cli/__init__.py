"""The ``helikon`` command line and its ``agents.toml`` sidecar (the ``cli`` extra).

- :func:`main`: the console script (``helikon run / repl / eval run / mcp
  serve / trace show / trace diff / replay``); ``docs/cli.md`` is the guide.
- :func:`load_sidecar` / :class:`Sidecar`: agents, Starlark tools and
  ``[eval]`` declared in TOML, validated up front; ``Sidecar.build(name)``
  makes a fresh agent.
- :class:`StarlarkTool`: a tool whose body is a sandboxed Starlark script.
"""

from helikon.cli._app import app, main
from helikon.cli._sidecar import AgentDef, EvalDef, ModelSpec, Sidecar, SidecarError, ToolDef, load_sidecar
from helikon.cli._starlark import StarlarkTool

__all__ = [
    "AgentDef",
    "EvalDef",
    "ModelSpec",
    "Sidecar",
    "SidecarError",
    "StarlarkTool",
    "ToolDef",
    "app",
    "load_sidecar",
    "main",
]
